import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod } from '../../lib';
import { signRequest } from '../../lib/client';
import { resolveOptions } from '../../lib/options';
import { listeningTestApp, memoryLogger } from '../support/app';
import { postHead, rawClient } from '../support/raw-http';
import { hmacKey } from '../support/signature';

// A body that stalls is answered 408 REQUEST_TIMEOUT once bodyTimeoutMs passed from the start of
// its reading, and its connection is closed. The default bodyLimit is 100kb.

const echo = createBcmsFunction(async () => ({ config: { name: 'echo', public: true }, handler: async ({ request }) => request.body }));
const plugin = createBcmsPlugin({
  name: 'notes',
  controllers: [createController({ name: 'Notes', path: '/notes', methods: () => ({ add: createControllerMethod({ type: 'post', handler: async ({ request }) => request.body }) }) })],
});

describe('a stalled body', () => {
  const running = listeningTestApp({ functions: [echo], plugins: [plugin] }, { bodyTimeoutMs: 300 });
  const roomy = listeningTestApp({ functions: [echo] }, { bodyTimeoutMs: 600_000 });

  test.each([
    ['a function', '/api/function/echo', { success: false, error: { code: 'REQUEST_TIMEOUT', message: 'The request body did not arrive within 300 ms.' } }],
    ['a plugin route', '/api/plugin/notes/notes', { message: 'The request body did not arrive within 300 ms.' }],
  ])('%s: 408 after bodyTimeoutMs, and the connection closed', async (_what, path, body) => {
    const client = rawClient(running.port);
    client.write(`${postHead(path, 100)}{"text":"x`);
    const answer = await client.next();
    expect(answer.status).toBe(408);
    expect(answer.body).toEqual(body);
    expect(answer.headers.connection).toBe('close');
    expect(answer.headers['access-control-allow-origin']).toBe('*');
    await client.closed;
    const line = running.t.log.lines.find((entry) => entry.msg === 'request' && entry.path === path && entry.status === 408);
    expect(line).toBeDefined();
  });

  test('a deployment whose signed body stalls: 408, and the connection closed', async () => {
    const key = await hmacKey(running.t.router.db, [], { deploy: true, name: 'stalled deployer' });
    const body = JSON.stringify({ manifest: { kind: 'function', name: 'never', version: '1.0.0' }, code: 'x'.repeat(1000) });
    const headers = signRequest({ ...key, method: 'POST', url: '/api/extensions/deployments', body });
    const client = rawClient(running.port);
    client.write(postHead('/api/extensions/deployments', Buffer.byteLength(body), headers) + body.slice(0, 10));
    const answer = await client.next();
    expect(answer.status).toBe(408);
    expect(answer.body).toEqual({ message: 'The request body did not arrive within 300 ms.' });
    expect(answer.headers.connection).toBe('close');
    await client.closed;
  });

  test('a body that arrives in time is answered as ever', async () => {
    // In time by far: a router whose bodies may take all the time a loaded machine needs between two pieces.
    const client = rawClient(roomy.port);
    const body = '{"text":"slow but there"}';
    client.write(postHead('/api/function/echo', body.length) + body.slice(0, 5));
    await new Promise((resolve) => setTimeout(resolve, 100));
    client.write(body.slice(5));
    const answer = await client.next();
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ success: true, result: { text: 'slow but there' } });
    client.destroy();
  });
});

describe('options', () => {
  test('bodyLimit defaults to 100kb, bodyTimeoutMs to 10000', () => {
    const settings = resolveOptions({ logger: memoryLogger().logger });
    expect(settings.bodyLimit).toBe(100 * 1024);
    expect(settings.bodyTimeoutMs).toBe(10_000);
  });

  test.each([0, -1, 1.5, '300'])('bodyTimeoutMs %p throws', (value) => {
    expect(() => bcmsExtensions({}, { bodyTimeoutMs: value as never, logger: memoryLogger().logger })).toThrow(`option bodyTimeoutMs must be a positive integer of milliseconds, got ${String(value)}`);
  });

  test('a misspelt name throws', () => {
    expect(() => bcmsExtensions({}, { bodyTimeout: 300 } as never)).toThrow('unknown option "bodyTimeout"');
  });
});

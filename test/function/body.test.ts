import request from 'supertest';
import { bcmsExtensions, createBcmsFunction } from '../../lib';
import { listeningTestApp, memoryLogger, role, signToken } from '../support/app';
import { postHead, rawClient } from '../support/raw-http';
import { hmacKey, signedPost } from '../support/signature';

// A private function called with a bearer token (or with nothing) is decided before its body is
// read; a signature, whose digest covers the bytes, reads them first. Functions may set their own
// bodyLimit (config.bodyLimit), which wins over the router's.

const MB = 1024 * 1024;
let calls = 0;

const privateEcho = createBcmsFunction(async () => ({
  config: { name: 'private-echo', public: false },
  handler: async ({ request }) => {
    calls += 1;
    return request.body;
  },
}));

const smallEcho = createBcmsFunction(async () => ({
  config: { name: 'small-echo', public: false, bodyLimit: '1kb' },
  handler: async ({ request }) => request.body,
}));

const publicEcho = createBcmsFunction(async () => ({
  config: { name: 'public-echo', public: true },
  handler: async ({ request }) => request.body,
}));

describe('private functions: the caller is decided before the body', () => {
  // Bodies that never arrive whole are given up after 1 s here (the tests wait for that close); the
  // bodies that do arrive go to an app with all the time a loaded machine may need to read them.
  const running = listeningTestApp({ functions: [privateEcho, smallEcho, publicEcho] }, { bodyTimeoutMs: 1000 });
  const roomy = listeningTestApp({ functions: [privateEcho, smallEcho, publicEcho] }, { bodyTimeoutMs: 600_000 });

  test.each([
    ['a bad bearer token', { Authorization: 'Bearer not.a.token' }, 401, 'TOKEN_INVALID'],
    ['a bearer token without EXECUTE', { Authorization: `Bearer ${signToken([role('ADMIN', 'READ')])}` }, 403, 'TOKEN_FORBIDDEN'],
    ['no credential at all', {}, 401, 'SIGNATURE_REQUIRED'],
  ])('%s, 10 bytes of a 1 MB body sent: answered at once', async (_what, headers, status, code) => {
    const before = calls;
    const client = rawClient(running.port);
    client.write(`${postHead('/api/function/private-echo', MB, headers)}[[[[[[[[[[`);
    const answer = await client.next();
    expect(answer.status).toBe(status);
    expect(answer.body).toMatchObject({ success: false, error: { code } });
    expect(calls).toBe(before);
    await client.closed; // the rest never comes: closed after bodyTimeoutMs
  });

  test('a bearer token with EXECUTE: the body is read, the function runs', async () => {
    const res = await request(roomy.t.app)
      .post('/api/function/private-echo')
      .set('Authorization', `Bearer ${signToken([role('ADMIN', 'EXECUTE')])}`)
      .send({ a: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: { a: 1 } });
  });

  test('a signed call still works: its body is read for the digest, then parsed for the handler', async () => {
    const key = await hmacKey(roomy.t.router.db, ['private-echo', 'small-echo']);
    const res = await signedPost(roomy.t.app, '/api/function/private-echo', key, { signed: [1, 2, 3] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: { signed: [1, 2, 3] } });
    // The function's own limit holds for a signed body too.
    const big = await signedPost(roomy.t.app, '/api/function/small-echo', key, { text: 'x'.repeat(2048) });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ success: false, error: { code: 'BODY_TOO_LARGE', message: 'Request body is larger than the limit of 1024 bytes.' } });
  });

  test("config.bodyLimit wins over the router's; the default is 100kb", async () => {
    const executor = `Bearer ${signToken([role('ADMIN', 'EXECUTE')])}`;
    const small = await request(roomy.t.app)
      .post('/api/function/small-echo')
      .set('Authorization', executor)
      .send({ text: 'x'.repeat(2048) });
    expect(small.status).toBe(413);
    expect(small.body.error).toEqual({ code: 'BODY_TOO_LARGE', message: 'Request body is larger than the limit of 1024 bytes.' });
    const fits = await request(roomy.t.app)
      .post('/api/function/small-echo')
      .set('Authorization', executor)
      .send({ text: 'x'.repeat(900) });
    expect(fits.status).toBe(200);
    const open = await request(roomy.t.app)
      .post('/api/function/public-echo')
      .send({ text: 'x'.repeat(2048) });
    expect(open.status).toBe(200);
    const big = await request(roomy.t.app)
      .post('/api/function/public-echo')
      .send({ text: 'x'.repeat(150 * 1024) });
    expect(big.status).toBe(413);
    expect(big.body.error).toEqual({ code: 'BODY_TOO_LARGE', message: 'Request body is larger than the limit of 102400 bytes.' });
  });
});

test('a config.bodyLimit that is not a size rejects ready, naming the function', async () => {
  const wrong = createBcmsFunction(async () => ({ config: { name: 'wrong', public: true, bodyLimit: 'lots' }, handler: async () => null }));
  const router = bcmsExtensions({ functions: [wrong] }, { database: { pglite: 'memory://' }, logger: memoryLogger().logger });
  await expect(router.ready).rejects.toThrow('function "wrong": config: bodyLimit must be a byte count or a size such as "16kb", got "lots"');
  await router.close();
}, 60_000);

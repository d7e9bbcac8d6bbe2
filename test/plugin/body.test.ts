import request from 'supertest';
import { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, listeningTestApp, role, signToken, type TestApp } from '../support/app';
import { postHead, rawClient } from '../support/raw-http';

// Guards that decide on a bearer token answer before the body is read; the body is read only once
// they accepted (issue 23, item 5). Methods may set their own bodyLimit.

const MB = 1024 * 1024;
let handled = 0;

const plugin = createBcmsPlugin({
  name: 'inbox',
  controllers: [
    createController({
      name: 'Inbox',
      path: '/inbox',
      methods: () => ({
        post: createControllerMethod({
          path: '/',
          type: 'post',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.WRITE),
          handler: async ({ request, accessToken }) => {
            handled += 1;
            return { by: accessToken.payload.userId, got: request.body };
          },
        }),
        small: createControllerMethod({ path: '/small', type: 'post', bodyLimit: '1kb', handler: async ({ request }) => ({ size: JSON.stringify(request.body).length }) }),
        open: createControllerMethod({ path: '/open', type: 'post', handler: async ({ request }) => ({ size: JSON.stringify(request.body).length }) }),
      }),
    }),
  ],
});

const writer = (): string => signToken([role('ADMIN', 'WRITE')]);

describe('a JWT guard answers before the body is read', () => {
  // A rest that never comes is given up after 1 s here (what one test checks, the others wait for);
  // bodies that arrive whole go to an app with all the time a loaded machine may need to read them.
  const running = listeningTestApp({ plugins: [plugin] }, { bodyLimit: '2mb', bodyTimeoutMs: 1000 });
  const roomy = listeningTestApp({ plugins: [plugin] }, { bodyLimit: '2mb', bodyTimeoutMs: 600_000 });

  test.each([
    ['no token', {}, 401, { message: 'Token is `undefined`.' }],
    ['a bad token', { Authorization: 'Bearer not.a.token' }, 401, { message: 'Invalid token.' }],
    ['a token without the permission', { Authorization: `Bearer ${signToken([role('ADMIN', 'READ')])}` }, 403, { message: 'Token is not authorized for this action.' }],
  ])('%s, 10 bytes of a 1 MB body sent: the answer comes while the client still holds the rest', async (_what, headers, status, body) => {
    const before = handled;
    const client = rawClient(running.port);
    client.write(`${postHead('/api/plugin/inbox/inbox', MB, headers)}[[[[[[[[[[`);
    const answer = await client.next();
    expect(answer.status).toBe(status);
    expect(answer.body).toEqual(body);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(handled).toBe(before);
    // Too much left to drain: the answer closes the connection.
    expect(answer.headers.connection).toBe('close');
    await client.closed;
  });

  test('a small rest is drained within bodyTimeoutMs: the connection stays open for it, then closes when it never comes', async () => {
    const client = rawClient(running.port);
    const started = Date.now();
    client.write(`${postHead('/api/plugin/inbox/inbox', 1000)}[[[[[[[[[[`);
    const answer = await client.next();
    expect(answer.status).toBe(401);
    expect(answer.headers.connection).not.toBe('close');
    await client.closed;
    expect(Date.now() - started).toBeGreaterThanOrEqual(900); // bodyTimeoutMs: 1000
  });

  test('a small refused body that arrives whole is dropped unparsed, and the connection serves the next request', async () => {
    const nested = '['.repeat(30_000) + ']'.repeat(30_000);
    const client = rawClient(roomy.port);
    client.write(postHead('/api/plugin/inbox/inbox', nested.length) + nested);
    const refused = await client.next();
    expect(refused.status).toBe(401);
    expect(refused.headers.connection).not.toBe('close');
    const body = JSON.stringify({ hello: 'again' });
    client.write(postHead('/api/plugin/inbox/inbox', Buffer.byteLength(body), { Authorization: `Bearer ${writer()}` }) + body);
    const accepted = await client.next();
    expect(accepted.status).toBe(200);
    expect(accepted.body).toEqual({ by: 'user-1', got: { hello: 'again' } });
    client.destroy();
  });

  test('with a good token the body is read and parsed for the handler', async () => {
    const res = await request(roomy.t.app)
      .post('/api/plugin/inbox/inbox')
      .set('Authorization', `Bearer ${writer()}`)
      .send({ a: [1, 2] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ by: 'user-1', got: { a: [1, 2] } });
  });

  test('a 1 MB body without a token, sent whole through supertest: 401', async () => {
    const res = await request(roomy.t.app)
      .post('/api/plugin/inbox/inbox')
      .set('Content-Type', 'application/json')
      .send('['.repeat(MB / 2) + ']'.repeat(MB / 2));
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Token is `undefined`.' });
  });
});

describe("a method's own bodyLimit", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [plugin] });
  }, 60_000);
  afterAll(() => t.router.close());

  test("wins over the router's: 413 past 1 KB on its route, the default 100kb elsewhere", async () => {
    const twoKb = { text: 'x'.repeat(2048) };
    const small = await request(t.app).post('/api/plugin/inbox/inbox/small').send(twoKb);
    expect(small.status).toBe(413);
    expect(small.body).toEqual({ message: 'Request body is larger than the limit of 1024 bytes.' });
    expect(small.headers.connection).toBe('close');
    const fits = await request(t.app)
      .post('/api/plugin/inbox/inbox/small')
      .send({ text: 'x'.repeat(900) });
    expect(fits.status).toBe(200);
    const open = await request(t.app).post('/api/plugin/inbox/inbox/open').send(twoKb);
    expect(open.status).toBe(200);
    const big = await request(t.app)
      .post('/api/plugin/inbox/inbox/open')
      .send({ text: 'x'.repeat(150 * 1024) });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ message: 'Request body is larger than the limit of 102400 bytes.' });
  });

  test('a limit that is not a size throws where the method is made', () => {
    expect(() => createControllerMethod({ type: 'post', bodyLimit: 'lots', handler: async () => ({}) })).toThrow(
      'createControllerMethod: bodyLimit must be a byte count or a size such as "16kb", got "lots"',
    );
  });
});

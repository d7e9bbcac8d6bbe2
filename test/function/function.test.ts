import request from 'supertest';
import express from 'express';
import { bcmsExtensions, createBcmsFunction } from '../../lib';
import { buildApp, memoryLogger, role, signToken, type TestApp } from '../support/app';

const echo = createBcmsFunction(async () => ({
  config: { name: 'echo', public: true },
  handler: async ({ request }) => ({ body: request.body === undefined ? '<undefined>' : request.body }),
}));

let lastAuth: unknown;
const secret = createBcmsFunction(async () => ({
  config: { name: 'secret-report', public: false },
  handler: async ({ auth }) => {
    lastAuth = auth;
    return { report: 42 };
  },
}));

const failing = createBcmsFunction(async () => ({
  config: { name: 'failing', public: true },
  handler: async ({ errorHandler, request }) => {
    if (request.body?.kind === 'handled') throw errorHandler.occurred(422, 'Field "email" is required.');
    throw new TypeError('cannot read properties of undefined (reading "password")');
  },
}));

const slow = createBcmsFunction(async () => ({
  config: { name: 'slow', public: true },
  // Never ends: past functionTimeoutMs however busy the machine (the router answers; the handler runs on).
  handler: () => new Promise(() => {}),
}));

const returnsUndefined = createBcmsFunction(async () => ({
  config: { name: 'void', public: true },
  handler: async () => undefined,
}));

const ERROR_SHAPE = (code: string, message: string | RegExp) => ({
  success: false,
  error: { code, message: message instanceof RegExp ? expect.stringMatching(message) : message },
});

describe('public functions', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ functions: [echo, failing, slow, returnsUndefined] }, { bodyLimit: '1kb', functionTimeoutMs: 150 });
  });

  test.each([
    ['an object', { title: 'Hello' }],
    ['an array', [1, 'two', { three: 3 }]],
    ['a string', 'plain'],
    ['a number', 12.5],
    ['null', null],
    ['a boolean', false],
  ])('POST with %s as the body: 200 { success: true, result }', async (_name, body) => {
    const res = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send(JSON.stringify(body));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.body).toEqual({ success: true, result: { body } });
  });

  test('no body: request.body is {}, as in BCMS', async () => {
    const res = await request(t.app).post('/api/function/echo');
    expect(res.body).toEqual({ success: true, result: { body: {} } });
    const empty = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send('');
    expect(empty.body).toEqual({ success: true, result: { body: {} } });
  });

  test('a handler that returns nothing answers result: null', async () => {
    const res = await request(t.app).post('/api/function/void');
    expect(res.text).toBe('{"success":true,"result":null}');
  });

  test('malformed JSON: 400 INVALID_JSON', async () => {
    const res = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send('{"a": tru');
    expect(res.status).toBe(400);
    expect(res.body).toEqual(ERROR_SHAPE('INVALID_JSON', 'Request body is not valid JSON.'));
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  test('body over bodyLimit: 413 BODY_TOO_LARGE, with or without Content-Length', async () => {
    const big = JSON.stringify({ data: 'x'.repeat(2_000) });
    const res = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send(big);
    expect(res.status).toBe(413);
    expect(res.body).toEqual(ERROR_SHAPE('BODY_TOO_LARGE', 'Request body is larger than the limit of 1024 bytes.'));
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers.connection).toBe('close');

    // Chunked: no Content-Length, so the limit is found while reading.
    const chunked = request(t.app).post('/api/function/echo').set('Content-Type', 'application/json');
    chunked.write(big.slice(0, 1_000));
    chunked.write(big.slice(1_000));
    const streamed = await chunked;
    expect(streamed.status).toBe(413);
    expect(streamed.body.error.code).toBe('BODY_TOO_LARGE');
    expect((await request(t.app).post('/api/function/echo').send({ ok: 1 })).status).toBe(200);
  });

  test('unknown function: 404 FUNCTION_NOT_FOUND, for any method and nested path', async () => {
    for (const [method, path] of [
      ['post', '/api/function/nope'],
      ['get', '/api/function/nope'],
      ['post', '/api/function/echo/extra'],
      ['post', '/api/function/'],
      ['post', '/api/function'],
    ] as const) {
      const res = await request(t.app)[method](path);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(res.body.success).toBe(false);
      expect(res.body.error.code).toBe('FUNCTION_NOT_FOUND');
      if (path === '/api/function/nope') expect(res.body.error.message).toBe('Function "nope" not found.');
      expect(res.headers['access-control-allow-origin']).toBe('*');
    }
  });

  test('wrong method on a function: 405 METHOD_NOT_ALLOWED with Allow', async () => {
    for (const method of ['get', 'put', 'patch', 'delete'] as const) {
      const res = await request(t.app)[method]('/api/function/echo');
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('POST, OPTIONS');
      expect(res.body).toEqual(ERROR_SHAPE('METHOD_NOT_ALLOWED', /use POST/));
    }
  });

  test('errorHandler.occurred: that status, code HANDLER_ERROR and the message', async () => {
    const res = await request(t.app).post('/api/function/failing').send({ kind: 'handled' });
    expect(res.status).toBe(422);
    expect(res.body).toEqual(ERROR_SHAPE('HANDLER_ERROR', 'Field "email" is required.'));
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  test('an unexpected throw: bare 500 INTERNAL_ERROR naming the request id, which the log has too', async () => {
    const res = await request(t.app).post('/api/function/failing').send({});
    expect(res.status).toBe(500);
    const id = res.headers['x-request-id'];
    expect(res.body).toEqual(ERROR_SHAPE('INTERNAL_ERROR', `Internal error. Request id: ${id}.`));
    expect(res.text).not.toMatch(/password|TypeError|at /);
    expect(t.log.lines.some((line) => line.requestId === id && line.level === 50 && JSON.stringify(line).includes('password'))).toBe(true);
  });

  test('a function past functionTimeoutMs: 504 FUNCTION_TIMEOUT, and the process keeps serving', async () => {
    const res = await request(t.app).post('/api/function/slow');
    expect(res.status).toBe(504);
    expect(res.body).toEqual(ERROR_SHAPE('FUNCTION_TIMEOUT', 'Function "slow" ran past its time-out of 150 ms.'));
    expect((await request(t.app).post('/api/function/echo').send({ after: true })).body.result).toEqual({ body: { after: true } });
  });

  test('a body a host middleware consumed without setting req.body does not hang the request', async () => {
    const router = bcmsExtensions({ functions: [echo] }, { logger: memoryLogger().logger, database: t.router.db });
    const app = express();
    app.use((req, _res, next) => {
      req.resume();
      req.on('end', () => next());
    });
    app.use(router);
    await router.ready;
    const res = await request(app).post('/api/function/echo').send({ lost: true });
    expect(res.body).toEqual({ success: true, result: { body: {} } });
  });

  test('a body a host parser already read is used as it is (unsigned routes)', async () => {
    const router = bcmsExtensions({ functions: [echo] }, { logger: memoryLogger().logger, database: t.router.db });
    const app = express();
    app.use(express.json());
    app.use(router);
    await router.ready;
    const res = await request(app).post('/api/function/echo').send({ parsedBy: 'host' });
    expect(res.body).toEqual({ success: true, result: { body: { parsedBy: 'host' } } });
  });
});

describe('private functions', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ functions: [secret] });
  });

  test('neither a token nor a signature: 401 SIGNATURE_REQUIRED with WWW-Authenticate: Signature', async () => {
    const res = await request(t.app).post('/api/function/secret-report').send({});
    expect(res.status).toBe(401);
    expect(res.body).toEqual(ERROR_SHAPE('SIGNATURE_REQUIRED', 'This function is private: sign the request (HTTP Signature) or send a bearer token whose role holds EXECUTE.'));
    expect(res.headers['www-authenticate']).toMatch(/^Signature /);
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  test('a JWT whose role holds EXECUTE is accepted, and auth names it', async () => {
    const res = await request(t.app)
      .post('/api/function/secret-report')
      .set('Authorization', `Bearer ${signToken([role('SERVICE', 'EXECUTE')])}`)
      .send({});
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: { report: 42 } });
    expect(lastAuth).toMatchObject({ type: 'jwt', accessToken: { payload: { userId: 'user-1' } } });
  });

  test('a valid JWT without EXECUTE: 403 TOKEN_FORBIDDEN', async () => {
    const res = await request(t.app)
      .post('/api/function/secret-report')
      .set('Authorization', `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE')])}`);
    expect(res.status).toBe(403);
    expect(res.body).toEqual(ERROR_SHAPE('TOKEN_FORBIDDEN', 'Token has no role with the EXECUTE permission.'));
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  test.each([
    ['a malformed JWT', 'x.y.z', 'Invalid token.'],
    ['a JWT with another secret', signToken([role('ADMIN', 'EXECUTE')], { secret: 'not-the-right-secret-at-all' }), 'Invalid token.'],
    ['an expired JWT', signToken([role('ADMIN', 'EXECUTE')], { payload: { exp: 1 } }), 'Token has expired.'],
  ])('%s: 401 TOKEN_INVALID with WWW-Authenticate: Bearer', async (_name, token, message) => {
    const res = await request(t.app).post('/api/function/secret-report').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual(ERROR_SHAPE('TOKEN_INVALID', message));
    expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
  });

  test('the body is not read before the caller is authenticated', async () => {
    const res = await request(t.app).post('/api/function/secret-report').set('Content-Type', 'application/json').send('{broken');
    expect(res.status).toBe(401);
  });
});

describe('a client that goes away mid-body', () => {
  test('is logged at debug level as status 499, not as an unexpected error, and the server goes on', async () => {
    const t = await buildApp({ functions: [echo] });
    const server = t.app.listen(0);
    const { port } = server.address() as import('node:net').AddressInfo;
    const net = await import('node:net');
    await new Promise<void>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write('POST /api/function/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"half":');
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 50);
      });
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const line = t.log.lines.find((entry) => entry.msg === 'request' && entry.path === '/api/function/echo');
    expect(line?.status).toBe(499);
    expect(t.log.lines.some((entry) => entry.level === 50)).toBe(false);
    expect(t.log.lines.some((entry) => entry.msg === 'bcms-extensions: client closed the request' && entry.level === 20)).toBe(true);
    expect((await request(server).post('/api/function/echo').send({ after: 1 })).status).toBe(200);
    server.close();
  });
});

import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { signRequest } from '../../lib/client';
import { buildApp, role, signToken } from '../support/app';
import { hmacKey } from '../support/signature';

const plugin = createBcmsPlugin({
  name: 'log',
  controllers: [
    createController({
      name: 'Log',
      path: '/x',
      methods: () => ({
        get: createControllerMethod({
          path: '/',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
          handler: async () => ({ ok: true }),
        }),
      }),
    }),
  ],
});
const fn = createBcmsFunction(async () => ({ config: { name: 'store', public: true }, handler: async () => 'stored' }));

describe('request log', () => {
  test('one structured line per request: method, path, status, time, request id (= X-Request-Id); no tokens, bodies or queries', async () => {
    const t = await buildApp({ plugins: [plugin], functions: [fn] });
    const token = signToken();
    const ok = await request(t.app).get('/api/plugin/log/x?access_token=query-secret').set('Authorization', `Bearer ${token}`);
    const posted = await request(t.app).post('/api/function/store').send({ password: 'body-secret' });
    const denied = await request(t.app).get('/api/plugin/log/x');
    await request(t.app).get('/host/health'); // the host's own routes are not ours to log

    const lines = t.log.lines.filter((line) => line.msg === 'request');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({ requestId: ok.headers['x-request-id'], method: 'GET', path: '/api/plugin/log/x', status: 200, level: 30 });
    expect(lines[1]).toMatchObject({ requestId: posted.headers['x-request-id'], method: 'POST', path: '/api/function/store', status: 200 });
    expect(lines[2]).toMatchObject({ requestId: denied.headers['x-request-id'], status: 401 });
    for (const line of lines) expect(typeof line.ms).toBe('number');
    const text = t.log.text();
    expect(text).not.toContain(token);
    expect(text).not.toContain('query-secret');
    expect(text).not.toContain('body-secret');
  });

  test('the lines of signed and JWT calls, accepted or refused, hold no credential: no Authorization, signature, token or secret', async () => {
    const report = createBcmsFunction(async () => ({ config: { name: 'report', public: false }, handler: async () => ({ ok: true }) }));
    const t = await buildApp({ plugins: [plugin], functions: [report] });
    const key = await hmacKey(t.router.db, ['report']);
    const path = '/api/function/report?signature=query-signature&token=query-token';
    const headers = signRequest({ ...key, method: 'POST', url: path, body: '{}' });
    const signature = /signature="([^"]+)"/.exec(headers.Authorization as string)?.[1] as string;
    const send = () => request(t.app).post(path).set(headers).set('Content-Type', 'application/json').send('{}');
    const token = signToken([role('ADMIN', 'READ', 'EXECUTE')]);
    const answers = [
      await send(), // accepted
      await send(), // a replay: 401
      await request(t.app).post(path).set('Authorization', `Bearer ${token}`).send({}),
      await request(t.app).get('/api/plugin/log/x').set('Authorization', `Bearer ${token}`),
      await request(t.app).get('/api/plugin/log/x').set('Authorization', `Bearer ${token}x`), // a bad token: 401
    ];
    expect(answers.map((res) => res.status)).toEqual([200, 401, 200, 200, 401]);

    const lines = t.log.lines.filter((line) => line.msg === 'request');
    expect(lines.map((line) => line.path)).toEqual(['/api/function/report', '/api/function/report', '/api/function/report', '/api/plugin/log/x', '/api/plugin/log/x']);
    const text = t.log.text();
    for (const credential of [headers.Authorization as string, signature, key.secret, token, 'query-signature', 'query-token']) expect(text).not.toContain(credential);
  });

  test("a client's or a proxy's X-Request-Id is kept when fit for a log line (else one is made); a valid traceparent's trace id is logged", async () => {
    const t = await buildApp({ functions: [fn] });
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const send = (headers: Record<string, string>) => request(t.app).post('/api/function/store').set(headers);
    const cases = [
      await send({ 'X-Request-Id': 'lb-7f3a.2:x_1', traceparent: `00-${trace}-00f067aa0ba902b7-01` }),
      await send({ 'X-Request-Id': 'x'.repeat(129) }), // too long
      await send({ 'X-Request-Id': 'a"b\\c' }), // characters a log line would escape
      await send({ 'X-Request-Id': '' }),
      await send({ traceparent: `ff-${trace}-00f067aa0ba902b7-01` }), // version ff is invalid
      await send({ traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` }), // an all-zero trace id is invalid
      await send({ traceparent: `00-${trace.toUpperCase()}-00f067aa0ba902b7-01` }), // upper-case hex is invalid
    ];
    expect(cases.map((res) => res.status)).toEqual([200, 200, 200, 200, 200, 200, 200]);
    const ids = cases.map((res) => res.headers['x-request-id'] as string);
    expect(ids[0]).toBe('lb-7f3a.2:x_1');
    for (const made of ids.slice(1)) expect(made).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
    const lines = t.log.lines.filter((line) => line.msg === 'request');
    expect(lines.map((line) => line.requestId)).toEqual(ids);
    expect(lines.map((line) => line.traceId)).toEqual([trace, undefined, undefined, undefined, undefined, undefined, undefined]);
  });

  test('request ids differ from request to request', async () => {
    const t = await buildApp({ functions: [fn] });
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) ids.add((await request(t.app).post('/api/function/store')).headers['x-request-id'] as string);
    expect(ids.size).toBe(5);
  });
});

import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, signToken } from '../support/app';

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

  test('request ids differ from request to request', async () => {
    const t = await buildApp({ functions: [fn] });
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) ids.add((await request(t.app).post('/api/function/store')).headers['x-request-id'] as string);
    expect(ids.size).toBe(5);
  });
});

import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, role, signToken, type TestApp } from '../support/app';

// As expressjs/cors does: the CORS headers are still there on every error the router answers.
const cms = createBcmsPlugin({
  name: 'cms',
  controllers: [
    createController({
      name: 'Things',
      path: '/things',
      methods: () => ({
        list: createControllerMethod({ path: '/', type: 'get', handler: async () => ({ things: [] }) }),
        guarded: createControllerMethod({
          path: '/guarded',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.WRITE),
          handler: async () => ({ ok: true }),
        }),
        crash: createControllerMethod({
          path: '/crash',
          type: 'post',
          handler: async () => {
            throw new Error('boom');
          },
        }),
      }),
    }),
  ],
});

const functions = [
  createBcmsFunction(async () => ({ config: { name: 'open', public: true }, handler: async () => 'ok' })),
  createBcmsFunction(async () => ({ config: { name: 'closed', public: false }, handler: async () => 'ok' })),
  createBcmsFunction(async () => ({ config: { name: 'hang', public: true }, handler: () => new Promise(() => {}) })),
];

describe('CORS on every response', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [cms], functions }, { bodyLimit: 16, functionTimeoutMs: 50 });
  });

  const cases: [string, (t: TestApp) => request.Test, number][] = [
    ['200 plugin', (t) => request(t.app).get('/api/plugin/cms/things'), 200],
    ['200 function', (t) => request(t.app).post('/api/function/open'), 200],
    ['400 invalid JSON', (t) => request(t.app).post('/api/function/open').set('Content-Type', 'application/json').send('{'), 400],
    ['401 no token', (t) => request(t.app).get('/api/plugin/cms/things/guarded'), 401],
    ['401 signature required', (t) => request(t.app).post('/api/function/closed'), 401],
    [
      '403 forbidden',
      (t) =>
        request(t.app)
          .get('/api/plugin/cms/things/guarded')
          .set('Authorization', `Bearer ${signToken([role('ADMIN', 'READ')])}`),
      403,
    ],
    ['404 unknown function', (t) => request(t.app).post('/api/function/none'), 404],
    ['405 wrong method', (t) => request(t.app).delete('/api/plugin/cms/things'), 405],
    ['413 too large', (t) => request(t.app).post('/api/function/open').send({ much: 'more than sixteen bytes' }), 413],
    ['500 crash', (t) => request(t.app).post('/api/plugin/cms/things/crash'), 500],
    ['504 time-out', (t) => request(t.app).post('/api/function/hang'), 504],
  ];

  test.each(cases)('%s carries Access-Control-Allow-Origin: *, X-Request-Id and JSON', async (_name, send, status) => {
    const res = await send(t);
    expect(res.status).toBe(status);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    expect(res.headers['x-request-id']).toBeDefined();
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    // An error lets a browser script read why it failed and which log line to look for.
    if (status >= 400) expect(res.headers['access-control-expose-headers']).toBe('X-Request-Id, WWW-Authenticate, Allow');
  });

  test('OPTIONS preflight on a plugin path: 204 with the path verbs and the requested headers', async () => {
    const res = await request(t.app)
      .options('/api/plugin/cms/things')
      .set('Origin', 'https://admin.example.com')
      .set('Access-Control-Request-Method', 'GET')
      .set('Access-Control-Request-Headers', 'authorization, content-type');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-methods']).toBe('GET, OPTIONS');
    expect(res.headers['access-control-allow-headers']).toBe('authorization, content-type');
    expect(res.text).toBe('');
  });

  test('OPTIONS preflight on a guarded path and a private function needs no credentials', async () => {
    const guarded = await request(t.app).options('/api/plugin/cms/things/guarded').set('Access-Control-Request-Method', 'GET');
    expect(guarded.status).toBe(204);
    const fn = await request(t.app).options('/api/function/closed').set('Access-Control-Request-Method', 'POST');
    expect(fn.status).toBe(204);
    expect(fn.headers['access-control-allow-methods']).toBe('POST, OPTIONS');
    expect(fn.headers['access-control-allow-headers']).toMatch(/Authorization/);
  });

  test('OPTIONS on a path no plugin serves falls through to the host', async () => {
    const res = await request(t.app).options('/api/plugin/cms/nothing-here');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ host404: true });
  });
});

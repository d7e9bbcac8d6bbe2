import cors from 'cors';
import express, { type Express } from 'express';
import request from 'supertest';
import {
  bcmsExtensions,
  createBcmsFunction,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
  type BcmsExtensionsOptions,
} from '../../lib';
import { buildApp, JWT_SECRET, memoryLogger, role, signToken, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';

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
    // Every answer lets a browser script read which log line to look for, and an error why it failed.
    expect(res.headers['access-control-expose-headers']).toBe('X-Request-Id, WWW-Authenticate, Allow, Retry-After, Idempotent-Replayed, ETag');
    expect(res.headers.vary).toBeUndefined();
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
    expect(res.headers['access-control-max-age']).toBe('600');
    expect(res.headers.allow).toBe('GET, OPTIONS');
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

/** An app as a host builds one: `before` (its own middleware) first, then the router, its own route and its 404. */
async function hostApp(options: BcmsExtensionsOptions, before?: express.RequestHandler): Promise<{ app: Express; close(): Promise<void> }> {
  const router = bcmsExtensions({ plugins: [cms], functions }, { jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger, database: (await sharedTestDatabase()).knex, ...options });
  const app = express();
  if (before !== undefined) app.use(before);
  app.use(router);
  app.options('/api/plugin/cms/things', (_req, res) => {
    res.status(299).json({ hostOptions: true });
  });
  app.use((_req, res) => {
    res.status(404).json({ host404: true });
  });
  await router.ready;
  return { app, close: () => router.close() };
}

describe("cors: false, with the app's own cors() before the router", () => {
  const ORIGIN = 'https://app.example';
  let host: Awaited<ReturnType<typeof hostApp>>;
  beforeAll(async () => {
    host = await hostApp({ cors: false, bodyLimit: 16 }, cors({ origin: ORIGIN, credentials: true, exposedHeaders: ['X-Request-Id'] }));
  });
  afterAll(() => host.close());

  const cases: [string, (app: Express) => request.Test, number][] = [
    ['200 plugin', (app) => request(app).get('/api/plugin/cms/things'), 200],
    ['200 function', (app) => request(app).post('/api/function/open'), 200],
    ['401 no token', (app) => request(app).get('/api/plugin/cms/things/guarded'), 401],
    ['413 too large', (app) => request(app).post('/api/function/open').send({ much: 'more than sixteen bytes' }), 413],
    ['500 crash', (app) => request(app).post('/api/plugin/cms/things/crash'), 500],
  ];

  test.each(cases)("%s keeps the app's origin, credentials and exposed headers; the router adds none", async (_name, send, status) => {
    const res = await send(host.app).set('Origin', ORIGIN);
    expect(res.status).toBe(status);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(res.headers['access-control-expose-headers']).toBe('X-Request-Id');
    expect(res.headers.vary).toBe('Origin');
    expect(res.headers['x-request-id']).toBeDefined();
  });

  test("a preflight is the app's cors() answer (its methods, not the router's)", async () => {
    const res = await request(host.app).options('/api/function/closed').set('Origin', ORIGIN).set('Access-Control-Request-Method', 'POST').set('Access-Control-Request-Headers', 'authorization');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(res.headers['access-control-allow-methods']).toBe('GET,HEAD,PUT,PATCH,POST,DELETE');
    expect(res.headers.allow).toBeUndefined();
  });

  test('an OPTIONS request that reaches the router goes on to the app: the router answers no preflight', async () => {
    const bare = await hostApp({ cors: false });
    try {
      const served = await request(bare.app).options('/api/plugin/cms/things').set('Origin', ORIGIN).set('Access-Control-Request-Method', 'GET');
      expect([served.status, served.body]).toEqual([299, { hostOptions: true }]);
      const fn = await request(bare.app).options('/api/function/open').set('Origin', ORIGIN).set('Access-Control-Request-Method', 'POST');
      expect([fn.status, fn.body]).toEqual([404, { host404: true }]);
      // Nor a header on the answers it gives.
      const get = await request(bare.app).get('/api/plugin/cms/things').set('Origin', ORIGIN);
      expect(get.status).toBe(200);
      expect(Object.keys(get.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
    } finally {
      await bare.close();
    }
  });
});

describe("cors: the cors package's options", () => {
  const A = 'https://a.example';
  let host: Awaited<ReturnType<typeof hostApp>>;
  beforeAll(async () => {
    host = await hostApp({ cors: { origin: [A, /\.b\.example$/], credentials: true, maxAge: 60 } });
  });
  afterAll(() => host.close());

  test('an allowed origin is answered with it, credentials, Vary: Origin and the router exposed headers, errors included', async () => {
    for (const [origin, send, status] of [
      [A, (app: Express) => request(app).get('/api/plugin/cms/things'), 200],
      ['https://x.b.example', (app: Express) => request(app).post('/api/function/open'), 200],
      [A, (app: Express) => request(app).post('/api/function/closed'), 401],
      [A, (app: Express) => request(app).post('/api/plugin/cms/things/crash'), 500],
    ] as const) {
      const res = await send(host.app).set('Origin', origin);
      expect([res.status, res.headers['access-control-allow-origin'], res.headers['access-control-allow-credentials'], res.headers.vary]).toEqual([status, origin, 'true', 'Origin']);
      expect(res.headers['access-control-expose-headers']).toBe('X-Request-Id, WWW-Authenticate, Allow, Retry-After, Idempotent-Replayed, ETag');
    }
  });

  test('another origin gets no Access-Control-Allow-Origin (the browser keeps the answer from its script)', async () => {
    const res = await request(host.app).get('/api/plugin/cms/things').set('Origin', 'https://evil.example');
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.headers.vary).toBe('Origin');
  });

  test("a preflight: 204 with the path's verbs, the headers asked for, the origin, credentials and maxAge", async () => {
    const res = await request(host.app)
      .options('/api/function/closed')
      .set('Origin', A)
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization, idempotency-key');
    expect(res.status).toBe(204);
    expect(res.headers).toMatchObject({
      'access-control-allow-origin': A,
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': 'POST, OPTIONS',
      'access-control-allow-headers': 'authorization, idempotency-key',
      'access-control-max-age': '60',
      allow: 'POST, OPTIONS',
    });
    expect(res.text).toBe('');
  });

  test('an origin decided by a function that calls back later, for answers and preflights; its error is a 500', async () => {
    const late = await hostApp({
      cors: {
        origin: (origin, callback) => {
          setImmediate(() => (origin === 'https://broken.example' ? callback(new Error('origin lookup failed')) : callback(null, origin === 'https://late.example')));
        },
      },
    });
    try {
      const get = await request(late.app).get('/api/plugin/cms/things').set('Origin', 'https://late.example');
      expect([get.status, get.headers['access-control-allow-origin'], get.body]).toEqual([200, 'https://late.example', { things: [] }]);
      const refused = await request(late.app).get('/api/plugin/cms/things').set('Origin', 'https://other.example');
      expect([refused.status, refused.headers['access-control-allow-origin']]).toEqual([200, undefined]);
      const preflight = await request(late.app).options('/api/plugin/cms/things').set('Origin', 'https://late.example').set('Access-Control-Request-Method', 'GET');
      expect([preflight.status, preflight.headers['access-control-allow-origin'], preflight.headers['access-control-allow-methods']]).toEqual([204, 'https://late.example', 'GET, OPTIONS']);
      const broken = await request(late.app).get('/api/plugin/cms/things').set('Origin', 'https://broken.example');
      expect(broken.status).toBe(500);
      expect(broken.body).toEqual({ message: `Internal error. Request id: ${broken.headers['x-request-id']}.` });
    } finally {
      await late.close();
    }
  });

  test('options that cannot work are refused at start', () => {
    expect(() => bcmsExtensions({}, { cors: { origni: A } as never })).toThrow('unknown option "cors.origni"');
    expect(() => bcmsExtensions({}, { cors: { credentials: true } })).toThrow("credentials: true needs an origin other than '*'");
    expect(() => bcmsExtensions({}, { cors: true as never })).toThrow("option cors must be '*', false or the cors package's options");
  });
});

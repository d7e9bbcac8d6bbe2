import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, type BcmsExtensionsRouter } from '../../lib';
import { buildApp, memoryLogger, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { deploy, functionSource, startDeployable } from '../support/deploy';
import { TcpProxy } from '../support/proxy';
import { lintOpenApi } from '../support/openapi';

// GET /api/extensions/health: for load balancers, with no credentials; 503 with what is down.
const HEALTH = '/api/extensions/health';
const NO_ISOLATES = { running: 0, failing: 0, failed: 0 };
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));

describe('up', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ functions: [hello] });
  });

  test('200 { status, database, isolates } for anyone, not cached, with the CORS of every answer', async () => {
    const res = await request(t.app).get(HEALTH);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', database: 'ok', isolates: NO_ISOLATES });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect((await request(t.app).head(HEALTH)).status).toBe(200);
    const post = await request(t.app).post(HEALTH);
    expect([post.status, post.headers.allow]).toEqual([405, 'GET, OPTIONS']);
  });

  test('the OpenAPI document describes it: public, its 200 and 503 the same body; lint-clean', async () => {
    const document = (await request(t.app).get('/api/extensions/openapi.json')).body;
    const operation = document.paths[HEALTH].get;
    expect(operation.security).toEqual([]);
    expect(Object.keys(operation.responses)).toEqual(['200', '503']);
    expect(operation.responses['503'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Health' });
    expect(lintOpenApi(document).errors).toEqual([]);
  });
});

test('deployed extensions running in isolates are counted', async () => {
  const service = await startDeployable((await sharedTestDatabase()).knex);
  try {
    await deploy(service.app, service.deployer, 'function', 'counted', functionSource('counted', 'async () => 1'));
    const res = await request(service.app).get(HEALTH);
    expect(res.body).toEqual({ status: 'ok', database: 'ok', isolates: { running: 1, failing: 0, failed: 0 } });
  } finally {
    await service.close();
  }
}, 60_000);

describe('while the start is under way, and once it failed', () => {
  test("503 'starting' at once (not waiting for the start), then 200 once it is done", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const slow = createBcmsFunction(async () => {
      await gate;
      return { config: { name: 'slow', public: true }, handler: async () => 'done' };
    });
    const router = bcmsExtensions({ functions: [slow] }, { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger });
    const app = express().use(router);
    try {
      const starting = await request(app).get(HEALTH);
      expect([starting.status, starting.body]).toEqual([503, { status: 'starting', database: 'ok', isolates: NO_ISOLATES }]);
      open();
      await router.ready;
      expect((await request(app).get(HEALTH)).body.status).toBe('ok');
    } finally {
      open();
      await router.close();
    }
  });

  test("503 'down' once the start failed (a factory that throws)", async () => {
    const broken = createBcmsFunction(async () => {
      throw new Error('no config');
    });
    const router = bcmsExtensions({ functions: [broken] }, { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger });
    await expect(router.ready).rejects.toThrow('no config');
    const res = await request(express().use(router)).get(HEALTH);
    expect([res.status, res.body]).toEqual([503, { status: 'down', database: 'ok', isolates: NO_ISOLATES }]);
    await router.close();
  });
});

describe('the database unreachable, then back', () => {
  let db: PGlite;
  let server: PGLiteSocketServer;
  let proxy: TcpProxy;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  beforeAll(async () => {
    db = await PGlite.create('memory://');
    const port = (await TcpProxy.reserve({ host: '127.0.0.1', port: 0 })).port;
    server = new PGLiteSocketServer({ db, port, host: '127.0.0.1', maxConnections: 10 });
    await server.start();
    // Nothing listens on the proxy's port until it starts: the database is unreachable.
    proxy = await TcpProxy.reserve({ host: '127.0.0.1', port });
    router = bcmsExtensions({ functions: [hello] }, { database: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`, logger: memoryLogger().logger });
    app = express().use(router);
    await router.ready;
  });
  afterAll(async () => {
    await router.close();
    await proxy.stop();
    await server.stop();
    await db.close();
  });

  test("503 { status: 'down', database: 'down' }, naming nothing internal", async () => {
    const res = await request(app).get(HEALTH);
    expect([res.status, res.body]).toEqual([503, { status: 'down', database: 'down', isolates: NO_ISOLATES }]);
    expect(res.text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|postgres/);
  });

  test('200 once it is back, and 503 when it goes away again', async () => {
    await proxy.start();
    expect((await request(app).get(HEALTH)).body).toEqual({ status: 'ok', database: 'ok', isolates: NO_ISOLATES });
    await proxy.stop();
    expect((await request(app).get(HEALTH)).status).toBe(503);
  });
});

test('a database that accepts connections and never answers: 503 all the same, once the check gives up', async () => {
  const proxy = await TcpProxy.reserve({ host: '127.0.0.1', port: 1 });
  await proxy.hang();
  const router = bcmsExtensions({ functions: [hello] }, { database: `postgres://postgres@127.0.0.1:${proxy.port}/test`, logger: memoryLogger().logger });
  try {
    // Not waiting for the start (whose migrations wait on the connection's own time-out).
    const res = await request(express().use(router)).get(HEALTH);
    expect([res.status, res.body]).toEqual([503, { status: 'down', database: 'down', isolates: NO_ISOLATES }]);
  } finally {
    await router.close();
    await proxy.stop();
  }
}, 30_000);

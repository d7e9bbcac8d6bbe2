import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import express from 'express';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type BcmsPlugin } from '../lib';
import type { Knex } from 'knex';
import { memoryLogger } from './support/app';
import { sharedTestDatabase } from './support/database';

let db: Knex;
beforeAll(async () => {
  db = (await sharedTestDatabase()).knex;
});
const quiet = () => ({ logger: memoryLogger().logger, database: db });

function plugin(name: string, methods: Record<string, { path: string; type?: 'get' | 'post' }>, controllerPath = '/c'): BcmsPlugin {
  return createBcmsPlugin({
    name,
    controllers: [
      createController({
        name: 'Main',
        path: controllerPath,
        methods: () =>
          Object.fromEntries(Object.entries(methods).map(([key, m]) => [key, createControllerMethod({ path: m.path, type: m.type ?? 'get', handler: async () => ({ from: name, key }) })])),
      }),
    ],
  });
}

const fn = (name: string, value: unknown = name, isPublic = true) => createBcmsFunction(async () => ({ config: { name, public: isPublic }, handler: async () => value }));

describe('bcmsExtensions(registry, options)', () => {
  test('returns an express.Router with ready and close, mountable next to the host routes, and under a prefix', async () => {
    const router = bcmsExtensions({ plugins: [plugin('p', { a: { path: '/a' } })] }, quiet());
    expect(typeof router).toBe('function');
    expect(typeof router.use).toBe('function');
    expect(router.ready).toBeInstanceOf(Promise);
    const app = express();
    app.use('/cms', router);
    await router.ready;
    expect((await request(app).get('/cms/api/plugin/p/c/a')).body).toEqual({ from: 'p', key: 'a' });
    expect((await request(app).get('/api/plugin/p/c/a')).status).toBe(404);
    await expect(router.close()).resolves.toBeUndefined();
  });

  test('the router answers its own paths before any layer a host adds to it (the specialised handle is in use)', async () => {
    const router = bcmsExtensions({ plugins: [plugin('p', { a: { path: '/a' } })] }, quiet());
    router.use((_req, res) => {
      res.status(418).json({ layer: true });
    });
    const app = express().use(router);
    expect((await request(app).get('/api/plugin/p/c/a')).body).toEqual({ from: 'p', key: 'a' });
    expect((await request(app).get('/elsewhere')).status).toBe(418);
  });

  test('routes a host adds to the router itself still work', async () => {
    const router = bcmsExtensions({ plugins: [plugin('p', { a: { path: '/a' } })] }, quiet());
    router.get('/extra', (_req, res) => {
      res.json({ extra: true });
    });
    const app = express().use(router);
    expect((await request(app).get('/extra')).body).toEqual({ extra: true });
    expect((await request(app).get('/api/plugin/p/c/a')).body).toEqual({ from: 'p', key: 'a' });
  });

  test('two routers in one app do not share state', async () => {
    const one = bcmsExtensions({ plugins: [plugin('one', { a: { path: '/a' } })], functions: [fn('f', 1)] }, quiet());
    const two = bcmsExtensions({ plugins: [plugin('two', { a: { path: '/a' } })], functions: [fn('f', 2), fn('g', 'g')] }, { ...quiet(), bodyLimit: 10 });
    const app = express();
    app.use('/one', one);
    app.use('/two', two);
    await Promise.all([one.ready, two.ready]);
    expect((await request(app).get('/one/api/plugin/one/c/a')).body.from).toBe('one');
    expect((await request(app).get('/one/api/plugin/two/c/a')).status).toBe(404);
    expect((await request(app).post('/one/api/function/f')).body.result).toBe(1);
    expect((await request(app).post('/two/api/function/f')).body.result).toBe(2);
    expect((await request(app).post('/one/api/function/g')).status).toBe(404);
    // each keeps its own options
    expect((await request(app).post('/one/api/function/f').send({ long: 'enough to pass ten bytes' })).status).toBe(200);
    expect((await request(app).post('/two/api/function/f').send({ long: 'enough to pass ten bytes' })).status).toBe(413);
  });

  /** The public function `late`, whose factory (and so the router's start) waits until `release()`. */
  function lateFunction() {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const late = createBcmsFunction(async () => {
      await gate;
      return { config: { name: 'late', public: true }, handler: async () => 'ready now' };
    });
    return { late, release };
  }

  test('requests that arrive before ready wait for it', async () => {
    const { late, release } = lateFunction();
    const router = bcmsExtensions({ functions: [late] }, quiet());
    const app = express().use(router);
    const pending = request(app)
      .post('/api/function/late')
      .then((res) => res.body);
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    expect(await pending).toEqual({ success: true, result: 'ready now' });
  });

  test('while it starts, a preflight that waited is answered once, and a handler that returns nothing answers null', async () => {
    const { late, release } = lateFunction();
    const silent = createBcmsPlugin({
      name: 'silent',
      controllers: [
        createController({
          name: 'Main',
          path: '/c',
          methods: () => ({ nothing: createControllerMethod({ path: '/nothing', type: 'get', handler: async () => undefined }) }),
        }),
      ],
    });
    const log = memoryLogger();
    // Both requests reach the router before its start ends: the gate opens only once they have.
    let arrived = 0;
    let bothArrived!: () => void;
    const arrivals = new Promise<void>((resolve) => (bothArrived = resolve));
    const app = express()
      .use((_req, _res, next) => {
        if (++arrived === 2) bothArrived();
        next();
      })
      .use(bcmsExtensions({ plugins: [silent], functions: [late] }, { logger: log.logger, database: db }));
    const answers = Promise.all([
      request(app)
        .options('/api/function/late')
        .set('Access-Control-Request-Method', 'POST')
        .then((res) => res),
      request(app)
        .get('/api/plugin/silent/c/nothing')
        .then((res) => res),
    ]);
    await arrivals;
    release();
    const [preflight, nothing] = await answers;
    expect(preflight.status).toBe(204);
    expect(preflight.headers.allow).toBe('POST, OPTIONS');
    expect(nothing.status).toBe(200);
    expect(nothing.text).toBe('null');
    expect(log.text()).not.toMatch(/unexpected error/);
  });

  test('a function factory that throws: ready rejects naming it, requests get a bare 500', async () => {
    const log = memoryLogger();
    const broken = createBcmsFunction(async () => {
      throw new Error('missing API_URL');
    });
    const router = bcmsExtensions({ functions: [fn('ok'), broken] }, { logger: log.logger, database: db });
    await expect(router.ready).rejects.toThrow('registry.functions[1]: its factory threw: missing API_URL');
    const res = await request(express().use(router)).post('/api/function/ok');
    expect(res.status).toBe(500);
    expect(res.body.error.code).toBe('INTERNAL_ERROR');
    expect(log.text()).toMatch(/the router could not start/);
  });

  test.each([
    ['duplicate function names', [fn('same'), fn('same')], 'duplicate function name "same"'],
    ['a function name that is not URL-safe', [fn('no spaces')], 'function name "no spaces" is not URL-safe'],
    ['a function name with a slash', [fn('a/b')], 'function name "a/b" is not URL-safe'],
    ['an empty function name', [fn('')], 'function name "" is not URL-safe'],
  ])('ready rejects %s', async (_name, functions, message) => {
    await expect(bcmsExtensions({ functions }, quiet()).ready).rejects.toThrow(message);
  });

  test('a function whose public is not a boolean, or without a handler, is refused', async () => {
    const badPublic = createBcmsFunction(async () => ({ config: { name: 'x', public: 'yes' }, handler: async () => 1 }) as never);
    await expect(bcmsExtensions({ functions: [badPublic] }, quiet()).ready).rejects.toThrow('function "x": config.public must be true, false or left out (private)');
    const noHandler = createBcmsFunction(async () => ({ config: { name: 'y', public: true } }) as never);
    await expect(bcmsExtensions({ functions: [noHandler] }, quiet()).ready).rejects.toThrow('function "y": handler must be a function');
  });

  test.each([
    ['duplicate plugin names', [plugin('twin', { a: { path: '/a' } }), plugin('twin', { b: { path: '/b' } })], 'duplicate plugin name "twin"'],
    ['a plugin name that is not URL-safe', [plugin('my plugin', { a: { path: '/a' } })], 'plugin name "my plugin" is not URL-safe'],
    ['a method path that is not a string', [plugin('p', { a: { path: 5 as unknown as string } })], 'plugin "p", method "Main.a": path 5 must be a string'],
    ['a controller path that is not a string', [plugin('p', { a: { path: '/a' } }, null as unknown as string)], 'plugin "p", controller "Main": path null must be a string'],
    ['two methods on one path once "/" is added', [plugin('p', { a: { path: 'x' }, b: { path: '/x' } })], 'GET /api/plugin/p/c/x is already served by method "Main.a"'],
    ['two methods on the same verb and path', [plugin('p', { a: { path: '/x' }, b: { path: '/x/' } })], 'plugin "p", method "Main.b": GET /api/plugin/p/c/x is already served by method "Main.a"'],
    ['two methods on the same verb and parameter path', [plugin('p', { a: { path: '/:id' }, b: { path: '/:key' } })], 'GET /api/plugin/p/c/:key is already served by method "Main.a"'],
    ['a path with a space', [plugin('p', { a: { path: '/a b' } })], 'has an invalid segment "a b"'],
  ])('bcmsExtensions throws at once for %s', (_name, plugins, message) => {
    expect(() => bcmsExtensions({ plugins }, quiet())).toThrow(message);
  });

  test('the same path on two verbs is fine', async () => {
    await expect(bcmsExtensions({ plugins: [plugin('p', { a: { path: '/x' }, b: { path: '/x', type: 'post' } })] }, quiet()).ready).resolves.toBeUndefined();
  });

  test('a method type outside get, post, put, patch, delete is refused', () => {
    const bad = plugin('p', { a: { path: '/a', type: 'options' as 'get' } });
    expect(() => bcmsExtensions({ plugins: [bad] }, quiet())).toThrow('plugin "p", method "Main.a": type "options" is not one of get, post, put, patch, delete');
  });

  test('a registry.plugins that is not an array is refused at once, saying what it takes', () => {
    for (const plugins of [{}, 'p']) {
      expect(() => bcmsExtensions({ plugins: plugins as never }, quiet())).toThrow('registry.plugins must be an array of plugins (createBcmsPlugin)');
    }
  });

  test('an entry of registry.functions that is not a function module is refused at once', () => {
    expect(() => bcmsExtensions({ functions: [{ config: { name: 'x', public: true } } as never] }, quiet())).toThrow('registry.functions[0] is not a function module');
  });

  test('a router refused for its jwt options opens no database first', () => {
    const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-refused-')), 'data');
    expect(() => bcmsExtensions({}, { database: { pglite: dir }, jwt: { secret: 's', algorithms: ['none' as never] } })).toThrow('must not contain "none"');
    expect(fs.existsSync(dir)).toBe(false);
  });

  test('option mistakes are thrown while the app is built, and options are not mutated', async () => {
    expect(() => bcmsExtensions({}, { bodylimit: '1mb' } as never)).toThrow('unknown option "bodylimit"');
    expect(() => bcmsExtensions({}, { bodyLimit: 'lots' })).toThrow('option bodyLimit must be a byte count or a size such as "1mb", got "lots"');
    expect(() => bcmsExtensions({}, { functionTimeoutMs: 0 })).toThrow('option functionTimeoutMs must be a positive integer');
    expect(() => bcmsExtensions({}, { logger: {} as never })).toThrow('option logger must be pino-compatible');
    expect(() => bcmsExtensions({}, { jwt: { secert: 'x' } as never })).toThrow('unknown option "jwt.secert"');
    expect(() => bcmsExtensions({}, { signature: { clockSkew: 5 } as never })).toThrow('unknown option "signature.clockSkew"');
    expect(() => bcmsExtensions({}, { jwt: { secret: 's', algorithms: ['HS257' as never] } })).toThrow('option jwt.algorithms: unknown algorithm "HS257"');
    expect(() => bcmsExtensions({}, { jwt: { secret: '-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----' } })).toThrow(
      'option jwt.secret looks like a PEM key but cannot be read as one',
    );
    const options = Object.freeze({ jwt: Object.freeze({ secret: 's' }), ...quiet() });
    // (the database is the test file's; see test/support/database.ts)
    await expect(bcmsExtensions({}, options).ready).resolves.toBeUndefined();
    expect(options.jwt).toEqual({ secret: 's' });
  });
});

import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, type TestApp } from '../support/app';

// Paths that overlap: the first path that serves the verb wins, as Express picks its route.
const items = createBcmsPlugin({
  name: 'shop',
  controllers: [
    createController({
      name: 'Items',
      path: '/items',
      methods: () => ({
        one: createControllerMethod({ path: '/:id', type: 'get', handler: async ({ request }) => ({ one: request.params.id }) }),
        create: createControllerMethod({ path: '/new', type: 'post', handler: async () => ({ created: true }) }),
        edit: createControllerMethod({ path: '/:id/edit', type: 'put', handler: async ({ request }) => ({ edited: request.params.id }) }),
        sub: createControllerMethod({ path: '/:id/:sub', type: 'get', handler: async ({ request }) => ({ ...request.params }) }),
        created: createControllerMethod({
          path: '/status/created',
          type: 'post',
          handler: async ({ response }) => {
            response.status(201);
            return { created: 1 };
          },
        }),
        own: createControllerMethod({
          path: '/status/own',
          type: 'get',
          handler: async ({ response }) => {
            response.type('text/plain').send('own answer');
          },
        }),
        cached: createControllerMethod({
          path: '/status/cached-then-throws',
          type: 'get',
          handler: async ({ response }) => {
            response.setHeader('Cache-Control', 'public, max-age=3600');
            throw new Error('after setting a header');
          },
        }),
        unauthorised: createControllerMethod({
          path: '/status/401',
          type: 'get',
          handler: async ({ errorHandler }) => {
            throw errorHandler.occurred(401, 'Sign in first.');
          },
        }),
      }),
    }),
    // plugin-starter's shape: one path, a parameter named differently by each method.
    createController({
      name: 'Todo',
      path: '/todo',
      methods: () => ({
        find: createControllerMethod({ path: '/:description', type: 'get', handler: async ({ request }) => ({ ...request.params }) }),
        remove: createControllerMethod({ path: '/:id', type: 'delete', handler: async ({ request }) => ({ ...request.params }) }),
        move: createControllerMethod({ path: '/:id/:to', type: 'put', handler: async ({ request }) => ({ ...request.params }) }),
        pair: createControllerMethod({ path: '/:left/:right', type: 'get', handler: async ({ request }) => ({ ...request.params }) }),
      }),
    }),
  ],
});

const form = createBcmsFunction(async () => ({ config: { name: 'form', public: true }, handler: async ({ request }) => request.body ?? null }));

describe('overlapping plugin paths', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [items], functions: [form] });
  });

  test('GET /items/new reaches GET /items/:id although POST /items/new exists', async () => {
    expect((await request(t.app).get('/api/plugin/shop/items/new')).body).toEqual({ one: 'new' });
    expect((await request(t.app).post('/api/plugin/shop/items/new')).body).toEqual({ created: true });
  });

  test('GET /items/5/edit reaches GET /items/:id/:sub although PUT /items/:id/edit exists', async () => {
    expect((await request(t.app).get('/api/plugin/shop/items/5/edit')).body).toEqual({ id: '5', sub: 'edit' });
    expect((await request(t.app).put('/api/plugin/shop/items/5/edit')).body).toEqual({ edited: '5' });
  });

  test('each method of one path reads its own parameter names', async () => {
    expect((await request(t.app).get('/api/plugin/shop/todo/milk')).body).toEqual({ description: 'milk' });
    expect((await request(t.app).delete('/api/plugin/shop/todo/42')).body).toEqual({ id: '42' });
    expect((await request(t.app).put('/api/plugin/shop/todo/42/done')).body).toEqual({ id: '42', to: 'done' });
    expect((await request(t.app).get('/api/plugin/shop/todo/a%20b/c')).body).toEqual({ left: 'a b', right: 'c' });
    const res = await request(t.app).post('/api/plugin/shop/todo/42');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, DELETE, OPTIONS');
  });

  test('405 and preflight list the verbs of every matching path', async () => {
    const res = await request(t.app).delete('/api/plugin/shop/items/new');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST, GET, OPTIONS');
    expect(res.body).toEqual({ message: 'DELETE is not allowed here.' });
    expect((await request(t.app).options('/api/plugin/shop/items/5/edit')).headers['access-control-allow-methods']).toBe('PUT, GET, OPTIONS');
  });
});

describe('answers shaped by the handler', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [items], functions: [form] });
  });

  test('a status the handler chose is kept', async () => {
    const res = await request(t.app).post('/api/plugin/shop/items/status/created');
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ created: 1 });
  });

  test("a handler's own answer still carries Access-Control-Allow-Origin and X-Request-Id", async () => {
    const res = await request(t.app).get('/api/plugin/shop/items/status/own');
    expect(res.text).toBe('own answer');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['x-request-id']).toBeDefined();
  });

  test('headers a handler set do not go out on its error', async () => {
    const res = await request(t.app).get('/api/plugin/shop/items/status/cached-then-throws');
    expect(res.status).toBe(500);
    expect(res.headers['cache-control']).toBeUndefined();
    expect(res.headers['x-powered-by']).toBe('Express'); // the host's own stay
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  test('errorHandler.occurred(401, ...) carries WWW-Authenticate: Bearer', async () => {
    const res = await request(t.app).get('/api/plugin/shop/items/status/401');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Sign in first.' });
    expect(res.headers['www-authenticate']).toBe('Bearer');
  });

  test('a function body that is not JSON: 415 UNSUPPORTED_MEDIA_TYPE', async () => {
    const res = await request(t.app).post('/api/function/form').set('Content-Type', 'application/x-www-form-urlencoded').send('a=1');
    expect(res.status).toBe(415);
    expect(res.body).toEqual({
      success: false,
      error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Function bodies are JSON: send Content-Type: application/json.' },
    });
    expect(res.headers['access-control-allow-origin']).toBe('*');
    const json = await request(t.app).post('/api/function/form').set('Content-Type', 'application/vnd.api+json').send('{"a":1}');
    expect(json.body).toEqual({ success: true, result: { a: 1 } });
  });
});

describe('JWT-guarded routes without a jwt.secret', () => {
  const guarded = createBcmsPlugin({
    name: 'locked',
    controllers: [
      createController({
        name: 'Vault',
        path: '/vault',
        methods: () => ({
          open: createControllerMethod({ type: 'get', handler: async () => ({ open: true }) }),
          read: createControllerMethod({
            path: '/read',
            type: 'get',
            preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
            handler: async () => ({ read: true }),
          }),
        }),
      }),
    ],
  });
  const warning = (t: TestApp) => t.log.lines.filter((line) => String(line.msg).includes('no jwt.secret is set'));

  test('a warning once the router is ready, naming the guarded routes; the routes answer 401', async () => {
    const t = await buildApp({ plugins: [guarded] }, { jwt: {} });
    expect(warning(t)).toEqual([expect.objectContaining({ level: 40, routes: ['locked Vault.read'] })]);
    expect((await request(t.app).get('/api/plugin/locked/vault/read').set('Authorization', 'Bearer x.y.z')).status).toBe(401);
    await t.router.close();
  });

  test('none with a secret, or without guarded routes', async () => {
    const withSecret = await buildApp({ plugins: [guarded] });
    expect(warning(withSecret)).toEqual([]);
    await withSecret.router.close();
    const open = await buildApp({ plugins: [items] }, { jwt: {} });
    expect(warning(open)).toEqual([]);
    await open.router.close();
  });
});

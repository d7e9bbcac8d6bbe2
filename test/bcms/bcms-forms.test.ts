import request from 'supertest';
import { z } from 'zod';
import {
  BCMSRouteProtection,
  bcmsExtensions,
  createBcmsFunction,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  HTTPStatus,
  JWTPermissionName,
  JWTRoleName,
  useLogger,
  type BCMSRouteProtectionJwtAndBodyCheckResult,
  type BCMSRouteProtectionJwtResult,
  type ObjectSchema,
} from '../../lib';
import { buildApp, memoryLogger, role, signToken, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';

// Controllers, methods, guards and loggers written the way BCMS plugins write them.

const setups: string[] = [];
const CreateSchema: ObjectSchema = {
  title: { __type: 'string', __required: true },
  repo: { __type: 'object', __required: false, __child: { url: { __type: 'string', __required: true } } },
  vars: { __type: 'array', __required: false, __child: { __type: 'object', __content: { key: { __type: 'string', __required: true } } } },
};
const zodGuard = BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({
  roleNames: [JWTRoleName.ADMIN],
  permissionName: JWTPermissionName.WRITE,
  bodySchema: z.object({ count: z.number().int().min(1), tags: z.array(z.string()).default([]) }),
});
const jwtGuard = BCMSRouteProtection.createJwtPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ);
const namedLogger = useLogger({ name: 'Book controller' });

const BookController = createController({
  name: 'Book controller',
  path: 'book',
  description: 'Books, as a BCMS controller declares them.',
  async setup({ controllerName, controllerPath }) {
    setups.push(`${controllerName} at ${controllerPath}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { shelf: ['dune', 'emma'] };
  },
  methods({ shelf }) {
    return {
      list: createControllerMethod<BCMSRouteProtectionJwtResult, { items: string[]; by: string }>({
        type: 'get',
        doc: { summary: 'kept, not served' },
        preRequestHandler: jwtGuard,
        async handler({ accessToken, name }) {
          return { items: shelf, by: `${accessToken.payload.userId}/${name}` };
        },
      }),
      create: createControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<{ title: string }>, { title: string }>({
        type: 'post',
        preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({
          roleNames: [JWTRoleName.ADMIN],
          permissionName: JWTPermissionName.WRITE,
          bodySchema: CreateSchema,
        }),
        async handler({ body }) {
          return { title: body.title };
        },
      }),
      count: createControllerMethod({
        path: '/count',
        type: 'post',
        preRequestHandler: zodGuard,
        async handler({ body }) {
          return { count: body.count, tags: body.tags };
        },
      }),
      directory: createControllerMethod({
        path: 'directory/:id',
        type: 'get',
        async handler({ request, errorHandler, logger }) {
          if (request.params.id === 'none') throw errorHandler.occurred(HTTPStatus.NOT_FOUNT, `Book "${request.params.id}" does not exist.`);
          if (request.params.id === 'object') throw errorHandler.occurred(HTTPStatus.BAD_REQUEST, { code: 'b001', detail: ['x'] });
          logger.warn('directory', new Error('disk is slow'));
          namedLogger.info('directory', `listed ${request.params.id}`);
          return { id: request.params.id };
        },
      }),
      cover: createControllerMethod({
        path: '//cover//',
        type: 'get',
        async handler() {
          return Buffer.from([0x89, 0x50, 0x4e, 0x47]);
        },
      }),
      // An author's own pre-request handler that calls a BCMS guard with a context of its own.
      own: createControllerMethod({
        path: '/own',
        type: 'get',
        async preRequestHandler({ name, request, response, errorHandler, logger }) {
          const { accessToken } = await jwtGuard({ name, request, response, errorHandler, logger } as never);
          return { user: accessToken.payload.userId, method: name };
        },
        async handler({ user, method }) {
          return { user, method };
        },
      }),
    };
  },
});

const books = createBcmsPlugin({ name: 'books', controllers: [BookController], policy: async () => [{ name: 'Can read', type: 'checkbox' }] });

const admin = (...permissions: string[]): string => `Bearer ${signToken([role('ADMIN', ...permissions)], { payload: { userId: 'ada' } })}`;

let t: TestApp;
beforeAll(async () => {
  t = await buildApp({ plugins: [books] });
});

describe('controllers as BCMS declares them', () => {
  test('setup ran once, before ready, with the controller name and the path as declared; methods() got its result', async () => {
    expect(setups).toEqual(['Book controller at book']);
    const res = await request(t.app).get('/api/plugin/books/book').set('Authorization', admin('READ')).expect(200);
    expect(res.body).toEqual({ items: ['dune', 'emma'], by: 'ada/list' });
    // A trailing "/" as BCMS's routes have it (`/api/plugin/x/todo/`) reaches the same method.
    await request(t.app).get('/api/plugin/books/book/').set('Authorization', admin('READ')).expect(200);
  });

  test('a second router on the same controllers does not run setup again', async () => {
    const other = await buildApp({ plugins: [books] });
    expect(setups).toHaveLength(1);
    await request(other.app).get('/api/plugin/books/book').set('Authorization', admin('READ')).expect(200);
    await other.router.close();
  });

  test('a request sent before setup finished waits for it, then is served', async () => {
    const slow = createBcmsPlugin({
      name: 'slow',
      controllers: [
        createController({
          name: 'Slow',
          path: '/s',
          setup: () => new Promise<{ word: string }>((resolve) => setTimeout(() => resolve({ word: 'late' }), 300)),
          methods: ({ word }) => ({ get: createControllerMethod({ type: 'get', handler: async () => ({ word }) }) }),
        }),
      ],
    });
    const router = bcmsExtensions({ plugins: [slow] }, { logger: memoryLogger().logger, database: (await sharedTestDatabase()).knex });
    const app = (await import('express')).default();
    app.use(router);
    app.use((_req, res) => void res.status(404).json({ host404: true }));
    const res = await request(app).get('/api/plugin/slow/s?with=query');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ word: 'late' });
    // A path the plugin does not serve still reaches the host.
    expect((await request(app).get('/api/plugin/slow/nothing')).body).toEqual({ host404: true });
  });

  test("a plugin's middleware is accepted, not mounted, and named in a warning", async () => {
    const log = memoryLogger();
    const withMiddleware = createBcmsPlugin({ name: 'mw', controllers: [], middleware: [() => ({})] });
    const router = bcmsExtensions({ plugins: [withMiddleware] }, { logger: log.logger, database: (await sharedTestDatabase()).knex });
    await router.ready;
    expect(log.lines.find((line) => line.plugin === 'mw')?.msg).toMatch(/plugin middleware is not mounted/);
  });

  test('a setup that throws rejects ready, naming the plugin and controller', async () => {
    const broken = createBcmsPlugin({
      name: 'broken',
      controllers: [createController({ name: 'Shelf', path: '/shelf', setup: async () => Promise.reject(new Error('no disk')), methods: () => ({}) })],
    });
    const router = bcmsExtensions({ plugins: [broken] }, { logger: memoryLogger().logger, database: (await sharedTestDatabase()).knex });
    await expect(router.ready).rejects.toThrow('plugin "broken", controller "Shelf": setup() threw: no disk');
  });

  test('method paths: none is the controller path, a missing leading / is added, // collapses', async () => {
    expect((await request(t.app).get('/api/plugin/books/book/directory/7')).body).toEqual({ id: '7' });
    const cover = await request(t.app).get('/api/plugin/books/book/cover').expect(200);
    expect(cover.headers['content-type']).toBe('application/octet-stream');
    expect(Buffer.from(cover.body as Buffer)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  });

  test('HTTPStatus.NOT_FOUNT and an object message', async () => {
    const missing = await request(t.app).get('/api/plugin/books/book/directory/none');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: 'Book "none" does not exist.' });
    const object = await request(t.app).get('/api/plugin/books/book/directory/object');
    expect(object.status).toBe(400);
    expect(object.body).toEqual({ code: 'b001', detail: ['x'] });
  });

  test("loggers take BCMS's (place, message) form: the error is kept, useLogger names its part", async () => {
    // useLogger writes through the logger of the router built last.
    const latest = await buildApp({ plugins: [books] });
    await request(latest.app).get('/api/plugin/books/book/directory/logs').expect(200);
    const warn = latest.log.lines.find((line) => line.place === 'directory' && line.level === 40) as Record<string, unknown>;
    expect(warn.msg).toBe('disk is slow');
    expect((warn.err as { message: string; stack: string }).message).toBe('disk is slow');
    expect((warn.err as { stack: string }).stack).toContain('Error: disk is slow');
    const info = latest.log.lines.find((line) => line.component === 'Book controller') as Record<string, unknown>;
    expect(info).toMatchObject({ place: 'directory', msg: 'listed logs', level: 30 });
    await latest.router.close();
  });
});

describe('BCMSRouteProtection', () => {
  test('createJwtPreRequestHandler: 401 without a token, 403 without the permission', async () => {
    expect((await request(t.app).get('/api/plugin/books/book')).status).toBe(401);
    const res = await request(t.app).get('/api/plugin/books/book').set('Authorization', admin('WRITE'));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: 'Token is not authorized for this action.' });
  });

  test('createJwtAndBodyCheckPreRequestHandler with an ObjectSchema: 400 naming the first field that fails', async () => {
    const post = (body: unknown) =>
      request(t.app)
        .post('/api/plugin/books/book')
        .set('Authorization', admin('WRITE'))
        .send(body as object);
    expect((await post({ title: 'Dune' })).body).toEqual({ title: 'Dune' });
    const cases: [unknown, string][] = [
      [{}, 'body.title is required.'],
      [{ title: 3 }, 'body.title must be a string, got a number.'],
      [{ title: 'x', repo: {} }, 'body.repo.url is required.'],
      [{ title: 'x', repo: null }, 'body.repo must be an object, got null.'],
      [{ title: 'x', vars: [{ key: 'a' }, { key: 1 }] }, 'body.vars[1].key must be a string, got a number.'],
      [[1], 'body must be an object, got an array.'],
    ];
    for (const [body, message] of cases) {
      const res = await post(body);
      expect([res.status, res.body]).toEqual([400, { message }]);
    }
    // The token comes first, as in BCMS: a bad body without a token is a 401.
    expect((await request(t.app).post('/api/plugin/books/book').send({})).status).toBe(401);
  });

  test('createJwtAndBodyCheckPreRequestHandler with zod: its output is the body, its issues a 400', async () => {
    const post = (body: unknown) =>
      request(t.app)
        .post('/api/plugin/books/book/count')
        .set('Authorization', admin('WRITE'))
        .send(body as object);
    expect((await post({ count: 2 })).body).toEqual({ count: 2, tags: [] });
    const bad = await post({ count: 0 });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/^body\.count: /);
    const worse = await post({ count: 1, tags: ['a', 5] });
    expect(worse.body.message).toMatch(/^body\.tags\[1\]: /);
  });

  test("a guard called from an author's own pre-request handler with a context it built", async () => {
    const res = await request(t.app).get('/api/plugin/books/book/own').set('Authorization', admin('READ'));
    expect(res.body).toEqual({ user: 'ada', method: 'own' });
    expect((await request(t.app).get('/api/plugin/books/book/own')).status).toBe(401);
  });

  test('a schema that cannot be checked is refused where the guard is made', () => {
    expect(() =>
      BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({
        roleNames: [JWTRoleName.ADMIN],
        permissionName: JWTPermissionName.WRITE,
        bodySchema: { list: { __type: 'array', __required: true } },
      }),
    ).toThrow('bodySchema: schema.list: an array needs __child: { __type }');
  });
});

describe('functions as BCMS declares them', () => {
  const privateFn = createBcmsFunction(async () => ({
    config: { name: 'bcms-private' },
    handler: async ({ request, auth }) => ({ body: request.body, auth }),
  }));

  test('without public a function is private; a JWT caller gets the token as BCMS hands it', async () => {
    const app = await buildApp({ functions: [privateFn] });
    const refused = await request(app.app).post('/api/function/bcms-private');
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('SIGNATURE_REQUIRED');
    const token = signToken([role('ADMIN', 'EXECUTE')], { payload: { userId: 'ada' } });
    const res = await request(app.app).post('/api/function/bcms-private').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(200);
    expect(res.body.result.body).toEqual({});
    expect(res.body.result.auth).toMatchObject({ type: 'jwt', payload: { userId: 'ada' }, accessToken: { payload: { userId: 'ada' } } });
    // An empty body reads `{}` too; a JSON null is the body it is.
    const empty = await request(app.app).post('/api/function/bcms-private').set('Authorization', `Bearer ${token}`).set('Content-Type', 'application/json').send('');
    expect(empty.body.result.body).toEqual({});
    const nullBody = await request(app.app).post('/api/function/bcms-private').set('Authorization', `Bearer ${token}`).set('Content-Type', 'application/json').send('null');
    expect(nullBody.status).toBe(200);
    expect(nullBody.body.result.body).toBeNull();
    await app.router.close();
  });
});

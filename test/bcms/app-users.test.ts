// The app's own users (auth.fromRequest) through every guard, BCMS's route protections among them: under test/bcms/, as it uses the BCMS layer.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import request from 'supertest';
import {
  type AppUser,
  BCMSRouteProtection,
  bcmsExtensions,
  type BcmsExtensionsOptions,
  type BcmsExtensionsRouter,
  type BcmsRegistry,
  createBcmsFunction,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
} from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { deploy, startDeployable } from '../support/deploy';

// The auth option: the app's own users (its req.user, its cookie session) are who the guards, the
// SDK's routes, private functions and the OpenAPI document see; a BCMS JWT still works when the app
// names no user. Real HTTP through the app's own middleware, mounted before the router.

/** The app's users, as its own middleware knows them: no BCMS shape at all. */
interface HostUser {
  id: number;
  name: string;
  email: string;
  role: 'admin' | 'editor' | 'reader' | 'nobody';
}

const HOST_USERS: Record<string, HostUser> = {
  ada: { id: 1, name: 'Ada', email: 'ada@example.com', role: 'admin' },
  eve: { id: 2, name: 'Eve', email: 'eve@example.com', role: 'editor' },
  rob: { id: 3, name: 'Rob', email: 'rob@example.com', role: 'reader' },
  nia: { id: 4, name: 'Nia', email: 'nia@example.com', role: 'nobody' },
};

const all = (...names: JWTPermissionName[]) => names.map((name) => ({ name }));

/** What the app's roles are in BCMS's: the mapping an app writes once. */
function bcmsUserOf(user: HostUser): AppUser {
  const roles =
    user.role === 'admin'
      ? [{ name: JWTRoleName.ADMIN, permissions: all(JWTPermissionName.READ, JWTPermissionName.WRITE, JWTPermissionName.DELETE, JWTPermissionName.EXECUTE) }]
      : user.role === 'editor'
        ? [{ name: JWTRoleName.EDITOR, permissions: ['READ' as const, JWTPermissionName.WRITE] }] // names alone: the user route gives BCMS's { name } back
        : user.role === 'reader'
          ? [{ name: JWTRoleName.USER, permissions: all(JWTPermissionName.READ) }]
          : [];
  return { userId: user.id, roles, props: { username: user.name, email: user.email } };
}

let lastFunctionAuth: unknown;
const report = createBcmsFunction(async () => ({
  config: { name: 'report', public: false },
  handler: async ({ auth }) => {
    lastFunctionAuth = auth;
    return { by: (auth as { payload?: { userId?: string } } | null)?.payload?.userId ?? null };
  },
}));

const notes = createBcmsPlugin({
  name: 'notes',
  controllers: [
    createController({
      name: 'Notes',
      path: '/notes',
      methods: () => ({
        mine: createControllerMethod({
          path: '/mine',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
          handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId, roles: accessToken.payload.rls.map((held) => held.name), typ: accessToken.header.typ ?? null }),
        }),
        write: createControllerMethod({
          type: 'post',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.EDITOR], JWTPermissionName.WRITE),
          handler: async ({ accessToken, request }) => ({ userId: accessToken.payload.userId, body: request.body }),
        }),
        either: createControllerMethod({
          path: '/either',
          type: 'get',
          preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }),
          handler: async ({ token, key }) => ({ token: token?.payload.userId ?? null, key: key?.name ?? null }),
        }),
      }),
    }),
  ],
});

const REGISTRY: BcmsRegistry = { plugins: [notes], functions: [report] };
const routers: BcmsExtensionsRouter[] = [];

afterAll(async () => {
  await Promise.all(routers.map((router) => router.close()));
});

async function routerWith(options: BcmsExtensionsOptions, log = memoryLogger()): Promise<BcmsExtensionsRouter> {
  const router = bcmsExtensions(REGISTRY, { jwt: { secret: JWT_SECRET }, logger: log.logger, database: (await sharedTestDatabase()).knex, ...options });
  routers.push(router);
  await router.ready;
  return router;
}

describe('auth.fromRequest with req.user, which the app sets in its own middleware before the router', () => {
  let app: express.Express;
  let asked = 0;

  beforeAll(async () => {
    const router = await routerWith({
      openapi: 'token',
      auth: {
        // As a session store would: the user is looked up, so the answer is a promise.
        fromRequest: async (req) => {
          asked += 1;
          const user = (req as Request & { user?: HostUser }).user;
          return user === undefined ? null : bcmsUserOf(user);
        },
      },
    });
    app = express();
    // The app's own sign-in: its own header, its own users (an API starter's JWT middleware, in short).
    app.use((req: Request & { user?: HostUser }, _res, next) => {
      const name = req.get('x-host-user');
      if (name !== undefined) req.user = HOST_USERS[name];
      next();
    });
    app.use(router);
  });

  test("a plugin's JWT guard takes the app's user: the handler's accessToken carries its userId and roles", async () => {
    asked = 0;
    const res = await request(app).get('/api/plugin/notes/notes/mine').set('x-host-user', 'ada');
    expect([res.status, res.body]).toEqual([200, { userId: '1', roles: ['ADMIN'], typ: 'auth.fromRequest' }]);
    // Asked once per request, however many places want the user.
    expect(asked).toBe(1);
  });

  test("the guard's roles and permission hold for the app's user: 403 without them, 401 with no user", async () => {
    const editor = await request(app).get('/api/plugin/notes/notes/mine').set('x-host-user', 'eve');
    expect([editor.status, editor.body]).toEqual([403, { message: 'Token is not authorized for this action.' }]);
    const nobody = await request(app).get('/api/plugin/notes/notes/mine');
    expect([nobody.status, nobody.body, nobody.headers['www-authenticate']]).toEqual([401, { message: 'Token is `undefined`.' }, 'Bearer']);
  });

  test('a guarded POST: the user decided before the body, and the body reaches the handler', async () => {
    const refused = await request(app).post('/api/plugin/notes/notes').set('x-host-user', 'rob').send({ text: 'no' });
    expect(refused.status).toBe(403);
    const res = await request(app).post('/api/plugin/notes/notes').set('x-host-user', 'eve').send({ text: 'hello' });
    expect([res.status, res.body]).toEqual([200, { userId: '2', body: { text: 'hello' } }]);
  });

  test('a BCMS JWT still works when the app names no user; when it names one, the app user comes first', async () => {
    const token = signToken([role('USER', 'READ')], { payload: { userId: 'jwt-user' } });
    const byToken = await request(app).get('/api/plugin/notes/notes/mine').set('Authorization', `Bearer ${token}`);
    expect([byToken.status, byToken.body.userId]).toEqual([200, 'jwt-user']);
    const both = await request(app).get('/api/plugin/notes/notes/mine').set('Authorization', `Bearer ${token}`).set('x-host-user', 'ada');
    expect([both.status, both.body.userId]).toEqual([200, '1']);
    const bad = await request(app).get('/api/plugin/notes/notes/mine').set('Authorization', 'Bearer not-a-token');
    expect([bad.status, bad.body]).toEqual([401, { message: 'Invalid token.' }]);
  });

  test("BCMSRouteProtection's token-or-key guard takes the app's user as its token", async () => {
    const res = await request(app).get('/api/plugin/notes/notes/either').set('x-host-user', 'ada');
    expect([res.status, res.body]).toEqual([200, { token: '1', key: null }]);
    const none = await request(app).get('/api/plugin/notes/notes/either');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer, Signature/);
  });

  test("the SDK's routes: who the user is (with the app's props), the plugins, and a write as the user", async () => {
    const user = await request(app).get('/api/extensions/user').set('x-host-user', 'eve');
    expect(user.status).toBe(200);
    expect(user.body).toMatchObject({ _id: '2', username: 'Eve', email: 'eve@example.com', roles: [{ name: 'EDITOR', permissions: [{ name: 'READ' }, { name: 'WRITE' }] }] });
    const plugins = await request(app).get('/api/extensions/plugins').set('x-host-user', 'rob');
    expect([plugins.status, plugins.body.plugins.map((plugin: { name: string }) => plugin.name)]).toEqual([200, ['notes']]);
    const name = `notes_${randomUUID().slice(0, 8)}`;
    const created = await request(app).post('/api/extensions/templates').set('x-host-user', 'eve').send({ label: name, name });
    expect([created.status, created.body.userId]).toEqual([200, '2']);
    const readerWrites = await request(app)
      .post('/api/extensions/templates')
      .set('x-host-user', 'rob')
      .send({ label: `${name}_2` });
    expect(readerWrites.status).toBe(403);
    expect((await request(app).get('/api/extensions/user')).status).toBe(401);
  });

  test("a private function: the app's user calls it as a token's user would, EXECUTE required", async () => {
    const res = await request(app).post('/api/function/report').set('x-host-user', 'ada').send({});
    expect([res.status, res.body]).toEqual([200, { success: true, result: { by: '1' } }]);
    expect(lastFunctionAuth).toMatchObject({ type: 'jwt', header: { alg: 'none', typ: 'auth.fromRequest' }, payload: { userId: '1' }, signature: '' });
    const editor = await request(app).post('/api/function/report').set('x-host-user', 'eve').send({});
    expect([editor.status, editor.body.error.code]).toEqual([403, 'TOKEN_FORBIDDEN']);
    const nobody = await request(app).post('/api/function/report').send({});
    expect([nobody.status, nobody.body.error.code]).toEqual([401, 'SIGNATURE_REQUIRED']);
    const token = signToken([role('SERVICE', 'EXECUTE')], { payload: { userId: 'svc' } });
    const byToken = await request(app).post('/api/function/report').set('Authorization', `Bearer ${token}`).send({});
    expect([byToken.status, byToken.body.result]).toEqual([200, { by: 'svc' }]);
  });

  test("the SDK's event stream opens for the app's user, and for no one else", async () => {
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const opened = (headers: Record<string, string>) =>
      new Promise<[number | undefined, string | undefined]>((resolve, reject) => {
        const asked = http.get({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, path: '/api/extensions/events', headers }, (res) => {
          resolve([res.statusCode, res.headers['content-type']]);
          asked.destroy(); // a stream: what it said first is all this needs
        });
        asked.on('error', reject);
      });
    try {
      expect(await opened({ 'x-host-user': 'rob' })).toEqual([200, 'text/event-stream; charset=utf-8']);
      expect((await opened({}))[0]).toBe(401);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  test("the OpenAPI document in 'token' mode, and the shell's Events view: read as the app's user", async () => {
    expect((await request(app).get('/api/extensions/openapi.json').set('x-host-user', 'rob')).status).toBe(200);
    expect((await request(app).get('/api/extensions/openapi.json')).status).toBe(401);
    expect((await request(app).get('/api/extensions/event-deliveries').set('x-host-user', 'ada')).status).toBe(200);
    expect((await request(app).get('/api/extensions/event-deliveries').set('x-host-user', 'rob')).status).toBe(403);
    const none = await request(app).get('/api/extensions/event-deliveries');
    expect([none.status, none.headers['www-authenticate']]).toEqual([401, expect.stringMatching(/^Bearer, Signature/)]);
  });
});

describe('auth.fromRequest with a cookie session the test app keeps itself', () => {
  let app: express.Express;
  const sessions = new Map<string, HostUser>();

  beforeAll(async () => {
    const router = await routerWith({
      auth: {
        fromRequest: (req) => {
          const user = (req as Request & { session?: { user?: HostUser } }).session?.user;
          return user === undefined ? null : bcmsUserOf(user);
        },
      },
    });
    app = express();
    // The app's session middleware, made by hand: a cookie names a session in memory.
    app.use((req: Request & { session?: { user?: HostUser } }, _res: Response, next: NextFunction) => {
      const sid = /(?:^|;\s*)sid=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
      const user = sid === undefined ? undefined : sessions.get(sid);
      if (user !== undefined) req.session = { user };
      next();
    });
    app.post('/login', express.json(), (req, res) => {
      const user = Object.values(HOST_USERS).find((candidate) => candidate.email === req.body?.email);
      if (user === undefined) return void res.status(401).json({ message: 'Wrong email or password.' });
      const sid = randomUUID();
      sessions.set(sid, user);
      res.cookie('sid', sid, { httpOnly: true, sameSite: 'lax' }).json({ user: { name: user.name } });
    });
    app.post('/logout', (req, res) => {
      const sid = /(?:^|;\s*)sid=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
      if (sid !== undefined) sessions.delete(sid);
      res.clearCookie('sid').json({ ok: true });
    });
    app.use(router);
  });

  test('signed in by the cookie alone: guards, the SDK and private functions know the user; signed out, they do not', async () => {
    const agent = request.agent(app);
    expect((await agent.get('/api/plugin/notes/notes/mine')).status).toBe(401);
    expect((await agent.post('/login').send({ email: 'ada@example.com' })).status).toBe(200);
    const mine = await agent.get('/api/plugin/notes/notes/mine');
    expect([mine.status, mine.body.userId]).toEqual([200, '1']);
    const user = await agent.get('/api/extensions/user');
    expect([user.status, user.body.username]).toEqual([200, 'Ada']);
    expect((await agent.post('/api/function/report').send({})).body).toEqual({ success: true, result: { by: '1' } });
    await agent.post('/logout');
    expect((await agent.get('/api/extensions/user')).status).toBe(401);
  });
});

describe('auth.fromRequest for deployed code, which runs in an isolate: the service asks the app, the isolate gets the user', () => {
  test('the JWT guard, a guard called by an own pre-request handler, and the token-or-key guard', async () => {
    const deployable = await startDeployable(
      (await sharedTestDatabase()).knex,
      {},
      {
        jwt: { secret: JWT_SECRET },
        auth: {
          fromRequest: (req) => {
            const name = req.headers['x-host-user'];
            if (name === 'broken') throw new Error('the session store is down');
            const user = typeof name === 'string' ? HOST_USERS[name] : undefined;
            return user === undefined ? null : bcmsUserOf(user);
          },
        },
      },
    );
    try {
      const { app, deployer } = deployable;
      const guarded = (key: string, method: string) => `${JSON.stringify(key)}: createControllerMethod({ path: ${JSON.stringify(`/${key}`)}, type: 'get', ${method} })`;
      const source = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, BCMSRouteProtection, JWTRoleName, JWTPermissionName } = require('bcms-extensions');
module.exports = createBcmsPlugin({ name: 'isolated-notes', controllers: [createController({ name: 'Main', path: '/main', methods: () => ({
  ${guarded('jwt', 'preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ), handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId, pid: process.pid })')},
  ${guarded('custom', 'preRequestHandler: async (context) => { const { accessToken } = await createJwtProtectionPreRequestHandler([JWTRoleName.USER, JWTRoleName.ADMIN], JWTPermissionName.READ)(context); return { who: accessToken.payload.userId }; }, handler: async ({ who }) => ({ who })')},
  ${guarded('either', 'preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }), handler: async ({ token, key }) => ({ token: token ? token.payload.userId : null, key: key ? key.name : null })')},
}) })] });`;
      await deploy(app, deployer, 'plugin', 'isolated-notes', source);
      const jwt = await request(app).get('/api/plugin/isolated-notes/main/jwt').set('x-host-user', 'ada');
      expect([jwt.status, jwt.body.userId]).toEqual([200, '1']);
      expect(jwt.body.pid).not.toBe(process.pid);
      expect((await request(app).get('/api/plugin/isolated-notes/main/jwt').set('x-host-user', 'rob')).status).toBe(403);
      expect((await request(app).get('/api/plugin/isolated-notes/main/jwt')).status).toBe(401);
      expect((await request(app).get('/api/plugin/isolated-notes/main/custom').set('x-host-user', 'rob')).body).toEqual({ who: '3' });
      expect((await request(app).get('/api/plugin/isolated-notes/main/either').set('x-host-user', 'ada')).body).toEqual({ token: '1', key: null });
      expect((await request(app).get('/api/plugin/isolated-notes/main/either')).status).toBe(401);
      const broken = await request(app).get('/api/plugin/isolated-notes/main/jwt').set('x-host-user', 'broken');
      expect(broken.status).toBe(500);
      expect(JSON.stringify(broken.body)).not.toMatch(/session store|fromRequest/);
    } finally {
      await deployable.close();
    }
  }, 60_000);
});

describe('what auth.fromRequest throws, or returns that is not a user: 500 naming the request, the log naming the option', () => {
  test.each([
    ['throws', () => Promise.reject(new Error('session store down: password=hunter2')), /option auth\.fromRequest threw: session store down/],
    ['returns a string', () => 'ada', /option auth\.fromRequest returned "ada": it must return \{ userId, roles/],
    ['returns no userId', () => ({ roles: [] }), /option auth\.fromRequest returned a user whose userId is undefined/],
    ['returns roles of its own names', () => ({ userId: 'u', roles: [{ name: 'admin', permissions: [] }] }), /roles\[0\]\.name "admin" \(role names: SUDO, DEV, ADMIN/],
    ['returns a permission of its own name', () => ({ userId: 'u', roles: [{ name: 'ADMIN', permissions: ['read'] }] }), /roles\[0\]\.permissions\[0\] "read" \(permissions are \{ name \} or names/],
    ['returns roles that are not an array', () => ({ userId: 'u', roles: 'ADMIN' }), /a user whose roles are "ADMIN"/],
  ])('fromRequest %s', async (_name, fromRequest, logged) => {
    const log = memoryLogger();
    const router = await routerWith({ auth: { fromRequest: fromRequest as never } }, log);
    const app = express().use(router);
    const res = await request(app).get('/api/plugin/notes/notes/mine');
    expect(res.status).toBe(500);
    const requestId = res.headers['x-request-id'] as string;
    expect(res.body.message).toContain(requestId);
    expect(JSON.stringify(res.body)).not.toMatch(/fromRequest|hunter2|session store/);
    const line = log.lines.find((entry) => entry.requestId === requestId && entry.level === 50);
    expect((line?.err as { message?: string } | undefined)?.message).toMatch(logged);
    // A private function and the SDK's user route answer the same way.
    const fn = await request(app).post('/api/function/report').send({});
    expect([fn.status, fn.body.error.code]).toEqual([500, 'INTERNAL_ERROR']);
    expect((await request(app).get('/api/extensions/user')).status).toBe(500);
  });

  test('null and undefined are "no user": a BCMS JWT is tried', async () => {
    const router = await routerWith({ auth: { fromRequest: () => undefined } });
    const app = express().use(router);
    expect((await request(app).get('/api/plugin/notes/notes/mine')).status).toBe(401);
    const ok = await request(app)
      .get('/api/plugin/notes/notes/mine')
      .set('Authorization', `Bearer ${signToken([role('ADMIN', 'READ')])}`);
    expect(ok.status).toBe(200);
  });
});

describe('the auth option is checked when the router is built', () => {
  let database: BcmsExtensionsOptions['database'];
  beforeAll(async () => {
    database = (await sharedTestDatabase()).knex;
  });
  const build = (options: unknown) => () => bcmsExtensions({}, { database, logger: memoryLogger().logger, ...(options as BcmsExtensionsOptions) });

  test('unknown keys and values of the wrong kind throw, naming the option', () => {
    expect(build({ auth: { fromReq: () => null } })).toThrow('unknown option "auth.fromReq" (known: auth.fromRequest, auth.signInPath, auth.tokenField)');
    expect(build({ auth: 'session' })).toThrow('option auth must be an object');
    expect(build({ auth: { fromRequest: 'req.user' } })).toThrow('option auth.fromRequest must be a function');
    expect(build({ auth: { signInPath: '' } })).toThrow('option auth.signInPath must be');
    expect(build({ auth: { tokenField: '' } })).toThrow('option auth.tokenField must name the field');
    expect(build({ auth: { tokenField: 'data..token' } })).toThrow('option auth.tokenField must name the field');
  });

  test('admin.loginUrl is the older name of auth.signInPath: both given and different throw; the same, or either alone, is taken', async () => {
    expect(build({ admin: { loginUrl: '/old' }, auth: { signInPath: '/new' } })).toThrow('option admin.loginUrl is the older name of auth.signInPath: give one (they differ: "/old" and "/new")');
    for (const options of [{ admin: { loginUrl: '/login' }, auth: { signInPath: '/login' } }, { admin: { loginUrl: '/login' } }, { auth: { signInPath: '/login', tokenField: 'data.token' } }]) {
      const router = build(options)();
      routers.push(router);
      const page = await request(express().use(router)).get('/bcms');
      const config = JSON.parse(/<script type="application\/json" id="bcms-shell-config">(.*?)<\/script>/.exec(page.text)?.[1] ?? 'null') as { signInPath: string; tokenField: string };
      expect(config.signInPath).toBe('/login');
      expect(config.tokenField).toBe('tokenField' in (options.auth ?? {}) ? 'data.token' : 'accessToken');
    }
  });
});

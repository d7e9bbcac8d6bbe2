import { Module } from 'node:module';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsPlugin, createController, createControllerMethod, type BcmsExtensionsRouter, type BcmsPlugin } from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy, functionSource, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY, until } from '../support/wait';

// What an isolate gets of a request and what the service takes of its answers: an isolate is not
// trusted, so it never sees the caller's credentials, its answers are capped, its channel to the
// service is capped, its log lines are capped; and every plugin answer, in-process or isolated, is
// sandboxed on the service's origin. Real HTTP to routers whose deployments run in isolates. No
// test here is of a time-out: every router's calls and loads have all the time a loaded machine
// may need (ROOMY), as a large answer crossing from an isolate at a low priority takes long there.

const SANDBOX = 'sandbox';
const NOSNIFF = 'nosniff';

/** An in-process plugin: the same headers on its answers as on an isolated one's. */
const host = createBcmsPlugin({
  name: 'host-plain',
  controllers: [
    createController({
      name: 'Plain',
      path: '/plain',
      methods: () => ({
        ok: createControllerMethod({ path: '/ok', type: 'get', handler: async () => ({ ok: true }) }),
        teapot: createControllerMethod({
          path: '/teapot',
          type: 'get',
          handler: async ({ errorHandler }) => {
            throw errorHandler.occurred(418, 'I am a teapot.');
          },
        }),
        broken: createControllerMethod({
          path: '/broken',
          type: 'get',
          handler: async () => {
            throw new Error('internal');
          },
        }),
        page: createControllerMethod({
          path: '/page',
          type: 'get',
          handler: async ({ response }) => {
            response.type('html').send('<script>localStorage</script>');
          },
        }),
        // The host's own code: its cookies and redirects are its business.
        login: createControllerMethod({
          path: '/login',
          type: 'get',
          handler: async ({ response }) => {
            response.setHeader('Set-Cookie', 'session=host; Path=/; HttpOnly');
            response.setHeader('Location', 'https://sso.example/return');
            response.status(302);
            return {};
          },
        }),
        // A handler that tries every way to loosen them: set before, removed, and given to writeHead.
        loosened: createControllerMethod({
          path: '/loosened',
          type: 'get',
          handler: async ({ response }) => {
            response.setHeader('Content-Security-Policy', 'sandbox allow-scripts allow-same-origin');
            response.removeHeader('X-Content-Type-Options');
            response.writeHead(200, { 'content-security-policy': 'default-src *', 'X-Content-Type-Options': 'sniff', 'Content-Type': 'text/html' });
            response.end('<p>hi</p>');
          },
        }),
      }),
    }),
  ],
});

/** A deployed plugin with one GET method per entry of `methods` (JavaScript source of each handler). */
const pluginSource = (name: string, methods: Record<string, string>, top = ''): string => `"use strict";
const { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, BCMSRouteProtection, JWTRoleName, JWTPermissionName } = require('bcms-extensions');
${top}
module.exports = createBcmsPlugin({ name: ${JSON.stringify(name)}, controllers: [createController({ name: 'Main', path: '/main', methods: () => ({
${Object.entries(methods)
  .map(([key, method]) => `  ${JSON.stringify(key)}: createControllerMethod({ path: ${JSON.stringify(`/${key}`)}, type: 'get', ${method} }),`)
  .join('\n')}
}) })] });`;

/** Extension code that writes `frames` (Buffers) on the isolate's channel itself, past the isolate's own checks. */
const WRITE_RAW = `const fs = require('node:fs');
const frame = (text) => { const body = Buffer.from(text); const head = Buffer.alloc(4); head.writeUInt32BE(body.length); return Buffer.concat([head, body]); };
const writeAll = (bytes) => { let at = 0; while (at < bytes.length) { try { at += fs.writeSync(3, bytes, at); } catch (error) { if (error.code !== 'EAGAIN') throw error; } } };`;

/** A registry plugin loaded by Node's own loader, as isolate: 'all' needs it (see test/isolate/modes.test.ts). */
const registryPlugin = (Module as unknown as { _load(request: string): unknown })._load(path.join(__dirname, '..', 'fixtures', 'isolated-registry', 'plugin.js')) as BcmsPlugin;

const admin = (): string => `Bearer ${signToken([role('ADMIN', 'READ', 'EXECUTE')], { payload: { userId: 'admin-1' } })}`;
const user = (): string => `Bearer ${signToken([role('USER', 'READ')], { payload: { userId: 'user-9' } })}`;

const sandboxed = (res: request.Response): void => {
  expect([res.headers['content-security-policy'], res.headers['x-content-type-options']]).toEqual([SANDBOX, NOSNIFF]);
};

describe.each(backends())('what crosses into an isolate, and what comes back (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let log: ReturnType<typeof memoryLogger>;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    router = bcmsExtensions({ plugins: [host] }, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: log.logger, ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  test('the isolate sees no Authorization and no Cookie, nor a token it could write out again; the JWT guard, a custom guard and BCMS guards still decide', async () => {
    const seen =
      'handler: async ({ request }) => ({ authorization: request.headers.authorization ?? null, viaGet: request.get("authorization") ?? null, cookie: request.headers.cookie ?? null, other: request.headers["x-other"] ?? null })';
    await deploy(
      app,
      deployer,
      'plugin',
      'creds',
      pluginSource('creds', {
        seen,
        names: 'handler: async ({ request }) => Object.keys(request.headers)',
        jwt: `preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ), handler: async ({ accessToken, request }) => ({ userId: accessToken.payload.userId, signature: accessToken.signature, authorization: request.headers.authorization ?? null })`,
        custom: `preRequestHandler: async (context) => { const { accessToken } = await createJwtProtectionPreRequestHandler([JWTRoleName.USER], JWTPermissionName.READ)(context); return { who: accessToken.payload.userId, signature: accessToken.signature }; }, handler: async ({ who, signature, request }) => ({ who, signature, authorization: request.headers.authorization ?? null })`,
        either: `preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }), handler: async ({ token, key }) => ({ token: token ? token.payload.userId : null, signature: token ? token.signature : null, key: key ? key.name : null })`,
      }),
    );
    const token = admin();
    const res = await request(app).get('/api/plugin/creds/main/seen').set('Authorization', token).set('Cookie', 'session=secret').set('X-Other', 'kept');
    expect(res.body).toEqual({ authorization: null, viaGet: null, cookie: null, other: 'kept' });

    // Other credentials, by name: none crosses; look-alikes that carry none do.
    const credentials = ['Proxy-Authorization', 'X-Forwarded-Authorization', 'X-Api-Key', 'Api-Key', 'X-Amz-Security-Token', 'X-Csrf-Token', 'X-Client-Secret', 'X-User-Password', 'X-Original-Cookie'];
    const harmless = ['X-Token-Count', 'X-Api-Key-Id', 'X-Request-Origin'];
    let sent = request(app).get('/api/plugin/creds/main/names');
    for (const name of [...credentials, ...harmless]) sent = sent.set(name, 'value');
    const names = (await sent).body as string[];
    expect(credentials.filter((name) => names.includes(name.toLowerCase()))).toEqual([]);
    expect(harmless.filter((name) => names.includes(name.toLowerCase()))).toEqual(harmless);

    const jwt = await request(app).get('/api/plugin/creds/main/jwt').set('Authorization', token);
    expect(jwt.body).toEqual({ userId: 'admin-1', signature: '', authorization: null });
    expect((await request(app).get('/api/plugin/creds/main/jwt')).status).toBe(401);
    expect((await request(app).get('/api/plugin/creds/main/jwt').set('Authorization', user())).status).toBe(403);

    // A guard the author's own pre-request handler calls asks the service, which has the header.
    expect((await request(app).get('/api/plugin/creds/main/custom').set('Authorization', user())).body).toEqual({ who: 'user-9', signature: '', authorization: null });
    const refused = await request(app).get('/api/plugin/creds/main/custom');
    expect([refused.status, refused.body]).toEqual([401, { message: 'Token is `undefined`.' }]);

    // BCMS's token-or-key guard tells a bearer token from none without the header.
    expect((await request(app).get('/api/plugin/creds/main/either').set('Authorization', token)).body).toEqual({ token: 'admin-1', signature: '', key: null });
    const neither = await request(app).get('/api/plugin/creds/main/either');
    expect([neither.status, neither.body]).toEqual([401, { message: 'Token is `undefined`.' }]);

    // A private function's caller crosses without the token's signature too.
    await deploy(
      app,
      deployer,
      'function',
      'private-creds',
      `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'private-creds', public: false }, handler: async ({ auth, request }) => ({ type: auth.type, signature: auth.signature, inner: auth.accessToken.signature, userId: auth.payload.userId, authorization: request.headers.authorization ?? null }) }));`,
    );
    const called = await request(app).post('/api/function/private-creds').set('Authorization', token).send({});
    expect(called.body).toEqual({ success: true, result: { type: 'jwt', signature: '', inner: '', userId: 'admin-1', authorization: null } });
  });

  test('every plugin answer carries Content-Security-Policy: sandbox and X-Content-Type-Options: nosniff: in-process and deployed, errors too', async () => {
    for (const path of ['ok', 'teapot', 'broken', 'page', 'loosened']) {
      const res = await request(app).get(`/api/plugin/host-plain/plain/${path}`);
      expect(res.status).toBe({ ok: 200, teapot: 418, broken: 500, page: 200, loosened: 200 }[path]);
      sandboxed(res);
    }
    const options = await request(app).options('/api/plugin/host-plain/plain/ok');
    expect(options.status).toBe(204);
    sandboxed(options);
    const wrongVerb = await request(app).post('/api/plugin/host-plain/plain/ok');
    expect(wrongVerb.status).toBe(405);
    sandboxed(wrongVerb);

    await deploy(
      app,
      deployer,
      'plugin',
      'pages',
      pluginSource('pages', {
        ok: 'handler: async () => ({ ok: true })',
        teapot: 'handler: async ({ errorHandler }) => { throw errorHandler.occurred(418, "I am a teapot."); }',
        broken: 'handler: async () => { throw new Error("internal"); }',
        guarded: 'preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ), handler: async () => ({ ok: true })',
        page: 'handler: async ({ response }) => { response.send("<script>fetch(\\"/api/extensions/keys\\", { headers: { authorization: localStorage.token } })</script>"); }',
        loosened: `handler: async ({ response }) => { response.set({ 'Content-Security-Policy': 'default-src *', 'X-Content-Type-Options': 'sniff' }); response.writeHead(200, { 'Content-Security-Policy': 'sandbox allow-same-origin allow-scripts' }); response.end('<p>hi</p>'); }`,
        exits: 'handler: async () => process.exit(3)',
      }),
    );
    for (const path of ['ok', 'teapot', 'broken', 'guarded', 'page', 'loosened', 'exits']) {
      const res = await request(app).get(`/api/plugin/pages/main/${path}`);
      expect([path, res.status]).toEqual([path, { ok: 200, teapot: 418, broken: 500, guarded: 401, page: 200, loosened: 200, exits: 500 }[path]]);
      sandboxed(res);
    }
    // The HTML page of a plugin route is a document of a unique origin: none of the shell's storage.
    const page = await request(app).get('/api/plugin/pages/main/page');
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.text).toContain('<script>');
    // The service's own routes are not plugin answers.
    expect((await request(app).get('/api/extensions/openapi.json')).headers['content-security-policy']).toBeUndefined();
  });

  test("an isolated plugin's answers and errors carry no header that acts on the whole origin (each logged once); the host's own plugins keep theirs", async () => {
    const warned = (extension: string): unknown[] =>
      log.lines.filter((line) => line.extension === extension && line.level === 40 && String(line.msg).includes('whole origin')).map((line) => line.header);
    const tossing = `response.setHeader('Set-Cookie', ['session=attacker; Path=/', 'other=1']); response.setHeader('Clear-Site-Data', '"storage", "cookies"'); response.set('Refresh', '0; url=https://evil.example/');
      response.set({ 'Access-Control-Allow-Origin': 'https://evil.example', 'Access-Control-Allow-Credentials': 'true', 'X-Kept': 'yes' });`;
    const redirect = (target: string): string => `handler: async ({ request, response }) => { response.redirect(302, ${target}); }`;
    await deploy(
      app,
      deployer,
      'plugin',
      'tosser',
      pluginSource('tosser', {
        toss: `handler: async ({ response }) => { ${tossing} return { ok: true }; }`,
        sent: `handler: async ({ response }) => { ${tossing} response.writeHead(200, { 'Set-Cookie': 'late=1', 'Content-Type': 'text/plain' }); response.end('sent'); }`,
        // A thrown error with its own headers: those cross, checked alike.
        thrown: `handler: async ({ errorHandler }) => { const error = errorHandler.occurred(418, 'I am a teapot.'); Object.defineProperty(error, 'headers', { value: { 'Set-Cookie': 'session=attacker; Path=/', 'Access-Control-Allow-Origin': 'https://evil.example', 'X-Kept': 'yes' } }); throw error; }`,
        away: redirect('"https://evil.example/phish"'),
        schemeRelative: redirect('"//evil.example/phish"'),
        backslash: redirect('"/\\\\evil.example/phish"'),
        otherPort: redirect('"http://" + request.hostname + ":1/x"'),
        relative: redirect('"toss?x=1"'),
        rooted: redirect('"/api/plugin/tosser/main/toss"'),
        absolute: redirect('"http://" + request.headers.host + "/api/plugin/tosser/main/toss"'),
      }),
    );
    for (let i = 0; i < 2; i++) {
      for (const path of ['toss', 'sent']) {
        const res = await request(app).get(`/api/plugin/tosser/main/${path}`).set('Origin', 'https://evil.example');
        expect([path, res.status]).toEqual([path, 200]);
        expect([path, res.headers['set-cookie'], res.headers['clear-site-data'], res.headers.refresh, res.headers['access-control-allow-credentials']]).toEqual([
          path,
          undefined,
          undefined,
          undefined,
          undefined,
        ]);
        // The router's CORS header, as it sets it.
        expect(res.headers['access-control-allow-origin']).toBe('*');
        expect(res.headers['x-kept']).toBe('yes');
        sandboxed(res);
      }
      const thrown = await request(app).get('/api/plugin/tosser/main/thrown');
      expect([thrown.status, thrown.body, thrown.headers['set-cookie'], thrown.headers['access-control-allow-origin'], thrown.headers['x-kept']]).toEqual([
        418,
        { message: 'I am a teapot.' },
        undefined,
        '*',
        'yes',
      ]);
    }
    for (const path of ['away', 'schemeRelative', 'backslash', 'otherPort']) {
      const res = await request(app).get(`/api/plugin/tosser/main/${path}`);
      expect([path, res.status, res.headers.location]).toEqual([path, 302, undefined]);
    }
    const base = '/api/plugin/tosser/main/';
    for (const [path, location] of [
      ['relative', 'toss?x=1'],
      ['rooted', `${base}toss`],
    ]) {
      const res = await request(app).get(`${base}${path}`);
      expect([path, res.status, res.headers.location]).toEqual([path, 302, location]);
    }
    const absolute = await request(app).get(`${base}absolute`);
    expect(absolute.headers.location).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/plugin\/tosser\/main\/toss$/);
    // Each kind of header once, named as the extension set it, whatever the number of answers.
    expect(warned('plugin tosser@1.0.0').sort()).toEqual(['Access-Control-Allow-Origin', 'Clear-Site-Data', 'Location', 'Refresh', 'Set-Cookie']);

    const own = await request(app).get('/api/plugin/host-plain/plain/login');
    expect([own.status, own.headers['set-cookie'], own.headers.location]).toEqual([302, ['session=host; Path=/; HttpOnly'], 'https://sso.example/return']);
  });

  test("isolate: 'all': the registry's own plugin, in an isolate, loses its cookie and its redirect elsewhere; in the service's process it keeps them", async () => {
    for (const isolate of ['deployed', 'all'] as const) {
      const modeLog = memoryLogger();
      const registry = bcmsExtensions({ plugins: [registryPlugin] }, { database: db.knex, isolate, logger: modeLog.logger, ...ROOMY });
      try {
        const registryApp = express().use(registry);
        await registry.ready;
        const res = await request(registryApp).get('/api/plugin/registry-isolated/where/login');
        const kept = isolate === 'deployed';
        expect([isolate, res.status, res.headers['set-cookie'], res.headers.location]).toEqual(
          kept ? [isolate, 302, ['session=registry; Path=/'], 'https://sso.example/return'] : [isolate, 302, undefined, undefined],
        );
        expect(
          modeLog.lines
            .filter((line) => String(line.msg).includes('whole origin'))
            .map((line) => line.header)
            .sort(),
        ).toEqual(kept ? [] : ['Location', 'Set-Cookie']);
      } finally {
        await registry.close();
      }
    }
  });

  test('an error forged with a header HTTP cannot carry (a newline, a bad name) is answered without it, and the service lives; so is one asking too many questions at once', async () => {
    const forge = (headers: Record<string, string>): string =>
      `handler: async () => { const headers = JSON.parse(${JSON.stringify(JSON.stringify(headers))}); for (let id = 1; id <= 4; id++) writeAll(frame(JSON.stringify([{ t: "failed", id, error: { name: "BcmsHttpError", code: "TOKEN_INVALID", message: "Invalid token.", http: { status: 401, headers, body: { message: "forged" } } } }]))); return new Promise(() => {}); }`;
    await deploy(
      app,
      deployer,
      'plugin',
      'badheaders',
      pluginSource(
        'badheaders',
        {
          newline: forge({ 'X-Split': 'a\nb', 'X-Kept': 'yes' }),
          name: forge({ 'Bad Name': 'x', 'Content-Length': '1' }),
        },
        WRITE_RAW,
      ),
    );
    // Apart (an isolate of its own): the forged frames above name calls by number, which its calls would share.
    await deploy(
      app,
      deployer,
      'plugin',
      'asker',
      pluginSource(
        'asker',
        {
          asks: 'handler: async () => { const asks = []; for (let id = 1; id <= 300; id++) asks.push({ t: "ask", id: 1e9 + id, ask: { op: "token", call: 1 } }); writeAll(frame(JSON.stringify(asks))); return new Promise(() => {}); }',
        },
        WRITE_RAW,
      ),
    );
    const split = await request(app).get('/api/plugin/badheaders/main/newline');
    expect([split.status, split.headers['x-split'], split.headers['x-kept']]).toEqual([401, undefined, 'yes']);
    const named = await request(app).get('/api/plugin/badheaders/main/name');
    expect(named.status).toBe(401);
    const asked = await request(app).get('/api/plugin/asker/main/asks');
    expect([asked.status, asked.body]).toEqual([500, { message: 'The extension crashed while answering; it is being restarted.' }]);
    expect(log.lines.some((line) => line.reason === 'it asked more than 256 questions at once')).toBe(true);
    expect((await request(app).get('/api/plugin/host-plain/plain/login')).status).toBe(302);
  });

  // Each large answer in a test of its own: crossing from an isolate at a low priority, paced so as
  // to leave the service's thread free, several of them take past a minute on a loaded machine.
  describe('answers past extensionAnswerMb (16 MB)', () => {
    beforeAll(async () => {
      await deploy(
        app,
        deployer,
        'plugin',
        'huge',
        pluginSource('huge', {
          bytes: 'handler: async () => Buffer.alloc(64 * 1024 * 1024, 120)',
          sent: 'handler: async ({ response }) => { response.type("text/plain"); for (let i = 0; i < 64; i++) response.write(Buffer.alloc(1024 * 1024, 120)); response.end(); }',
          json: 'handler: async () => ({ text: "x".repeat(17 * 1024 * 1024) })',
          // 14 MB of JSON, within the limit, but twice that escaped again as a string in a frame: it crosses as base64.
          escaped: "handler: async () => ({ text: '\"'.repeat(7 * 1024 * 1024) })",
          small: 'handler: async () => ({ small: true })',
        }),
      );
    });

    test('a Buffer past it: 502 EXTENSION_ANSWER_TOO_LARGE (sandboxed as any plugin answer), the service answering meanwhile', async () => {
      const big = request(app)
        .get('/api/plugin/huge/main/bytes')
        .then((res) => res);
      const meanwhile = await Promise.all([request(app).get('/api/plugin/host-plain/plain/ok'), request(app).get('/api/plugin/huge/main/small')]);
      expect(meanwhile.map((res) => res.status)).toEqual([200, 200]);
      const res = await big;
      expect([res.status, res.body]).toEqual([502, { message: "The extension's answer is larger than this service takes (extensionAnswerMb)." }]);
      sandboxed(res);
    });

    test('an answer written past it by hand, and JSON past it: 502 each', async () => {
      for (const path of ['sent', 'json']) {
        const other = await request(app).get(`/api/plugin/huge/main/${path}`);
        expect([path, other.status]).toEqual([path, 502]);
      }
    });

    test('JSON within it that crosses as base64 (twice its size escaped) comes whole; the extension then answers again', async () => {
      const escaped = await request(app).get('/api/plugin/huge/main/escaped');
      expect(escaped.status).toBe(200);
      expect(escaped.headers['content-type']).toBe('application/json; charset=utf-8');
      expect((escaped.body as { text: string }).text).toBe('"'.repeat(7 * 1024 * 1024));
      expect((await request(app).get('/api/plugin/huge/main/small')).body).toEqual({ small: true });
    });

    test("a function's result past it: 502 EXTENSION_ANSWER_TOO_LARGE in the function envelope", async () => {
      await deploy(app, deployer, 'function', 'huge-result', functionSource('huge-result', 'async () => "x".repeat(20 * 1024 * 1024)'));
      const fn = await request(app).post('/api/function/huge-result').send({});
      expect([fn.status, fn.body]).toEqual([
        502,
        { success: false, error: { code: 'EXTENSION_ANSWER_TOO_LARGE', message: "The extension's answer is larger than this service takes (extensionAnswerMb)." } },
      ]);
    });
  });

  describe('an isolate that writes on its channel past the rules (a router whose answers are held to 1 MB)', () => {
    // A router of its own with a 1 MB answer limit: a forged answer past it still fits a frame.
    const rogueLog = memoryLogger();
    let small: BcmsExtensionsRouter;
    let smallApp: express.Express;
    beforeAll(async () => {
      small = bcmsExtensions({ plugins: [host] }, { database: db.knex, logger: rogueLog.logger, extensionAnswerMb: 1, ...ROOMY });
      smallApp = express().use(small);
      await small.ready;
      await deploy(
        smallApp,
        deployer,
        'plugin',
        'rogue',
        pluginSource(
          'rogue',
          {
            // A header that says 2 GB: refused on its four bytes.
            huge: 'handler: async () => { writeAll(Buffer.from([0x7f, 0xff, 0xff, 0xff, 1, 2, 3])); return new Promise(() => {}); }',
            garbage: 'handler: async () => { writeAll(frame("this is not JSON")); return new Promise(() => {}); }',
            // A log line whose fields are past the cap, sent past the isolate's own check.
            fields: 'handler: async () => { writeAll(frame(JSON.stringify([{ t: "log", level: "info", object: { big: "y".repeat(100000) }, message: "forged fields" }]))); return { ok: true }; }',
            // Which isolate answered: an id of its own (in the sandbox, every isolate is pid 2 of its namespace).
            ok: 'handler: async () => ({ ok: true, pid: ISOLATE_ID })',
          },
          `${WRITE_RAW}\nconst ISOLATE_ID = require('node:crypto').randomUUID();`,
        ),
      );
    });
    afterAll(async () => {
      await small?.close();
    });

    test('a frame past the cap, or not JSON: its isolate is ended (500 EXTENSION_CRASHED) and replaced, and the service lives', async () => {
      for (const path of ['huge', 'garbage']) {
        const pid = (await request(smallApp).get('/api/plugin/rogue/main/ok')).body.pid as string;
        const res = await request(smallApp).get(`/api/plugin/rogue/main/${path}`);
        expect([path, res.status, res.body]).toEqual([path, 500, { message: 'The extension crashed while answering; it is being restarted.' }]);
        expect((await request(smallApp).get('/api/plugin/host-plain/plain/ok')).status).toBe(200);
        // Replaced: served again, by another process.
        const again = await request(smallApp).get('/api/plugin/rogue/main/ok');
        expect(again.status).toBe(200);
        expect(again.body.pid).not.toBe(pid);
      }
      expect(rogueLog.lines.filter((line) => line.msg === 'bcms-extensions: an isolate broke the channel to the service; it is ended').map((line) => line.reason)).toEqual([
        `it sent a message of ${0x7fffffff} bytes, past the cap of ${Math.ceil((1024 * 1024) / 3) * 4 + 1024 * 1024}`,
        'it sent a message that is not JSON',
      ]);
    });

    test('an answer forged past the limit is refused (502)', async () => {
      // A fresh isolate of its own: its first calls are 1, 2, 3.
      await deploy(
        smallApp,
        deployer,
        'plugin',
        'forger',
        pluginSource(
          'forger',
          {
            forged:
              'handler: async () => { for (let id = 1; id <= 3; id++) writeAll(frame(JSON.stringify([{ t: "done", id, answer: { status: 200, headers: [], json: JSON.stringify("x".repeat(1536 * 1024)) } }]))); return new Promise(() => {}); }',
          },
          WRITE_RAW,
        ),
      );
      const forged = await request(smallApp).get('/api/plugin/forger/main/forged');
      expect([forged.status, forged.body]).toEqual([502, { message: "The extension's answer is larger than this service takes (extensionAnswerMb)." }]);
    });

    test('a log line forged with fields past the cap keeps its message, without them', async () => {
      expect((await request(smallApp).get('/api/plugin/rogue/main/fields')).body).toEqual({ ok: true });
      await until(() => rogueLog.lines.some((line) => line.msg === 'forged fields'));
      const line = rogueLog.lines.find((each) => each.msg === 'forged fields');
      expect(line).toMatchObject({ extension: 'plugin rogue@1.0.0', fields: '(100010 bytes of fields, past the cap of 16384: not logged)' });
      expect(line?.big).toBeUndefined();
    });
  });

  test('log lines past 1,000 a second per extension (its logger and its output alike) are dropped and counted; a line with fields past 16 KB keeps its message', async () => {
    await deploy(
      app,
      deployer,
      'function',
      'chatty',
      functionSource(
        'chatty',
        'async ({ logger }) => { for (let i = 0; i < 3000; i++) logger.info({ i }, "flood line"); for (let i = 0; i < 2000; i++) console.log("flood output " + i); logger.info({ big: "z".repeat(50000) }, "large fields"); return "said"; }',
      ),
    );
    expect((await request(app).post('/api/function/chatty').send({})).body.result).toBe('said');
    const extension = 'function chatty@1.0.0';
    const counted = (): { kept: number; dropped: number } => {
      let kept = 0;
      let dropped = 0;
      for (const line of log.lines) {
        if (line.extension !== extension) continue;
        if (line.msg === 'flood line' || line.msg === 'large fields' || String(line.msg).startsWith('flood output ')) kept++;
        if (typeof line.dropped === 'number') dropped += line.dropped;
      }
      return { kept, dropped };
    };
    // Every line is either logged or counted in a report, once its second is over.
    await until(() => {
      const { kept, dropped } = counted();
      return kept + dropped === 5001;
    });
    const { kept, dropped } = counted();
    expect(kept + dropped).toBe(5001);
    expect(dropped).toBeGreaterThan(0);
    const report = log.lines.find((line) => line.extension === extension && typeof line.dropped === 'number');
    expect(report).toMatchObject({ level: 40, linesPerSecond: 1000 });
    expect(String(report?.msg)).toMatch(/^bcms-extensions: \d+ log lines of function chatty@1\.0\.0 were dropped \(past 1000 a second\)$/);
    // A second later the extension logs again, its line with fields past the cap kept with a note.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await deploy(app, deployer, 'function', 'chatty', functionSource('chatty', 'async ({ logger }) => { logger.info({ big: "z".repeat(50000) }, "large fields"); return "said"; }'), {
      version: '2.0.0',
    });
    expect((await request(app).post('/api/function/chatty').send({})).body.result).toBe('said');
    await until(() => log.lines.some((line) => line.extension === 'function chatty@2.0.0' && line.msg === 'large fields'));
    const large = log.lines.find((line) => line.extension === 'function chatty@2.0.0' && line.msg === 'large fields');
    expect(large).toMatchObject({ fields: expect.stringMatching(/^\(\d+ bytes of fields, past the cap of 16384: not logged\)$/) });
    expect(large?.big).toBeUndefined();
  });
});

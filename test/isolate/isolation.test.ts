import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsPlugin, createController, createControllerMethod, type BcmsExtensionsRouter } from '../../lib';
import { migrate } from '../../lib/db/migrate';
import { recordDeployment } from '../../lib/deploy/store';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy, functionSource, isRunning, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY, until } from '../support/wait';

// Deployed code runs in isolates (child processes): a loop, a leak, a crash or a hook in an
// extension costs only that extension. Here as plain child processes (`sandbox: 'none'`), whose
// pids and files the host can see; test/isolate/sandbox.test.ts runs the same and more in bubblewrap. Every test goes through real HTTP to a router whose
// deployments run in isolates, on PGlite and on the Postgres server. Its calls and loads have all
// the time a loaded machine may need (ROOMY); the tests of a time-out use a router of their own
// with that limit short, and code that never ends.

const open = createBcmsPlugin({
  name: 'host-open',
  controllers: [
    createController({
      name: 'Open',
      path: '/open',
      methods: () => ({ ping: createControllerMethod({ type: 'get', handler: async () => ({ pong: true, pid: process.pid }) }) }),
    }),
  ],
});

/** A deployed plugin with one GET method `/<path>` whose handler is `handler` (JavaScript source). */
const pluginSource = (name: string, handler: string, top = ''): string => `"use strict";
const { createBcmsPlugin, createController, createControllerMethod } = require('bcms-extensions');
${top}
module.exports = createBcmsPlugin({ name: ${JSON.stringify(name)}, controllers: [createController({ name: 'Main', path: '/main', methods: () => ({
  run: createControllerMethod({ path: '/run', type: 'get', handler: ${handler} }),
}) })] });`;

const errorCode = (res: request.Response): unknown => res.body?.error?.code;

describe.each(backends())('deployed code runs isolated (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let log: ReturnType<typeof memoryLogger>;
  const seenByHost: string[] = [];

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    router = bcmsExtensions(
      { plugins: [open] },
      {
        database: db.knex,
        jwt: { secret: JWT_SECRET },
        logger: log.logger,
        sandbox: 'none',
        ...ROOMY,
        extensionMemoryMb: 96,
        extensionEnv: { GREETING: 'hello from the host' },
      },
    );
    app = express();
    app.use(router);
    // The host's own route: what a hook in extension code would try to reach.
    app.get('/host/echo', (req, res) => {
      seenByHost.push(String(req.headers.authorization));
      res.json({ host: true, polluted: ({} as Record<string, unknown>).polluted ?? null, hooked: res.getHeader('x-hooked') ?? null });
    });
    app.get('/host/address', (req, res) => {
      res.json({ ip: req.ip, protocol: req.protocol, hostname: req.hostname, secure: req.secure, path: req.path });
    });
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  test("the registry runs in the service's process, deployed code in a process of its own", async () => {
    await deploy(app, deployer, 'function', 'where', functionSource('where', 'async () => ({ pid: process.pid, ppid: process.ppid })'));
    const deployed = (await request(app).post('/api/function/where')).body.result;
    expect(deployed.pid).not.toBe(process.pid);
    expect(deployed.ppid).toBe(process.pid);
    expect((await request(app).get('/api/plugin/host-open/open')).body).toEqual({ pong: true, pid: process.pid });
  });

  test("the request's ip, protocol and hostname inside are Express's, with and without 'trust proxy'", async () => {
    await deploy(
      app,
      deployer,
      'function',
      'address',
      functionSource('address', 'async ({ request: r }) => ({ ip: r.ip, protocol: r.protocol, hostname: r.hostname, secure: r.secure, path: r.path })'),
    );
    const forwarded = { 'X-Forwarded-For': '203.0.113.7', 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'cms.example.org:8443' };
    const compare = async (): Promise<unknown> => {
      const inside = (await request(app).post('/api/function/address?x=1').set(forwarded)).body.result;
      const host = (await request(app).get('/host/address').set(forwarded)).body;
      expect(inside).toEqual({ ...host, path: '/api/function/address' });
      return inside;
    };
    try {
      expect(await compare()).toMatchObject({ protocol: 'http', hostname: '127.0.0.1', secure: false });
      app.set('trust proxy', true);
      expect(await compare()).toMatchObject({ ip: '203.0.113.7', protocol: 'https', hostname: 'cms.example.org', secure: true });
    } finally {
      app.set('trust proxy', false);
    }
  });

  /**
   * A router like the others but with calls held to 1.5 s, for the tests of that limit: what runs
   * past it never ends, so a slow machine answers later but alike. Started with what is deployed.
   */
  const startTight = async (): Promise<{ tight: BcmsExtensionsRouter; tightApp: express.Express }> => {
    const tight = bcmsExtensions({ plugins: [open] }, { database: db.knex, logger: memoryLogger().logger, sandbox: 'none', functionTimeoutMs: 1500, pluginTimeoutMs: 1500, loadTimeoutMs: 600_000 });
    const tightApp = express().use(tight);
    await tight.ready;
    return { tight, tightApp };
  };

  test('a function that spins past its time-out: 504 FUNCTION_TIMEOUT, the instance answers meanwhile, its isolate is ended and replaced', async () => {
    const { tight, tightApp } = await startTight();
    // The spinning call writes its isolate's pid here first: the test knows when it spins, and where.
    const spinningAt = path.join(os.tmpdir(), `bcms-spin-${process.pid}-${backend}`);
    fs.rmSync(spinningAt, { force: true });
    try {
      const handler = `async ({ request }) => { if (request.body.spin) { require('node:fs').writeFileSync(${JSON.stringify(spinningAt)}, String(process.pid)); for (;;) {} } return process.pid; }`;
      await deploy(tightApp, deployer, 'function', 'spin', functionSource('spin', handler));
      let settled = false;
      const spinning = request(tightApp)
        .post('/api/function/spin')
        .send({ spin: true })
        .then((res) => {
          settled = true;
          return res;
        });
      await until(() => fs.existsSync(spinningAt) && fs.readFileSync(spinningAt, 'utf8') !== '');
      const spinner = Number(fs.readFileSync(spinningAt, 'utf8'));
      // The service's thread is free: its own routes, and the same function in another isolate, answer.
      const ping = await request(tightApp).get('/api/plugin/host-open/open');
      expect(ping.status).toBe(200);
      expect(settled).toBe(false);
      const other = await request(tightApp).post('/api/function/spin').send({ spin: false });
      expect(other.status).toBe(200);
      expect(other.body.result).not.toBe(spinner);
      const res = await spinning;
      expect(res.status).toBe(504);
      expect(res.body).toEqual({ success: false, error: { code: 'FUNCTION_TIMEOUT', message: 'Function "spin" ran past its time-out of 1500 ms.' } });
      await until(() => !isRunning(spinner));
      const after = await request(tightApp).post('/api/function/spin').send({ spin: false });
      expect(after.status).toBe(200);
      expect(after.body.result).not.toBe(spinner);
    } finally {
      fs.rmSync(spinningAt, { force: true });
      await tight.close();
    }
  });

  test("a plugin handler past pluginTimeoutMs: 504 { message }, and the plugin's next request is answered", async () => {
    const { tight, tightApp } = await startTight();
    try {
      await deploy(tightApp, deployer, 'plugin', 'spinner', pluginSource('spinner', `async ({ request }) => { if (request.query.spin === 'yes') { for (;;) {} } return { ok: true }; }`));
      const res = await request(tightApp).get('/api/plugin/spinner/main/run?spin=yes');
      expect(res.status).toBe(504);
      expect(res.body).toEqual({ message: 'The handler ran past its time-out.' });
      expect((await request(tightApp).get('/api/plugin/spinner/main/run')).body).toEqual({ ok: true });
    } finally {
      await tight.close();
    }
  });

  test('a leak past extensionMemoryMb fails only its own request (500 EXTENSION_CRASHED); the isolate is replaced', async () => {
    // A router of its own, whose time-outs leave a loaded machine all the time it needs to reach the limit.
    const leakLog = memoryLogger();
    const leaky = bcmsExtensions({}, { database: db.knex, sandbox: 'none', logger: leakLog.logger, ...ROOMY, extensionMemoryMb: 96 });
    try {
      const leakApp = express().use(leaky);
      await leaky.ready;
      await deploy(
        leakApp,
        deployer,
        'function',
        'leak',
        functionSource('leak', 'async ({ request }) => { if (request.body.leak) { const kept = []; for (;;) kept.push(new Array(1000000).fill(Math.random())); } return process.pid; }'),
      );
      const before = (await request(leakApp).post('/api/function/leak').send({})).body.result as number;
      const res = await request(leakApp).post('/api/function/leak').send({ leak: true });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ success: false, error: { code: 'EXTENSION_CRASHED', message: 'The extension crashed while answering; it is being restarted.' } });
      expect(leakLog.lines.some((line) => line.extension === 'function leak@1.0.0' && String(line.reason).includes('heap limit of 96 MB'))).toBe(true);
      const after = await request(leakApp).post('/api/function/leak').send({});
      expect(after.status).toBe(200);
      expect(after.body.result).not.toBe(before);
      expect((await request(app).get('/api/plugin/host-open/open')).status).toBe(200);
    } finally {
      await leaky.close();
    }
    // Its isolate fills 96 MB at a low priority: past half a minute beside two busy cores.
  }, 90_000);

  // A crash costs an isolate's restart, seconds on a loaded machine: functions and plugins in tests of their own.
  test('process.exit() and an uncaught exception in a function: 500 EXTENSION_CRASHED, then served again', async () => {
    await deploy(
      app,
      deployer,
      'function',
      'quits',
      functionSource(
        'quits',
        'async ({ request }) => { if (request.body.how === "exit") process.exit(7); if (request.body.how === "throw") { setTimeout(() => { throw new Error("boom"); }); return new Promise(() => {}); } return "fine"; }',
      ),
    );
    for (const how of ['exit', 'throw']) {
      const res = await request(app).post('/api/function/quits').send({ how });
      expect([res.status, errorCode(res)]).toEqual([500, 'EXTENSION_CRASHED']);
      expect((await request(app).post('/api/function/quits').send({})).body.result).toBe('fine');
    }
  });

  test('process.exit() in a plugin handler: 500 { message }, then served again', async () => {
    await deploy(app, deployer, 'plugin', 'quitter', pluginSource('quitter', `async ({ request }) => { if (request.query.exit) process.exit(1); return { ok: true }; }`));
    const res = await request(app).get('/api/plugin/quitter/main/run?exit=1');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ message: 'The extension crashed while answering; it is being restarted.' });
    expect((await request(app).get('/api/plugin/quitter/main/run')).body).toEqual({ ok: true });
  });

  test("process.env holds extensionEnv only: no DATABASE_URL, none of the host's variables", async () => {
    process.env.BCMS_TEST_HOST_SECRET = 'not for extensions';
    try {
      await deploy(app, deployer, 'function', 'env', functionSource('env', 'async () => ({ env: { ...process.env }, database: process.env.DATABASE_URL ?? null })'));
      const { result } = (await request(app).post('/api/function/env')).body;
      expect(result).toEqual({ env: { GREETING: 'hello from the host' }, database: null });
    } finally {
      delete process.env.BCMS_TEST_HOST_SECRET;
    }
  });

  test("a hook on http.Server.prototype and Object.prototype in extension code never reaches the host's objects", async () => {
    const hook = `const http = require('node:http');
const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, req, res) {
  if (event === 'request') { globalThis.captured = req.headers.authorization; res.setHeader('x-hooked', 'yes'); }
  return emit.apply(this, arguments);
};
Object.prototype.polluted = 'yes';`;
    await deploy(app, deployer, 'plugin', 'hooker', pluginSource('hooker', 'async () => ({ captured: globalThis.captured ?? null, polluted: ({}).polluted })', hook));
    expect((await request(app).get('/api/plugin/hooker/main/run')).body).toEqual({ captured: null, polluted: 'yes' });
    const host = await request(app).get('/host/echo').set('Authorization', 'Bearer host-secret-token');
    expect(host.body).toEqual({ host: true, polluted: null, hooked: null });
    expect(host.headers['x-hooked']).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // The host's requests never pass through the isolate's http: nothing was captured there.
    expect((await request(app).get('/api/plugin/hooker/main/run')).body.captured).toBeNull();
  });

  test('the same API inside: repo, errorHandler, the JWT guard, Buffer answers and headers', async () => {
    const code = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTRoleName, JWTPermissionName } = require('bcms-extensions');
module.exports = createBcmsPlugin({ name: 'inside', controllers: [createController({ name: 'Inside', path: '/inside', methods: () => ({
  content: createControllerMethod({ path: '/content', type: 'post', handler: async ({ repo, request }) => {
    const template = await repo.template.add({ name: request.body.template, label: 'Inside' });
    await repo.entry.add({ templateId: template._id, meta: [{ lng: 'en', props: [{ id: 'title', data: ['one'] }] }] });
    const entries = await repo.entry.findAllByTemplateId(template._id);
    return { template: template.name, entries: entries.length, count: await repo.entry.countByTemplateId(template._id) };
  } }),
  teapot: createControllerMethod({ path: '/teapot', type: 'get', handler: async ({ errorHandler }) => { throw errorHandler.occurred(418, 'I am a teapot.'); } }),
  bytes: createControllerMethod({ path: '/bytes', type: 'get', handler: async ({ response }) => { response.setHeader('Cache-Control', 'max-age=60'); response.status(201); return Buffer.from([1, 2, 3]); } }),
  sent: createControllerMethod({ path: '/sent', type: 'get', handler: async ({ response }) => { response.type('text/plain').send('sent by hand'); } }),
  me: createControllerMethod({ path: '/me', type: 'get', preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ), handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }) }),
  own: createControllerMethod({ path: '/own', type: 'get', preRequestHandler: async (context) => { const { accessToken } = await createJwtProtectionPreRequestHandler([JWTRoleName.USER], JWTPermissionName.READ)(context); return { who: accessToken.payload.userId }; }, handler: async ({ who, name }) => ({ who, name }) }),
}) })] });`;
    await deploy(app, deployer, 'plugin', 'inside', code);

    const content = await request(app)
      .post('/api/plugin/inside/inside/content')
      .send({ template: `inside-${backend}` });
    expect(content.body).toEqual({ template: `inside-${backend}`, entries: 1, count: 1 });
    // Written through the service's pool: the host's database has it.
    expect(
      Number(
        (
          (await db
            .knex('bcms_templates')
            .where({ name: `inside-${backend}` })
            .count({ n: '*' })) as { n: unknown }[]
        )[0]?.n,
      ),
    ).toBe(1);

    const teapot = await request(app).get('/api/plugin/inside/inside/teapot');
    expect([teapot.status, teapot.body]).toEqual([418, { message: 'I am a teapot.' }]);

    const bytes = await request(app).get('/api/plugin/inside/inside/bytes').buffer(true);
    expect(bytes.status).toBe(201);
    expect(bytes.headers['content-type']).toBe('application/octet-stream');
    expect(bytes.headers['cache-control']).toBe('max-age=60');
    expect([...(bytes.body as Buffer)]).toEqual([1, 2, 3]);
    expect(bytes.headers['x-request-id']).toEqual(expect.any(String));

    const sent = await request(app).get('/api/plugin/inside/inside/sent');
    expect([sent.status, sent.headers['content-type'], sent.text]).toEqual([200, 'text/plain; charset=utf-8', 'sent by hand']);

    const admin = `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE')], { payload: { userId: 'admin-1' } })}`;
    expect((await request(app).get('/api/plugin/inside/inside/me').set('Authorization', admin)).body).toEqual({ userId: 'admin-1' });
    const none = await request(app).get('/api/plugin/inside/inside/me');
    expect([none.status, none.body, none.headers['www-authenticate']]).toEqual([401, { message: 'Token is `undefined`.' }, 'Bearer']);
    const user = `Bearer ${signToken([role('USER', 'READ')], { payload: { userId: 'user-9' } })}`;
    expect((await request(app).get('/api/plugin/inside/inside/me').set('Authorization', user)).status).toBe(403);

    expect((await request(app).get('/api/plugin/inside/inside/own').set('Authorization', user)).body).toEqual({ who: 'user-9', name: 'own' });
    expect((await request(app).get('/api/plugin/inside/inside/own').set('Authorization', admin)).status).toBe(403);
  });

  test('undeploy: the extension is gone, and so is its isolate, with the processes it started', async () => {
    const code = functionSource(
      'leaving',
      `async () => ({ pid: process.pid, child: started.pid })`,
      `const started = require('node:child_process').spawn('/bin/sleep', ['600'], { stdio: 'ignore' });`,
    );
    await deploy(app, deployer, 'function', 'leaving', code);
    const { pid, child } = (await request(app).post('/api/function/leaving')).body.result as { pid: number; child: number };
    expect([isRunning(pid), isRunning(child)]).toEqual([true, true]);
    const gone = await signed(app, 'DELETE', '/api/extensions/deployments/function/leaving', deployer);
    expect(gone.status).toBe(200);
    expect(gone.body.undeployed).toMatchObject({ kind: 'function', name: 'leaving', version: '1.0.0', active: false });
    expect(errorCode(await request(app).post('/api/function/leaving'))).toBe('FUNCTION_NOT_FOUND');
    await until(() => !isRunning(pid) && !isRunning(child));
    const again = await signed(app, 'DELETE', '/api/extensions/deployments/function/leaving', deployer);
    expect([again.status, again.body]).toEqual([404, { message: 'No function named "leaving" is deployed.' }]);
    expect((await request(app).delete('/api/extensions/deployments/function/leaving')).status).toBe(401);
    // Rollback brings the last version back.
    expect((await signed(app, 'POST', '/api/extensions/deployments/function/leaving/rollback', deployer)).status).toBe(200);
    expect((await request(app).post('/api/function/leaving')).status).toBe(200);
  });

  test('a redeploy ends the old version’s isolate once its calls are answered', async () => {
    await deploy(app, deployer, 'function', 'replaced', functionSource('replaced', 'async () => process.pid'));
    const old = (await request(app).post('/api/function/replaced')).body.result as number;
    await deploy(app, deployer, 'function', 'replaced', functionSource('replaced', 'async () => -process.pid'), { version: '2.0.0' });
    expect((await request(app).post('/api/function/replaced')).body.result).toBeLessThan(0);
    await until(() => !isRunning(old));
  });

  test('rollback refuses a version that no longer loads, and the live one stays', async () => {
    const flag = path.join(os.tmpdir(), `bcms-broken-${process.pid}-${backend}`);
    fs.rmSync(flag, { force: true });
    await deploy(
      app,
      deployer,
      'function',
      'fragile',
      functionSource('fragile', 'async () => "v1"', `if (require('node:fs').existsSync(${JSON.stringify(flag)})) throw new Error('v1 needs what is gone');`),
    );
    await deploy(app, deployer, 'function', 'fragile', functionSource('fragile', 'async () => "v2"'), { version: '2.0.0' });
    fs.writeFileSync(flag, '');
    try {
      const refused = await signed(app, 'POST', '/api/extensions/deployments/function/fragile/rollback', deployer);
      expect([refused.status, refused.body]).toEqual([422, { message: 'Version 1.0.0 of function "fragile" did not load: v1 needs what is gone' }]);
      expect((await request(app).post('/api/function/fragile')).body.result).toBe('v2');
      // Remembered: refused again without loading it, and `list` says why.
      fs.rmSync(flag);
      const again = await signed(app, 'POST', '/api/extensions/deployments/function/fragile/rollback', deployer);
      expect(again.status).toBe(422);
      expect(again.body.message).toMatch(/^Version 1\.0\.0 of function "fragile" failed to load \(.*v1 needs what is gone\): it is not made live again\.$/);
      const list = await signed(app, 'GET', '/api/extensions/deployments', deployer);
      const v1 = (list.body.deployments as { name: string; version: string; loadError: string | null }[]).find((d) => d.name === 'fragile' && d.version === '1.0.0');
      expect(v1?.loadError).toMatch(/v1 needs what is gone/);
    } finally {
      fs.rmSync(flag, { force: true });
    }
  });

  /**
   * An instance that starts beside a function whose top-level code never ends (deployed as another
   * instance would have), on a database of its own holding that one and `others`: what it loads at
   * its start is only what the test names, each held to `loadTimeoutMs`.
   */
  const startBesideSpinning = async (loadTimeoutMs: number, others: Record<string, string> = {}) => {
    const own = await openTestDatabase(backend);
    await migrate(own.knex);
    const record = (name: string, code: string) =>
      recordDeployment(own.knex, { kind: 'function', name, project: null, version: '1.0.0', sha256: 'x', code, ui: null, signature: null, deployedBy: 'test' });
    await record('stuck', functionSource('stuck', 'async () => 1', 'for (;;) {}'));
    for (const [name, code] of Object.entries(others)) await record(name, code);
    const startLog = memoryLogger();
    const again = bcmsExtensions({ plugins: [open] }, { database: own.knex, logger: startLog.logger, loadTimeoutMs });
    const failed = (): boolean => startLog.lines.some((line) => line.msg === 'bcms-extensions: a deployment failed to load on this instance' && String(line.extension).startsWith('function stuck@'));
    let closing: Promise<void> | undefined;
    // Once, whether the test closed it or not: its database after it.
    const close = async (): Promise<void> => {
      closing ??= again.close();
      await closing;
      await own.close();
    };
    return { own, startLog, again, failed, closeRouter: () => (closing ??= again.close()), close };
  };

  test('an instance that starts while a deployment cannot load: ready at once, everything else served meanwhile; close() ends that load rather than wait for it, and records no failure', async () => {
    // Its load would be given up only after ten minutes of CPU time: it is still loading throughout.
    const { own, startLog, again, failed, closeRouter, close } = await startBesideSpinning(600_000, { where: functionSource('where', 'async () => process.pid') });
    try {
      await again.ready;
      const restarted = express().use(again);
      expect((await request(restarted).get('/api/plugin/host-open/open')).status).toBe(200);
      expect((await request(restarted).post('/api/function/where')).status).toBe(200);
      expect(failed()).toBe(false);
      await closeRouter();
      const row = (await own.knex('bcms_deployments').where({ name: 'stuck' }).first('load_error')) as { load_error: string | null };
      expect(row.load_error).toBeNull();
      expect(startLog.lines.filter((line) => Number(line.level) >= 50).map((line) => line.msg)).toEqual([]);
    } finally {
      await close();
    }
  });

  test('a deployment that does not load within loadTimeoutMs on an instance that starts: a call for it waits for its load, then finds nothing; the failure is logged and kept', async () => {
    // The only deployment there: no other load is held to the short limit.
    const { own, again, failed, close } = await startBesideSpinning(3000);
    try {
      await again.ready;
      const restarted = express().use(again);
      expect((await request(restarted).get('/api/plugin/host-open/open')).status).toBe(200);
      // Given up after 3 s of CPU time (up to 18 s on a busy machine).
      const stuck = await request(restarted).post('/api/function/stuck');
      expect(errorCode(stuck)).toBe('FUNCTION_NOT_FOUND');
      expect(failed()).toBe(true);
      const row = (await own.knex('bcms_deployments').where({ name: 'stuck' }).first('load_error')) as { load_error: string };
      expect(row.load_error).toMatch(/did not finish loading within 3000 ms/);
    } finally {
      await close();
    }
  });

  test("deployments: 'off' (or BCMS_DEPLOYMENTS=off) starts a service that runs no deployment", async () => {
    for (const how of ['option', 'environment'] as const) {
      if (how === 'environment') process.env.BCMS_DEPLOYMENTS = 'off';
      const offLog = memoryLogger();
      const off = bcmsExtensions({ plugins: [open] }, { database: db.knex, logger: offLog.logger, ...(how === 'option' ? { deployments: 'off' as const } : {}) });
      delete process.env.BCMS_DEPLOYMENTS;
      try {
        await off.ready;
        const recovery = express().use(off);
        expect(errorCode(await request(recovery).post('/api/function/where'))).toBe('FUNCTION_NOT_FOUND');
        expect((await request(recovery).get('/api/plugin/inside/inside/teapot')).status).toBe(404);
        expect((await request(recovery).get('/api/plugin/host-open/open')).status).toBe(200);
        expect(offLog.text()).toContain('deployments are off');
        // The deploy routes still answer: an operator can undeploy what broke the others.
        expect((await signed(recovery, 'GET', '/api/extensions/deployments', deployer)).status).toBe(200);
      } finally {
        await off.close();
      }
    }
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, type BcmsExtensionsRouter } from '../../lib';
import { signRequest } from '../../lib/client';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, serverSchema, type TestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';
import { bundle, signed, type DeployKey } from '../support/deploy';
import { ROOMY, until } from '../support/wait';

/** A function bundle as `bcms-ext bundle` writes one: CommonJS, bcms-extensions left external. */
const functionCode = (name: string, answer: string) => `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({
  config: { name: ${JSON.stringify(name)}, public: true },
  handler: async ({ request }) => ({ answer: ${JSON.stringify(answer)}, body: request.body ?? null }),
}));`;

const pluginCode = (message: string) => `"use strict";
const { createBcmsPlugin, createController, createControllerMethod } = require('bcms-extensions');
module.exports = createBcmsPlugin({
  name: 'whatever-the-code-says',
  controllers: [createController({ name: 'Hello', path: '/hello', methods: () => ({
    world: createControllerMethod({ path: '/world', type: 'get', handler: async () => ({ message: ${JSON.stringify(message)} }) }),
  }) })],
});`;

const own = createBcmsFunction(async () => ({ config: { name: 'own-function', public: true }, handler: async () => 'own' }));
const ownPlugin = createBcmsPlugin({ name: 'own-plugin', controllers: [] });

describe.each(backends())('deploying to a running service (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let filesDir: string;
  // Deploys checked within 3 s of load (loadTimeoutMs), for the tests of that limit alone: it runs
  // no deployment (deployments: 'off'), so nothing else it does is held to it.
  let strict: BcmsExtensionsRouter;
  let strictApp: express.Express;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-deploy-files-'));
    // Loads and calls have all the time a loaded machine may need: four deploys at once beside two busy cores once took past 2 s.
    router = bcmsExtensions({ functions: [own], plugins: [ownPlugin] }, { database: db.knex, logger: memoryLogger().logger, files: { dir: filesDir }, ...ROOMY });
    app = express().use(router);
    await router.ready;
    strict = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, deployments: 'off', loadTimeoutMs: 3000 });
    strictApp = express().use(strict);
    await strict.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await Promise.all([router.close(), strict.close()]);
    await db.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
  });

  test('a function goes live without a restart, and a new version replaces it', async () => {
    expect((await request(app).post('/api/function/greet')).status).toBe(404);
    const res = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'greet', functionCode('greet', 'v1')));
    expect(res.status).toBe(201);
    expect(res.body.deployment).toMatchObject({ kind: 'function', name: 'greet', version: '1.0.0', active: true, deployedBy: `deployer (${deployer.keyId})` });
    expect((await request(app).post('/api/function/greet').send({ n: 1 })).body).toEqual({ success: true, result: { answer: 'v1', body: { n: 1 } } });
    await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'greet', functionCode('greet', 'v2'), { version: '2.0.0' }));
    expect((await request(app).post('/api/function/greet')).body.result.answer).toBe('v2');
  });

  test('a plugin goes live under its manifest name; renamed (same project), its endpoints move', async () => {
    const first = bundle('plugin', 'stats', pluginCode('hello'), { project: 'p-1' });
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, first)).status).toBe(201);
    expect((await request(app).get('/api/plugin/stats/hello/world')).body).toEqual({ message: 'hello' });
    const renamed = bundle('plugin', 'statistics', pluginCode('hello again'), { project: 'p-1' });
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, renamed)).status).toBe(201);
    expect((await request(app).get('/api/plugin/statistics/hello/world')).body).toEqual({ message: 'hello again' });
    expect((await request(app).get('/api/plugin/stats/hello/world')).status).toBe(404);
  });

  test("a deployed plugin's controller setup runs (awaited) before the version goes live", async () => {
    const code = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod } = require('bcms-extensions');
module.exports = createBcmsPlugin({
  name: 'setup-plugin',
  controllers: [createController({ name: 'Count', path: 'count',
    async setup() { await new Promise((resolve) => setTimeout(resolve, 50)); return { templates: 0, at: Date.now() }; },
    methods: ({ templates, at }) => ({ get: createControllerMethod({ type: 'get', handler: async () => ({ templates, at }) }) }) })],
});`;
    const deployed = bundle('plugin', 'counted', code);
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, deployed)).status).toBe(201);
    const first = await request(app).get('/api/plugin/counted/count');
    expect(first.status).toBe(200);
    expect(first.body.templates).toEqual(expect.any(Number));
    // Set up once for the version: every request sees the same setup result.
    expect((await request(app).get('/api/plugin/counted/count')).body).toEqual(first.body);
  });

  test("the same plugin and UI again answers unchanged and stores nothing, whatever order the UI's files come in", async () => {
    // jsonb gives an object's keys back shortest first: the stored UI never serialises as it was sent.
    const ui = {
      'index.html': Buffer.from('<div id="app"></div>').toString('base64'),
      'assets/index-1a2b.js': Buffer.from('console.log(1)').toString('base64'),
      'a.css': Buffer.from('a{}').toString('base64'),
    };
    const first = { ...bundle('plugin', 'same-ui', pluginCode('same')), ui };
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, first)).status).toBe(201);
    const again = await signed(app, 'POST', '/api/extensions/deployments', deployer, { ...bundle('plugin', 'same-ui', pluginCode('same')), ui });
    expect([again.status, again.body]).toEqual([200, { unchanged: true }]);
    const changed = await signed(app, 'POST', '/api/extensions/deployments', deployer, {
      ...bundle('plugin', 'same-ui', pluginCode('same')),
      ui: { ...ui, 'a.css': Buffer.from('a{color:red}').toString('base64') },
    });
    expect(changed.status).toBe(201);
    const rows = await db.knex('bcms_deployments').where({ kind: 'plugin', name: 'same-ui' }).count({ n: '*' });
    expect(Number((rows as { n: unknown }[])[0]?.n)).toBe(2);
    // The list tells the two apart: the code's sha256 is the same, the content's (code and UI) is not.
    const listed = (await signed(app, 'GET', '/api/extensions/deployments', deployer)).body.deployments as { name: string; sha256: string; contentSha256: string }[];
    const versions = listed.filter((each) => each.name === 'same-ui');
    expect(versions.map((each) => each.sha256)).toEqual([versions[0]?.sha256, versions[0]?.sha256]);
    expect(versions.map((each) => each.contentSha256)).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/), expect.stringMatching(/^[0-9a-f]{64}$/)]);
    expect(versions[0]?.contentSha256).not.toBe(versions[1]?.contentSha256);
  });

  test('a request in flight during a deploy finishes on the version it started with', async () => {
    // The old version's call says it began (a file in its own folder), then waits for the test to let it answer.
    const folder = path.join(filesDir, '.functions', 'slow');
    const old = `const fs = require('node:fs');
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'slow', public: true }, handler: async () => {
  fs.writeFileSync('began', '');
  while (!fs.existsSync('answer')) await new Promise((resolve) => setTimeout(resolve, 20));
  return 'old';
} }));`;
    const replacement = `const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'slow', public: true }, handler: async () => 'new' }));`;
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'slow', old))).status).toBe(201);
    const inFlight = request(app)
      .post('/api/function/slow')
      .then((res) => res.body.result);
    await until(() => fs.existsSync(path.join(folder, 'began')));
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'slow', replacement, { version: '2.0.0' }))).status).toBe(201);
    fs.writeFileSync(path.join(folder, 'answer'), '');
    expect(await inFlight).toBe('old');
    expect((await request(app).post('/api/function/slow')).body.result).toBe('new');
  });

  test('functions of one project live side by side: deploying one never takes another down', async () => {
    for (const name of ['side-a', 'side-b']) {
      expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', name, functionCode(name, name), { project: 'fns-1' }))).status).toBe(201);
    }
    expect((await request(app).post('/api/function/side-a')).body.result.answer).toBe('side-a');
    expect((await request(app).post('/api/function/side-b')).body.result.answer).toBe('side-b');
  });

  test('a broken bundle is refused with its load error, and the live version keeps answering', async () => {
    const broken = `"use strict"; require('bcms-extensions'); throw new Error('config file missing');`;
    const res = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'greet', broken, { version: '3.0.0' }));
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: 'The bundle did not load: config file missing' });
    expect((await request(app).post('/api/function/greet')).body.result.answer).toBe('v2');
  });

  test.each([
    ['not a function module', `module.exports = { hello: 1 };`, /^The bundle did not load: registry\.functions\[0\] is not a function module/],
    ['another name than its manifest', functionCode('other-name', 'x'), /^The bundle did not load: the bundle's function is named "other-name", its manifest "greet"/],
    ['process.exit at its top level', `process.exit(3)`, /^The bundle did not load: its isolate ended while loading: it exited with code 3$/],
  ])('refused: %s', async (_name, code, message) => {
    const res = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'greet', code, { version: '9.9.9' }));
    expect(res.status).toBe(422);
    expect(res.body.message).toMatch(message);
    expect((await request(app).post('/api/function/greet')).body.result.answer).toBe('v2');
  });

  // Loads that never end, checked by the router whose loads are held to 3 s: a slow machine refuses them later, never otherwise.
  test.each([
    ['a loop at its top level', `while (true) {}`, /^The bundle did not load: it did not finish loading within 3000 ms \(its top-level code, a factory or a setup runs too long\)$/],
    [
      'a factory that never settles',
      `const { createBcmsFunction } = require('bcms-extensions'); exports.default = createBcmsFunction(() => new Promise(() => {}));`,
      /^The bundle did not load: it did not finish loading within 3000 ms/,
    ],
  ])('refused: %s', async (_name, code, message) => {
    const res = await signed(strictApp, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'greet', code, { version: '9.9.9' }));
    expect(res.status).toBe(422);
    expect(res.body.message).toMatch(message);
    expect((await request(app).post('/api/function/greet')).body.result.answer).toBe('v2');
  });

  test('a manifest that does not match its code, a name the app has, no deploy permission, no signature: refused', async () => {
    const tampered = { ...bundle('function', 'greet', functionCode('greet', 'v1')), code: functionCode('greet', 'evil') };
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, tampered)).body).toEqual({
      message: 'manifest.sha256 is not the SHA-256 of the code: the bundle was changed or cut short.',
    });
    const taken = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'own-function', functionCode('own-function', 'x')));
    expect(taken.status).toBe(409);
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('plugin', 'own-plugin', pluginCode('x')))).status).toBe(409);
    const caller = await hmacKey(db.knex, ['greet']);
    const forbidden = await signed(app, 'POST', '/api/extensions/deployments', caller, bundle('function', 'greet', functionCode('greet', 'v9')));
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toEqual({ message: 'This API key may not deploy.' });
    const unsigned = await request(app)
      .post('/api/extensions/deployments')
      .send(bundle('function', 'greet', functionCode('greet', 'v9')));
    expect(unsigned.status).toBe(401);
    expect(unsigned.headers['www-authenticate']).toMatch(/^Signature /);
    expect((await request(app).post('/api/function/greet')).body.result.answer).toBe('v2');
  });

  test('an upload in a charset other than UTF-8 is taken only with content-type signed', async () => {
    const path = '/api/extensions/deployments';
    const body = Buffer.from(JSON.stringify(bundle('function', 'in-utf16', functionCode('in-utf16', 'Zoë'))), 'utf16le');
    const contentType = 'application/json; charset=utf-16le';
    const unsigned = await request(app)
      .post(path)
      .set(signRequest({ ...deployer, method: 'POST', url: path, body }))
      .set('Content-Type', contentType)
      .serialize((bytes) => bytes)
      .send(body);
    expect([unsigned.status, unsigned.body]).toEqual([
      401,
      { message: expect.stringMatching(/^The body's Content-Type declares charset "utf-16le", which the signature does not cover: sign content-type too/) },
    ]);
    const deployed = await request(app)
      .post(path)
      .set(signRequest({ ...deployer, method: 'POST', url: path, body, contentType }))
      .serialize((bytes) => bytes)
      .send(body);
    expect(deployed.status).toBe(201);
    expect((await request(app).post('/api/function/in-utf16')).body.result.answer).toBe('Zoë');
  });

  test('list shows every version without code; rollback makes the one before active again', async () => {
    const list = await signed(app, 'GET', '/api/extensions/deployments', deployer);
    expect(list.status).toBe(200);
    const greets = (list.body.deployments as { name: string; version: string; active: boolean }[]).filter((d) => d.name === 'greet');
    expect(greets.map((d) => [d.version, d.active])).toEqual([
      ['1.0.0', false],
      ['2.0.0', true],
    ]);
    expect(list.text).not.toContain('createBcmsFunction');
    const back = await signed(app, 'POST', '/api/extensions/deployments/function/greet/rollback', deployer);
    expect(back.body.deployment).toMatchObject({ name: 'greet', version: '1.0.0', active: true });
    expect((await request(app).post('/api/function/greet')).body.result.answer).toBe('v1');
    const none = await signed(app, 'POST', '/api/extensions/deployments/function/greet/rollback', deployer);
    expect(none.status).toBe(404);
  });

  test('rollback after a rename goes back across it; a malformed name is a 404', async () => {
    // statistics (renamed from stats, same project) is live; rolling it back brings stats back and takes statistics down.
    const back = await signed(app, 'POST', '/api/extensions/deployments/plugin/statistics/rollback', deployer);
    expect(back.body.deployment).toMatchObject({ name: 'stats', active: true });
    expect((await request(app).get('/api/plugin/stats/hello/world')).body).toEqual({ message: 'hello' });
    expect((await request(app).get('/api/plugin/statistics/hello/world')).status).toBe(404);
    const again = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('plugin', 'statistics', pluginCode('hello again'), { project: 'p-1', version: '1.0.1' }));
    expect(again.status).toBe(201);
    expect((await signed(app, 'POST', '/api/extensions/deployments/plugin/%E0%A4%A/rollback', deployer)).status).toBe(404);
  });

  test('deploys at the same moment, on two routers: each answered, one version active', async () => {
    const other = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, ...ROOMY });
    try {
      await other.ready;
      const apps = [app, express().use(other)];
      const results = await Promise.all(
        [1, 2, 3, 4].map((n) =>
          signed(apps[n % 2] as express.Express, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'race', functionCode('race', `r${n}`), { version: `${n}.0.0` })),
        ),
      );
      expect(results.map((res) => res.status)).toEqual([201, 201, 201, 201]);
      const active = await db.knex('bcms_deployments').where({ name: 'race', active: true }).select('version');
      expect(active).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  test('isolate: none: a bundle that loads in its isolate but not in the service is taken back, and the old version stays', async () => {
    // The isolate's environment is empty; the service's has PATH.
    const sly = (answer: string) => `const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(() => (process.env.PATH !== undefined && ${JSON.stringify(answer)} === 'sly' ? new Promise(() => {}) : Promise.resolve({ config: { name: 'sly', public: true }, handler: async () => ${JSON.stringify(answer)} })));`;
    // The version that works goes live through the roomy router; the in-process one, whose loads are
    // held to 5 s, loads what is live at its start (in its own thread, at once) before the version that never loads there.
    expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'sly', sly('fine')))).status).toBe(201);
    const inProcess = bcmsExtensions({}, { database: db.knex, isolate: 'none', logger: memoryLogger().logger, loadTimeoutMs: 5000 });
    try {
      await inProcess.ready;
      const local = express().use(inProcess);
      expect((await request(local).post('/api/function/sly')).body.result).toBe('fine');
      const res = await signed(local, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'sly', sly('sly'), { version: '6.6.6' }));
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ message: 'The bundle did not load in the service: it did not finish loading within 5000 ms' });
      expect((await request(local).post('/api/function/sly')).body.result).toBe('fine');
      expect(await db.knex('bcms_deployments').where({ name: 'sly', version: '6.6.6' })).toEqual([]);
    } finally {
      await inProcess.close();
    }
  });

  test('a restarted instance serves what is active', async () => {
    const again = bcmsExtensions({ functions: [own], plugins: [ownPlugin] }, { database: db.knex, logger: memoryLogger().logger, ...ROOMY });
    try {
      await again.ready;
      const restarted = express().use(again);
      expect((await request(restarted).post('/api/function/greet')).body.result.answer).toBe('v1');
      expect((await request(restarted).get('/api/plugin/statistics/hello/world')).body).toEqual({ message: 'hello again' });
      expect((await request(restarted).get('/api/plugin/stats/hello/world')).status).toBe(404);
    } finally {
      await again.close();
    }
  });
});

(process.env.DATABASE_URL ? describe : describe.skip)('two instances on one Postgres server', () => {
  test('a deploy on one goes live on the other, without a restart (the times are printed, not asserted: a loaded machine is slow)', async () => {
    const { url, drop } = await serverSchema('bcms_deploy_two');
    const first = bcmsExtensions({}, { database: url, logger: memoryLogger().logger, ...ROOMY });
    const second = bcmsExtensions({}, { database: url, logger: memoryLogger().logger, ...ROOMY });
    try {
      await Promise.all([first.ready, second.ready]);
      const [a, b] = [express().use(first), express().use(second)];
      const deployer = await hmacKey(first.db, [], { deploy: true });
      const times: number[] = [];
      // Each round waits until the other instance serves the new version, however long that takes: one
      // not yet listening when the first deploy's NOTIFY went out loads what is active once it listens.
      for (let round = 1; round <= 3; round++) {
        const started = performance.now();
        const res = await signed(a, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'spread', functionCode('spread', `v${round}`), { version: `${round}.0.0` }));
        expect(res.status).toBe(201);
        await until(async () => (await request(b).post('/api/function/spread')).body.result?.answer === `v${round}`, 5);
        times.push(performance.now() - started);
      }
      process.stderr.write(`\nDeploy propagation to a second instance (ms, deploy request included): ${times.map((t) => t.toFixed(0)).join(', ')}\n`);
    } finally {
      await first.close();
      await second.close();
      await drop();
    }
    // Each round loads the version twice, in an isolate on each instance: seconds apiece on a loaded machine.
  }, 120_000);
});

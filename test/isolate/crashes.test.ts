import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { treeUsage } from '../../lib/isolate/cpu';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy, functionSource, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY, until } from '../support/wait';

// Crashes, loads and instances: a bundle that exits right after loading is restarted with
// backoff, not 19 times in 15 s; the deployments list says it is failing and why; an instance
// that cannot load at once what another loaded tries again rather than serve another version.

interface Listed {
  name: string;
  version: string;
  active: boolean;
  state?: string;
  lastError?: string;
  loadError?: string | null;
}

const listed = async (app: express.Express, key: DeployKey, name: string): Promise<Listed | undefined> =>
  ((await signed(app, 'GET', '/api/extensions/deployments', key)).body.deployments as Listed[]).find((each) => each.name === name && each.active);

describe.each(backends())('crashes and loads (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let log: ReturnType<typeof memoryLogger>;
  let filesDir: string;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-crashes-a-'));
    // Loads and calls have all the time a loaded machine may need: what is checked here is what ends, and when it restarts.
    router = bcmsExtensions({}, { database: db.knex, logger: log.logger, files: { dir: filesDir }, ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await router.close();
    await db.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
  });

  test('a bundle that exits soon after loading is restarted with backoff, and listed as failing with why; callers meanwhile get 500 EXTENSION_CRASHED', async () => {
    // Loads (the deploy check passes), then exits on its own a moment later, every time.
    await deploy(app, deployer, 'function', 'flaky', functionSource('flaky', 'async () => "served"', 'setTimeout(() => process.exit(3), 150);'));
    const ended = (): number => log.lines.filter((line) => typeof line.msg === 'string' && line.msg.includes('an isolate of function flaky@1.0.0 ended')).length;
    // Watched for 4 s from its first end: restarts after 1 s, then 2 s, then 4 s, so at most 3 ends (without
    // backoff: one every ~0.2 s). A slow machine only spaces them further.
    await until(() => ended() >= 1);
    await new Promise((resolve) => setTimeout(resolve, 4000));
    expect(ended()).toBeLessThanOrEqual(3);
    const entry = await listed(app, deployer, 'flaky');
    expect(entry).toMatchObject({ state: 'failing', lastError: expect.stringMatching(/exited with code 3/) });

    // While it backs off, a call is answered at once rather than starting an isolate of its own (one may
    // meet the moment an isolate is up: asked again until one meets a backoff, which grows).
    let res = await request(app).post('/api/function/flaky');
    await until(async () => {
      res = await request(app).post('/api/function/flaky');
      return /keeps failing/.test(res.body.error?.message);
    }, 100);
    expect([res.status, res.body.error?.code]).toEqual([500, 'EXTENSION_CRASHED']);
    expect(res.body.error.message).toMatch(/keeps failing \(it exited with code 3\); it is started again in \d+ s/);

    // bcms-ext list's source, the same list: a redeploy that works is running again.
    await deploy(app, deployer, 'function', 'flaky', functionSource('flaky', 'async () => "fixed"'), { version: '2.0.0' });
    expect((await request(app).post('/api/function/flaky')).body.result).toBe('fixed');
    expect(await listed(app, deployer, 'flaky')).toMatchObject({ version: '2.0.0', state: 'running' });
  }, 90_000);

  test('a handler that crashes on one request is restarted at once: working code is not a crash loop', async () => {
    await deploy(app, deployer, 'function', 'fragile', functionSource('fragile', 'async ({ request }) => { if (request.body.crash) process.exit(1); return "ok"; }'));
    expect((await request(app).post('/api/function/fragile').send({})).body.result).toBe('ok');
    for (let round = 0; round < 3; round++) {
      expect((await request(app).post('/api/function/fragile').send({ crash: true })).body.error?.code).toBe('EXTENSION_CRASHED');
      expect((await request(app).post('/api/function/fragile').send({})).body.result).toBe('ok');
    }
    expect((await listed(app, deployer, 'fragile'))?.state).toBe('running');
  });

  test('a second instance whose first load of a new version crashes tries again, and serves the version the first one serves', async () => {
    const otherFiles = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-crashes-b-'));
    const otherLog = memoryLogger();
    const other = bcmsExtensions({}, { database: db.knex, logger: otherLog.logger, files: { dir: otherFiles }, ...ROOMY });
    const otherApp = express().use(other);
    try {
      await other.ready;
      // On the second instance only, the version's first load dies: a marker in its own folder, which the load removes.
      const folder = path.join(otherFiles, '.functions', 'steady');
      fs.mkdirSync(folder, { recursive: true });
      fs.writeFileSync(path.join(folder, 'die-once'), '');
      const top = `const fs = require('node:fs'); if (fs.existsSync('die-once')) { fs.rmSync('die-once'); process.exit(9); }`;
      await deploy(app, deployer, 'function', 'steady', functionSource('steady', 'async () => "v1"', top));
      // Until it serves v1, however long the load it tries again takes.
      await until(async () => (await request(otherApp).post('/api/function/steady')).body.result === 'v1', 200);
      expect(fs.existsSync(path.join(folder, 'die-once'))).toBe(false);
      expect(otherLog.lines.some((line) => line.msg === 'bcms-extensions: a deployment did not load on this instance; trying again')).toBe(true);
      // Not marked failed: the version loads everywhere.
      const entry = await listed(otherApp, deployer, 'steady');
      expect(entry).toMatchObject({ state: 'running', loadError: null });
    } finally {
      await other.close();
      fs.rmSync(otherFiles, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('what a load uses of the machine', () => {
  test('a process that spins is runnable and gathers CPU time; one that waits is neither', async () => {
    const spinner = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
    // It says when it is waiting (its start, which takes CPU time, is over).
    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000); process.stdout.write("waiting")'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      await new Promise((resolve) => sleeper.stdout.once('data', resolve));
      // A second of CPU time, however long a busy machine takes to give it: far more than a start takes.
      await until(() => (treeUsage(spinner.pid)?.cpuMs ?? 0) >= 1000, 50);
      const spinning = treeUsage(spinner.pid);
      const waiting = treeUsage(sleeper.pid);
      expect(spinning?.runnable).toBe(true);
      expect(waiting?.runnable).toBe(false);
      expect(waiting?.cpuMs ?? Infinity).toBeLessThan(spinning?.cpuMs ?? 0);
      expect(treeUsage(2 ** 22 + 7)).toBeUndefined();
    } finally {
      spinner.kill('SIGKILL');
      sleeper.kill('SIGKILL');
    }
  });
});

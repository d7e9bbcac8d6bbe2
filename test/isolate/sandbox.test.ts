import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { probeBubblewrap } from '../../lib/isolate/sandbox';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { bundle, deploy, functionSource, isRunning, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY, until } from '../support/wait';

// Deployed code runs in bubblewrap: written as an author who wants out would try it. The audit
// this answers read the service's environment and memory through /proc, killed every instance
// with one line, and left processes running after an undeploy. CI installs bubblewrap, and there
// these tests must run: they fail, rather than skip, when it is missing.

const sandboxed = 'bwrap' in probeBubblewrap();
if (!sandboxed && process.env.CI) throw new Error(`CI runs the sandbox tests, and bubblewrap does not run here: ${(probeBubblewrap() as { unavailable: string }).unavailable}`);
const describeSandboxed = sandboxed ? describe : describe.skip;

/** Host pids of processes whose command line holds `marker` (a process's title, or an argument). */
function hostPidsOf(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').includes(marker)) pids.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

const call = async (app: express.Express, name: string, body: unknown = {}): Promise<request.Response> =>
  request(app)
    .post(`/api/function/${name}`)
    .send(body as object);

describeSandboxed.each(backends())('isolates in bubblewrap (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let filesDir: string;
  let shared: string;
  let log: ReturnType<typeof memoryLogger>;
  const secret = `host-secret-${process.pid}-${Math.random().toString(36).slice(2)}`;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-sandbox-files-'));
    shared = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-sandbox-shared-'));
    fs.writeFileSync(path.join(shared, 'readme.txt'), 'shared with reader');
    // A secret in the service's environment, which no extension may find.
    process.env.BCMS_TEST_HOST_SECRET = secret;
    // Calls and loads have all the time a loaded machine may need; the test of a call's time-out has a router of its own.
    router = bcmsExtensions(
      {},
      {
        database: db.knex,
        logger: log.logger,
        sandbox: 'bubblewrap',
        files: { dir: filesDir },
        ...ROOMY,
        extensionEnv: { GREETING: 'hello' },
        extensionPermissions: {
          byName: {
            offline: { network: false },
            nospawn: { childProcess: false },
            reader: { read: [shared] },
            writer: { write: [shared] },
          },
        },
      },
    );
    app = express();
    app.use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    delete process.env.BCMS_TEST_HOST_SECRET;
    await router.close();
    await db.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
    fs.rmSync(shared, { recursive: true, force: true });
  });

  test("the service's environment and memory are out of reach: no /proc entry of it, no process holding its secret", async () => {
    await deploy(
      app,
      deployer,
      'function',
      'snoop',
      functionSource(
        'snoop',
        `async ({ request }) => {
          const fs = require('node:fs');
          const tried = {};
          for (const file of ['/proc/' + request.body.host + '/environ', '/proc/' + request.body.host + '/mem', '/proc/' + process.ppid + '/environ']) {
            try { tried[file] = fs.readFileSync(file, 'latin1').includes(request.body.secret) ? 'SECRET' : 'read'; } catch (error) { tried[file] = error.code; }
          }
          let holding = 0;
          const pids = fs.readdirSync('/proc').filter((entry) => /^\\d+$/.test(entry));
          for (const pid of pids) {
            try { if (fs.readFileSync('/proc/' + pid + '/environ', 'latin1').includes(request.body.secret)) holding++; } catch {}
          }
          return { tried, holding, pids: pids.length, env: { ...process.env }, uid: process.getuid(), gid: process.getgid() };
        }`,
      ),
    );
    const res = await call(app, 'snoop', { host: process.pid, secret });
    expect(res.status).toBe(200);
    const { tried, holding, pids, env, uid, gid } = res.body.result;
    expect(tried[`/proc/${process.pid}/environ`]).toBe('ENOENT');
    expect(tried[`/proc/${process.pid}/mem`]).toBe('ENOENT');
    expect(Object.values(tried)).not.toContain('SECRET');
    expect(holding).toBe(0);
    // Its own namespace: bubblewrap's init and itself.
    expect(pids).toBeLessThanOrEqual(3);
    expect(env).toEqual({ GREETING: 'hello' });
    // nobody, not the service's identity.
    expect([uid, gid]).toEqual([65534, 65534]);
    expect(uid).not.toBe(process.getuid?.());
  });

  test('kill(ppid) and kill(-1), at once and from a timer at load, reach neither the service nor other isolates', async () => {
    await deploy(app, deployer, 'function', 'bystander', functionSource('bystander', `async () => { process.title = 'bcms-bystander-${process.pid}'; return 'here'; }`));
    expect((await call(app, 'bystander')).body.result).toBe('here');
    const bystander = hostPidsOf(`bcms-bystander-${process.pid}`)[0] as number;
    expect(bystander).toBeGreaterThan(0);
    const killer = functionSource(
      'killer',
      `async ({ request }) => {
        const outcome = {};
        for (const target of [process.ppid, -1, request.body.host, bystanderPid(request.body.bystander)]) {
          try { process.kill(target, 'SIGKILL'); outcome[target] = 'sent'; } catch (error) { outcome[target] = error.code; }
        }
        return outcome;
      }`,
      `function bystanderPid(pid) { return pid; }
       setTimeout(() => { for (const target of [process.ppid, -1]) { try { process.kill(target, 'SIGKILL'); } catch {} } require('node:fs').writeFileSync('tried', ''); }, 300);`,
    );
    await deploy(app, deployer, 'function', 'killer', killer);
    const res = await call(app, 'killer', { host: process.pid, bystander });
    expect(res.status).toBe(200);
    // The service's pid and the bystander's host pid name nothing in its namespace.
    expect(res.body.result[String(process.pid)]).toBe('ESRCH');
    expect(res.body.result[String(bystander)]).toBe('ESRCH');
    // Its timer has tried too (it says so in its own folder), whenever a busy machine ran it.
    await until(() => fs.existsSync(path.join(filesDir, '.functions', 'killer', 'tried')));
    expect(isRunning(bystander)).toBe(true);
    expect((await call(app, 'bystander')).body.result).toBe('here');
    // This process (the service) still answers: the test itself is running in it.
    expect((await signed(app, 'GET', '/api/extensions/deployments', deployer)).status).toBe(200);
  });

  test("files: the service's working directory and /tmp are not there; the bundle and Node are read-only; its own folder is writable", async () => {
    const hostTmp = path.join(os.tmpdir(), `bcms-host-only-${process.pid}`);
    fs.writeFileSync(hostTmp, 'the service');
    await deploy(
      app,
      deployer,
      'function',
      'files',
      functionSource(
        'files',
        `async ({ request }) => {
          const fs = require('node:fs');
          const path = require('node:path');
          const attempt = (fn) => { try { fn(); return 'ok'; } catch (error) { return error.code; } };
          return {
            cwd: process.cwd(),
            hostSource: fs.existsSync(path.join(request.body.hostCwd, 'test')) || fs.existsSync(path.join(request.body.hostCwd, 'lib')),
            hostTmp: fs.existsSync(request.body.hostTmp),
            writeSystem: attempt(() => fs.writeFileSync(path.join(path.dirname(process.execPath), 'planted'), '')),
            writePackage: attempt(() => fs.writeFileSync(path.join(request.body.hostDist, 'planted.js'), '')),
            writeTmp: attempt(() => fs.writeFileSync('/tmp/isolate-note', 'x')),
            writeOwn: attempt(() => fs.writeFileSync('note.txt', 'kept')),
            writeRoot: attempt(() => fs.writeFileSync('/planted', 'x')),
          };
        }`,
      ),
    );
    const res = await call(app, 'files', { hostCwd: process.cwd(), hostTmp, hostDist: path.resolve(__dirname, '..', '..', 'dist') });
    fs.rmSync(hostTmp, { force: true });
    expect(res.status).toBe(200);
    const own = path.join(filesDir, '.functions', 'files');
    expect(res.body.result).toEqual({
      cwd: own,
      hostSource: false,
      hostTmp: false,
      writeSystem: 'EROFS',
      writePackage: 'EROFS',
      writeTmp: 'ok',
      writeOwn: 'ok',
      writeRoot: 'EROFS',
    });
    // Its /tmp was its own; its folder is the service's files.dir/<name>.
    expect(fs.existsSync('/tmp/isolate-note')).toBe(false);
    expect(fs.readFileSync(path.join(own, 'note.txt'), 'utf8')).toBe('kept');
  });

  test("a program it marks setuid in its folder loses the mark when its isolate ends; its folder is its owner's alone", async () => {
    await deploy(
      app,
      deployer,
      'function',
      'setuid',
      functionSource(
        'setuid',
        `async () => { const fs = require('node:fs'); fs.copyFileSync('/bin/true', 'planted'); fs.chmodSync('planted', 0o4755); fs.mkdirSync('sub', { recursive: true }); fs.copyFileSync('/bin/true', 'sub/planted'); fs.chmodSync('sub/planted', 0o2755); return (fs.statSync('planted').mode & 0o7777).toString(8); }`,
      ),
    );
    // Inside, the mark is made (and means nothing there: its mounts are nosuid).
    expect((await call(app, 'setuid')).body.result).toBe('4755');
    const own = path.join(filesDir, '.functions', 'setuid');
    expect((fs.statSync(own).mode & 0o777).toString(8)).toBe('700');
    expect((await signed(app, 'DELETE', '/api/extensions/deployments/function/setuid', deployer)).status).toBe(200);
    const marks = (): string[] => [path.join(own, 'planted'), path.join(own, 'sub', 'planted')].map((file) => (fs.statSync(file).mode & 0o7777).toString(8));
    await until(() => marks().every((mode) => mode === '755'));
  });

  test('undeploy ends the isolate and everything it started, detached grandchildren included', async () => {
    const marker = String(40_000 + (process.pid % 10_000));
    const code = functionSource(
      'spawner',
      `async () => 'started'`,
      `const { spawn } = require('node:child_process');
       spawn('/bin/sh', ['-c', 'sleep ${marker}0 & sleep ${marker}1'], { detached: true, stdio: 'ignore' }).unref();`,
    );
    await deploy(app, deployer, 'function', 'spawner', code);
    expect((await call(app, 'spawner')).body.result).toBe('started');
    await until(() => hostPidsOf(`sleep ${marker}0`).length > 0 && hostPidsOf(`sleep ${marker}1`).length > 0);
    expect((await signed(app, 'DELETE', '/api/extensions/deployments/function/spawner', deployer)).status).toBe(200);
    await until(() => hostPidsOf(`sleep ${marker}0`).length === 0 && hostPidsOf(`sleep ${marker}1`).length === 0);
  });

  test('a call past its time-out ends its isolate with what it started; the next call gets a new one', async () => {
    const marker = String(50_000 + (process.pid % 10_000));
    // A router of its own whose calls are held to 2 s; the call it ends never ends by itself.
    const tight = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, sandbox: 'bubblewrap', files: { dir: filesDir }, functionTimeoutMs: 2000, loadTimeoutMs: 600_000 });
    try {
      const tightApp = express().use(tight);
      await tight.ready;
      await deploy(
        tightApp,
        deployer,
        'function',
        'hang',
        functionSource(
          'hang',
          `async ({ request }) => { if (request.body.hang) { require('node:child_process').spawn('/bin/sleep', ['${marker}'], { detached: true, stdio: 'ignore' }).unref(); for (;;); } return 'fresh'; }`,
        ),
      );
      const late = await call(tightApp, 'hang', { hang: true });
      expect([late.status, late.body.error?.code]).toEqual([504, 'FUNCTION_TIMEOUT']);
      await until(() => hostPidsOf(`sleep ${marker}`).length === 0);
      expect((await call(tightApp, 'hang')).body.result).toBe('fresh');
    } finally {
      await tight.close();
    }
  });

  test('extensionPermissions: network: false leaves a loopback of its own; childProcess: false refuses child_process; read and write add paths', async () => {
    const server = net.createServer((socket) => socket.end('hello from the host network'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const connect = `async () => new Promise((resolve) => {
      const socket = require('node:net').connect(${port}, '127.0.0.1');
      let text = '';
      socket.on('data', (chunk) => (text += chunk));
      socket.on('end', () => resolve(text));
      socket.on('error', (error) => resolve(error.code));
    })`;
    try {
      await deploy(app, deployer, 'function', 'online', functionSource('online', connect));
      await deploy(app, deployer, 'function', 'offline', functionSource('offline', connect));
      expect((await call(app, 'online')).body.result).toBe('hello from the host network');
      expect((await call(app, 'offline')).body.result).toBe('ECONNREFUSED');
    } finally {
      server.close();
    }

    const spawnIt = `async () => { try { return require('node:child_process').execFileSync('/bin/echo', ['spawned']).toString().trim(); } catch (error) { return error.code; } }`;
    await deploy(app, deployer, 'function', 'spawns', functionSource('spawns', spawnIt));
    await deploy(app, deployer, 'function', 'nospawn', functionSource('nospawn', spawnIt));
    expect((await call(app, 'spawns')).body.result).toBe('spawned');
    expect((await call(app, 'nospawn')).body.result).toBe('ERR_ACCESS_DENIED');

    const touch = (name: string): string =>
      functionSource(
        name,
        `async () => { const fs = require('node:fs'); const file = ${JSON.stringify(path.join(shared, 'readme.txt'))}; let read, write; try { read = fs.readFileSync(file, 'utf8'); } catch (error) { read = error.code; } try { fs.appendFileSync(file, '+'); write = 'ok'; } catch (error) { write = error.code; } return { read, write }; }`,
      );
    for (const name of ['reader', 'writer', 'stranger']) await deploy(app, deployer, 'function', name, touch(name));
    expect((await call(app, 'stranger')).body.result).toEqual({ read: 'ENOENT', write: 'ENOENT' });
    expect((await call(app, 'reader')).body.result).toEqual({ read: 'shared with reader', write: 'EROFS' });
    expect((await call(app, 'writer')).body.result).toEqual({ read: 'shared with reader', write: 'ok' });
    expect(fs.readFileSync(path.join(shared, 'readme.txt'), 'utf8')).toBe('shared with reader+');
  });

  test('the deployments list says what isolates run in', async () => {
    const res = await signed(app, 'GET', '/api/extensions/deployments', deployer);
    expect(res.body.sandbox).toEqual({ kind: 'bubblewrap' });
  });
});

describe('where no sandbox runs', () => {
  let db: TestDatabase;
  const savedPath = process.env.PATH;
  beforeAll(async () => {
    db = await openTestDatabase('pglite');
  });
  afterAll(async () => {
    process.env.PATH = savedPath;
    await db.close();
  });

  test("sandbox: 'bubblewrap' refuses to start; 'auto' warns, and in production refuses deployments with 503 SANDBOX_UNAVAILABLE; 'none' runs them on purpose", async () => {
    // No bwrap on this PATH: as on macOS, or a machine without the package.
    process.env.PATH = path.join(os.tmpdir(), 'bcms-no-such-dir');
    try {
      expect(() => bcmsExtensions({}, { database: db.knex, sandbox: 'bubblewrap' })).toThrow(/option sandbox: 'bubblewrap' is required, but bubblewrap \(bwrap\) is not installed/);

      const production = process.env.NODE_ENV;
      process.env.NODE_ENV = 'production';
      const log = memoryLogger();
      let router: BcmsExtensionsRouter;
      try {
        router = bcmsExtensions({}, { database: db.knex, logger: log.logger, ...ROOMY });
      } finally {
        process.env.NODE_ENV = production;
      }
      const app = express().use(router);
      await router.ready;
      const deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
      const refused = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'unsandboxed', functionSource('unsandboxed', 'async () => 1')));
      expect([refused.status, refused.body.message]).toEqual([503, expect.stringMatching(/^No sandbox runs here \(bubblewrap\)/)]);
      expect(log.text()).toMatch(/no sandbox runs here/);
      expect((await signed(app, 'GET', '/api/extensions/deployments', deployer)).body.sandbox).toEqual({ kind: 'none', unavailable: expect.stringMatching(/not installed/) });
      await router.close();

      const quiet = memoryLogger();
      process.env.NODE_ENV = 'production';
      let chosen: BcmsExtensionsRouter;
      try {
        chosen = bcmsExtensions({}, { database: db.knex, logger: quiet.logger, sandbox: 'none', ...ROOMY });
      } finally {
        process.env.NODE_ENV = production;
      }
      const chosenApp = express().use(chosen);
      await chosen.ready;
      await deploy(chosenApp, deployer, 'function', 'unsandboxed', functionSource('unsandboxed', 'async () => 1'));
      expect((await call(chosenApp, 'unsandboxed')).body.result).toBe(1);
      expect(quiet.text()).not.toMatch(/without a sandbox/);
      await chosen.close();
    } finally {
      process.env.PATH = savedPath;
    }
  });
});

describe("the service's inherited descriptors", () => {
  test('a descriptor the service inherited without close-on-exec (a secret file its parent left open) is closed before extension code runs', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-fds-'));
    const secretFile = path.join(dir, '.env');
    fs.writeFileSync(secretFile, 'JWT_SECRET=inherited-secret\n');
    const dist = path.resolve(__dirname, '..', '..', 'dist');
    // A service whose fd 60 is that file, as a launcher's leaked descriptor would be (Node marks
    // close-on-exec only the run of descriptors from 3 up it starts with, not one past a gap): it
    // deploys a function that looks at fd 60 and prints what the function found.
    const service = `
      const crypto = require('node:crypto');
      const express = require(${JSON.stringify(require.resolve('express'))});
      const { bcmsExtensions, createApiKey } = require(${JSON.stringify(dist)});
      const { signRequest } = require(${JSON.stringify(path.join(dist, 'client'))});
      const logger = { info() {}, warn() {}, error() {}, debug() {} };
      const router = bcmsExtensions({}, { database: { pglite: 'memory://' }, logger, files: { dir: ${JSON.stringify(path.join(dir, 'files'))} }, ...${JSON.stringify(ROOMY)} });
      const app = express().use(router);
      const alive = setInterval(() => {}, 1000);
      router.ready.then(async () => {
        const key = await createApiKey(router.db, { name: 'd', functions: [], deploy: true });
        const server = app.listen(0, async () => {
          const base = 'http://127.0.0.1:' + server.address().port;
          const code = "const { createBcmsFunction } = require('bcms-extensions'); exports.default = createBcmsFunction(async () => ({ config: { name: 'fd', public: true }, handler: async () => { try { return require('node:fs').fstatSync(60).ino; } catch (error) { return error.code; } } }));";
          const body = JSON.stringify({ manifest: { kind: 'function', name: 'fd', version: '1.0.0', sha256: crypto.createHash('sha256').update(code).digest('hex') }, code });
          const headers = signRequest({ keyId: key.id, secret: key.secret, method: 'POST', url: '/api/extensions/deployments', body });
          const deployed = await fetch(base + '/api/extensions/deployments', { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
          const called = await fetch(base + '/api/function/fd', { method: 'POST' });
          process.stdout.write(JSON.stringify({ deployed: deployed.status, result: (await called.json()).result }));
          server.close();
          clearInterval(alive);
          await router.close();
        });
      });`;
    const fd = fs.openSync(secretFile, 'r');
    try {
      const stdio: ('ignore' | 'pipe' | number)[] = ['ignore', 'pipe', 'pipe'];
      while (stdio.length < 60) stdio.push('ignore');
      stdio.push(fd);
      const child = spawn(process.execPath, ['-e', service], { cwd: dir, stdio });
      let out = '';
      let err = '';
      child.stdout?.on('data', (chunk: Buffer) => (out += chunk));
      child.stderr?.on('data', (chunk: Buffer) => (err += chunk));
      const code = await new Promise((resolve) => child.on('exit', resolve));
      expect([code, err.includes('Error') ? err : '']).toEqual([0, '']);
      // Closed: fd 60 is nothing now, or a descriptor of the isolate's own Node, never that file.
      const { deployed, result } = JSON.parse(out) as { deployed: number; result: number | string };
      expect(deployed).toBe(201);
      expect(result).not.toBe(fs.statSync(secretFile).ino);
      expect(result === 'EBADF' || typeof result === 'number').toBe(true);
    } finally {
      fs.closeSync(fd);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

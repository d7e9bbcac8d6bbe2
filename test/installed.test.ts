import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { freePort } from './support/app';
import { serverSchema } from './support/database';

// The package as a user installs it: packed, installed from the tarball into a new app (CommonJS,
// as most Express apps are), started in a process of its own. `npm test` builds dist/ first.
const installed = require('./support/installed-app') as {
  pack(dir: string): string;
  installApp(dir: string, tarball: string, extra?: string[]): void;
  startApp(dir: string, port: number, env?: Record<string, string>): Promise<{ seconds: number; answer: { status: number; body: string }; stderr(): string; stop(): Promise<unknown> }>;
  snapshot(dir: string): Record<string, string>;
  tested(...names: string[]): string[];
};

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-installed-'));
const app = path.join(work, 'app');
const packageDir = path.join(app, 'node_modules', 'bcms-extensions');
let tarball: string;

beforeAll(() => {
  tarball = installed.pack(work);
  installed.installApp(app, tarball);
}, 180_000);

afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

test('the tarball ships dist/ with the compressed PGlite template, and no sources or tests', () => {
  const listing = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
  expect(listing.filter((name) => /^package\/dist\/pglite-template\/pglite-[\d.]+-[0-9a-f]{12}\.tar\.brotli-parts$/.test(name))).toHaveLength(1);
  expect(listing.filter((name) => /^package\/(lib|test|bench)\//.test(name))).toEqual([]);
});

test('a stack trace of the installed package, under node --enable-source-maps too, names files it has (dist/*.js)', () => {
  // An error thrown by the package's own code: a registry that is not an object.
  const script = "try { require('bcms-extensions').bcmsExtensions(42); } catch (error) { console.log(error.stack); }";
  for (const flags of [[], ['--enable-source-maps']]) {
    const result = spawnSync(process.execPath, [...flags, '-e', script], { cwd: app, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    expect(result.stdout).toMatch(/^TypeError: argument registry must be an object/);
    const named = [...result.stdout.matchAll(/\((\/[^()]+?):\d+:\d+\)$/gm)].map((frame) => frame[1] as string).filter((file) => file.startsWith(packageDir));
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((file) => !file.startsWith(path.join(packageDir, 'dist', path.sep)) || !fs.existsSync(file))).toEqual([]);
  }
});

describe('without the embedded database installed (PGlite is an optional peer)', () => {
  test('no PGlite in node_modules; with no database given, the start fails with the command that installs it', async () => {
    expect(fs.existsSync(path.join(app, 'node_modules', '@electric-sql', 'pglite'))).toBe(false);
    expect(fs.existsSync(path.join(app, 'node_modules', 'knex-pglite'))).toBe(false);
    await expect(installed.startApp(app, await freePort())).rejects.toThrow(
      `the embedded database needs @electric-sql/pglite, which is not installed. Install it with \`npm install ${installed.tested('@electric-sql/pglite', 'knex-pglite').join(' ')}\`, or give a Postgres server (DATABASE_URL, or the database option)`,
    );
    expect(fs.existsSync(path.join(app, '.bcms'))).toBe(false);
  }, 60_000);

  test('the test kit, bcms-extensions/testing, says which dev dependencies its in-memory database needs', () => {
    const script = "require('bcms-extensions/testing').createTestService().then(() => process.exit(0), (error) => { console.log(error.message); process.exit(1); })";
    const result = spawnSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    expect([result.status, result.stdout.trim()]).toEqual([
      1,
      `createTestService: the in-memory database needs @electric-sql/pglite, which is not installed. Install it with \`npm install --save-dev ${installed.tested('@electric-sql/pglite', 'knex-pglite').join(' ')}\`, or give the test service a database (options.database: a Postgres URL or a Knex instance)`,
    ]);
  }, 60_000);

  // CI gives DATABASE_URL; a machine without a Postgres server has nothing to run this against.
  const withServer = process.env.DATABASE_URL ? test : test.skip;
  withServer(
    'given a Postgres server, it runs without PGlite',
    async () => {
      const { url, drop } = await serverSchema('bcms_installed');
      try {
        const started = await installed.startApp(app, await freePort(), { DATABASE_URL: url });
        expect(started.answer).toEqual({ status: 200, body: '{"success":true,"result":0}' });
        expect(await started.stop()).toBe(0);
        expect(fs.existsSync(path.join(app, '.bcms'))).toBe(false);
      } finally {
        await drop();
      }
    },
    60_000,
  );
});

describe('with the embedded database installed', () => {
  beforeAll(() => {
    execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...installed.tested('@electric-sql/pglite', 'knex-pglite')], {
      cwd: app,
      stdio: 'ignore',
      env: { ...process.env, NODE_OPTIONS: '' },
    });
  }, 180_000);

  test('first start and restart: the shipped template unpacked, the database in .bcms/data, nothing written into node_modules or the temp directory', async () => {
    const before = installed.snapshot(packageDir);
    // A temporary directory of its own: no unpacked copy another test left there can stand in for the shipped one.
    const tmp = fs.mkdtempSync(path.join(work, 'tmp-'));
    const first = await installed.startApp(app, await freePort(), { TMPDIR: tmp });
    expect(first.answer).toEqual({ status: 200, body: '{"success":true,"result":0}' });
    expect(await first.stop()).toBe(0);
    // No "no PGlite template" warning, and no error (the start's own warnings, of secrets in clear
    // and unsigned bundles, are the app's to silence with options it does not set).
    expect(
      first
        .stderr()
        .split('\n')
        .filter((line) => /PGlite template|^error|^fatal/.test(line)),
    ).toEqual([]);
    expect(fs.readdirSync(tmp)).toEqual([]);
    expect(fs.existsSync(path.join(app, '.bcms', 'data', 'PG_VERSION'))).toBe(true);
    const restart = await installed.startApp(app, await freePort());
    expect(restart.answer.status).toBe(200);
    expect(await restart.stop()).toBe(0);
    // The restart opened the database as it was: no progress line, nothing of a template.
    expect(
      restart
        .stderr()
        .split('\n')
        .filter((line) => /preparing the embedded database|PGlite template|^error|^fatal/.test(line)),
    ).toEqual([]);
    expect(installed.snapshot(packageDir)).toEqual(before);
  }, 90_000);

  test('the test kit runs from the tarball (Express a peer, PGlite in memory), and the process ends by itself after close()', () => {
    const script = `const { createTestService } = require('bcms-extensions/testing');
createTestService().then(async (service) => {
  const template = await service.seed.template({ label: 'Installed' });
  const answer = await fetch(service.url + '/api/extensions/templates/' + template._id, { headers: { Authorization: 'Bearer ' + service.token({ roles: ['ADMIN'] }) } });
  console.log(answer.status, (await answer.json()).name);
  await service.close();
});`;
    const result = spawnSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '' } });
    expect([result.status, result.stdout.trim(), result.stderr]).toEqual([0, '200 installed', '']);
  }, 90_000);

  test('with no shipped template that fits, one is made in the temporary directory, and a slow first start says so once', async () => {
    // As when another PGlite version is installed beside the package: the shipped template's name
    // (keyed by PGlite's version) is not found. A copy of the app, so the other tests' is untouched.
    const copy = path.join(work, 'app-no-template');
    fs.cpSync(app, copy, { recursive: true, verbatimSymlinks: true });
    fs.rmSync(path.join(copy, '.bcms'), { recursive: true, force: true });
    fs.rmSync(path.join(copy, 'node_modules', 'bcms-extensions', 'dist', 'pglite-template'), { recursive: true });
    const tmp = fs.mkdtempSync(path.join(work, 'tmp-'));
    const before = installed.snapshot(path.join(copy, 'node_modules'));
    const started = await installed.startApp(copy, await freePort(), { TMPDIR: tmp });
    expect(started.answer).toEqual({ status: 200, body: '{"success":true,"result":0}' });
    expect(await started.stop()).toBe(0);
    const lines = started.stderr().trim().split('\n');
    // One progress line, and nothing of a template that could not be had.
    // Through the app's logger, at info level, as every line of the package.
    expect(lines.filter((line) => line.includes('preparing the embedded database'))).toEqual([
      `info: bcms-extensions: preparing the embedded database (PGlite) in ${path.join(copy, '.bcms', 'data')}; a first start takes a few seconds`,
    ]);
    expect(lines.filter((line) => /PGlite template|^error|^fatal/.test(line))).toEqual([]);
    const uid = String(process.getuid!());
    expect(fs.readdirSync(path.join(tmp, `bcms-extensions-${uid}`))).toEqual([expect.stringMatching(/^pglite-[\d.]+-[0-9a-f]{12}\.tar$/)]);
    expect(installed.snapshot(path.join(copy, 'node_modules'))).toEqual(before);
  }, 120_000);
});

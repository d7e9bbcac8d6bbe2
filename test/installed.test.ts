import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import zlib from 'node:zlib';
import { freePort } from './support/app';
import { serverSchema } from './support/database';
import { extractTemplate, loadPgliteTemplate, readTar, writeTar } from '../lib/db/pglite-template';

// The package as a user installs it: packed, installed from the tarball into a new app (CommonJS,
// as most Express apps are), started in a process of its own. `npm test` builds dist/ first.
const installed = require('./support/installed-app') as {
  pack(dir: string): string;
  installApp(dir: string, tarball: string, extra?: string[]): void;
  startApp(dir: string, port: number, env?: Record<string, string>): Promise<{ seconds: number; answer: { status: number; body: string }; stderr(): string; stop(): Promise<unknown> }>;
  snapshot(dir: string): Record<string, string>;
  tested(...names: string[]): string[];
  ranges(...names: string[]): string[];
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
  expect(listing.filter((name) => /^package\/dist\/pglite-template\/pglite-PG_\d+_\d+-[0-9a-f]{12}\.tar\.brotli-parts$/.test(name))).toHaveLength(1);
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
      `the embedded database needs @electric-sql/pglite, which is not installed. Install it with \`npm install ${installed.ranges('@electric-sql/pglite', 'knex-pglite').join(' ')}\`, or give a Postgres server (DATABASE_URL, or the database option)`,
    );
    expect(fs.existsSync(path.join(app, '.bcms'))).toBe(false);
  }, 60_000);

  test('the test kit, bcms-extensions/testing, says which dev dependencies its in-memory database needs', () => {
    const script = "require('bcms-extensions/testing').createTestService().then(() => process.exit(0), (error) => { console.log(error.message); process.exit(1); })";
    const result = spawnSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
    expect([result.status, result.stdout.trim()]).toEqual([
      1,
      `createTestService: the in-memory database needs @electric-sql/pglite, which is not installed. Install it with \`npm install --save-dev ${installed.ranges('@electric-sql/pglite', 'knex-pglite').join(' ')}\`, or give the test service a database (options.database: a Postgres URL or a Knex instance)`,
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
  const npm = (args: string[]) => execFileSync('npm', args, { cwd: app, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  const installedVersion = () => (JSON.parse(fs.readFileSync(path.join(app, 'node_modules', '@electric-sql', 'pglite', 'package.json'), 'utf8')) as { version: string }).version;
  /** The shipped template's tar, read from the installed package as the router reads it. */
  const shippedTar = async () => {
    const dir = path.join(packageDir, 'dist', 'pglite-template');
    const [file] = fs.readdirSync(dir);
    return (await loadPgliteTemplate({}, { shipped: path.join(dir, file!), cached: undefined, made: path.join(work, 'no-such-template.tar') })).tar;
  };
  /** The system identifier initdb gave a data directory (the first 8 bytes of its control file): a copy of the template has the template's. */
  const systemIdentifier = (controlFile: Buffer) => controlFile.subarray(0, 8).toString('hex');

  beforeAll(() => {
    // As a user types it: the peer ranges, so npm installs the newest PGlite they allow (its
    // metadata asked afresh, not read from a cache that may predate the newest release).
    npm(['install', '--prefer-online', '--no-audit', '--no-fund', ...installed.ranges('@electric-sql/pglite', 'knex-pglite')]);
  }, 180_000);

  test('the PGlite installed is the newest the peer range allows', () => {
    const [range] = installed.ranges('@electric-sql/pglite');
    const allowed = [JSON.parse(npm(['view', '--json', range!, 'version'])) as string | string[]].flat();
    const parts = (version: string) => version.split('.').map(Number);
    const newest = allowed.sort((a, b) => parts(a).reduce((order, part, i) => order || part - (parts(b)[i] ?? 0), 0)).at(-1);
    expect(installedVersion()).toBe(newest);
  }, 60_000);

  test('first start and restart with that PGlite: the shipped template unpacked, the database in .bcms/data, nothing written into node_modules or the temp directory', async () => {
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
    // A copy of the shipped template (made by the PGlite the package was built with), not a
    // directory of the installed PGlite's own initdb: it has the template's system identifier.
    const shippedControl = readTar(await shippedTar()).find((entry) => entry.name === 'global/pg_control')!.data;
    expect(systemIdentifier(fs.readFileSync(path.join(app, '.bcms', 'data', 'global', 'pg_control')))).toBe(systemIdentifier(shippedControl));
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

  test('a shipped template the installed PGlite refuses (another data version) is set aside: one is made with that PGlite, and the log says why', async () => {
    const copy = path.join(work, 'app-refused-template');
    fs.cpSync(app, copy, { recursive: true, verbatimSymlinks: true });
    fs.rmSync(path.join(copy, '.bcms'), { recursive: true, force: true });
    // The shipped template as a build with another Postgres major would have made it, under the
    // same name: Postgres refuses a data directory whose PG_VERSION is not its own.
    const dir = path.join(copy, 'node_modules', 'bcms-extensions', 'dist', 'pglite-template');
    const [file] = fs.readdirSync(dir);
    const other = fs.mkdtempSync(path.join(work, 'other-major-'));
    await extractTemplate(readTar(await shippedTar()), other);
    fs.writeFileSync(path.join(other, 'PG_VERSION'), '17\n');
    const tar = writeTar(other);
    const part = zlib.brotliCompressSync(tar, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } });
    fs.writeFileSync(path.join(dir, file!), Buffer.concat([Buffer.from(`${JSON.stringify({ parts: [part.length], sizes: [tar.length], pglite: '0.0.0' })}\n`), part]));
    const tmp = fs.mkdtempSync(path.join(work, 'tmp-'));
    const started = await installed.startApp(copy, await freePort(), { TMPDIR: tmp });
    expect(started.answer).toEqual({ status: 200, body: '{"success":true,"result":0}' });
    expect(await started.stop()).toBe(0);
    const dataVersion = /^pglite-(PG_\d+_\d+)-/.exec(file!)![1];
    expect(
      started
        .stderr()
        .split('\n')
        .filter((line) => /PGlite template|^error|^fatal/.test(line)),
    ).toEqual([
      `warn: bcms-extensions: the shipped PGlite template (data version ${dataVersion}) does not open with the installed @electric-sql/pglite ${installedVersion()}; making one with it (a few seconds, once)`,
    ]);
    const uid = String(process.getuid!());
    expect(fs.readdirSync(path.join(tmp, `bcms-extensions-${uid}`))).toEqual([`pglite-${installedVersion()}-${/-([0-9a-f]{12})\.tar/.exec(file!)![1]}.tar`]);
    expect(fs.readFileSync(path.join(copy, '.bcms', 'data', 'PG_VERSION'), 'utf8').trim()).toBe(/^PG_(\d+)_/.exec(dataVersion!)![1]);
    // The next start opens what it made, quietly.
    const restart = await installed.startApp(copy, await freePort(), { TMPDIR: tmp });
    expect(restart.answer.status).toBe(200);
    expect(await restart.stop()).toBe(0);
    expect(
      restart
        .stderr()
        .split('\n')
        .filter((line) => /PGlite template|preparing the embedded database|^error|^fatal/.test(line)),
    ).toEqual([]);
  }, 180_000);
});

'use strict';
// `npm run bench`, embedded-database rows, each start in a process of its own, as a user starts it,
// with no DATABASE_URL, and timed from its spawn (Node's own start and every require included):
// - PGlite's floor: a bare `new PGlite(dir)` reopening a directory it made (made before the rounds),
//   to its `waitReady`; measured before and after each round, and the round's floor is their mean;
// - the example app's first start (a new data directory) and its restart, to its first HTTP
//   answer, with its resident memory 2 s after that answer and its peak;
// - a router on `{ pglite: 'memory://' }` to its first read (what a test file waits for), once this
//   user's unpacked copy of the template is there (one unmeasured start before the rounds makes it).
// Each is also given as a ratio to the floor of its own round: the machine's speed drifts by a
// third from one run to the next, and the ratios cancel most of it. The children's temporary
// directory is one of the bench's own. BENCH_STARTUP_ROUNDS (default 5) rounds; medians, every
// round's figures below them.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { positiveInteger } = require('./env');
const installed = require('../test/support/installed-app');

const root = path.resolve(__dirname, '..');
const benchTmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bench-tmp-'));
const ROUNDS = positiveInteger('BENCH_STARTUP_ROUNDS', 5);
const SETTLE_MS = 2_000;
const MB = 1024 * 1024;

/** VmRSS and VmHWM (the peak) of a live process, in MB, from /proc: Linux only. */
function memoryOf(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)[1]) / 1024;
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}

function freePort() {
  return new Promise((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** One GET; rejects on a refused connection, so the caller tries again. */
function get(port, pathname) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: pathname }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts the example app on `dataDir` and times its first answer from the moment of the spawn (so
 * Node's own start and every require count). The request is sent as soon as the port accepts it;
 * the app holds it until it is ready, so the answer's time is when a user would first see a page.
 */
async function startExample(dataDir) {
  const port = await freePort();
  const env = childEnv({ PORT: String(port), EXAMPLE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, [path.join(root, 'example-app', 'server.js')], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the example app exited with ${child.exitCode}: ${stderr}`);
    try {
      const status = await get(port, '/api/plugin/content-stats/stats/counts');
      if (status !== 200) throw new Error(`the example app answered ${status}: ${stderr}`);
      break;
    } catch (error) {
      if (error.code !== 'ECONNREFUSED') throw error;
      await sleep(10);
    }
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await sleep(SETTLE_MS);
  const memory = memoryOf(child.pid);
  child.kill('SIGTERM');
  const code = await exited;
  if (code !== 0) throw new Error(`the example app stopped with ${code}: ${stderr}`);
  return { seconds, ...memory };
}

/** The children's environment: no DATABASE_URL, no test runner's flags, the bench's own temporary directory. */
function childEnv(extra = {}) {
  const env = { ...process.env, TMPDIR: benchTmp, ...extra };
  delete env.DATABASE_URL;
  delete env.NODE_OPTIONS;
  return env;
}

/** Runs `script` in a fresh process; resolves with the seconds from its spawn to its first line on stdout, and that line (JSON). */
function timedScript(script, args = []) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, ['-e', script, ...args], { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let seconds;
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (seconds === undefined && out.includes('\n')) seconds = Number(process.hrtime.bigint() - started) / 1e9;
    });
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('exit', (code) => (code === 0 && seconds !== undefined ? resolve({ seconds, ...JSON.parse(out.split('\n')[0]) }) : reject(new Error(`a timed process exited with ${code}: ${err}`))));
  });
}

const PGLITE = JSON.stringify(require.resolve('@electric-sql/pglite', { paths: [root] }));

/** PGlite's floor: a bare `new PGlite(dir)` on a directory it made, to `waitReady`. */
const FLOOR = `const { PGlite } = require(${PGLITE});
const db = new PGlite(process.argv[1]);
db.waitReady.then(async () => { process.stdout.write('{}\\n'); await db.close(); });`;

/** Makes the floor's directory: PGlite's own initdb, once, untimed. */
const MAKE_FLOOR = `const { PGlite } = require(${PGLITE});
PGlite.create(process.argv[1]).then(async (db) => { await db.query('select 1'); await db.close(); process.stdout.write('{}\\n'); });`;

/**
 * A router on memory://, to its first read (the router's `ready`, migrations included, comes
 * before it), as a test file waits for it. `require` is how long loading the package took.
 */
const MEMORY = `const required = process.hrtime.bigint();
const { bcmsExtensions } = require(${JSON.stringify(root)});
const loaded = process.hrtime.bigint();
const quiet = { info() {}, warn() {}, error() {}, debug() {}, child() { return quiet; } };
const router = bcmsExtensions({}, { database: { pglite: 'memory://' }, logger: quiet });
router.db.raw('select count(*) from bcms_templates').then(async () => {
  process.stdout.write(JSON.stringify({ require: Number(loaded - required) / 1e9, rss: process.memoryUsage().rss / ${MB} }) + '\\n');
  await router.close();
});`;

let pgliteInstalled = '?';

/**
 * The packed tarball installed into a new app (with the embedded database's packages, the newest
 * their peer ranges allow), as a user installs it: each round a first start on no data, then a
 * restart on what it made. Each start is timed from the spawn to the first answer of a function
 * that reads the database.
 */
async function installedRounds() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bench-installed-'));
  try {
    const app = path.join(work, 'app');
    // The peer ranges, as a user types them: npm installs the newest PGlite they allow.
    installed.installApp(app, installed.pack(work), installed.ranges('@electric-sql/pglite', 'knex-pglite'));
    pgliteInstalled = JSON.parse(fs.readFileSync(path.join(app, 'node_modules', '@electric-sql', 'pglite', 'package.json'), 'utf8')).version;
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      fs.rmSync(path.join(app, '.bcms'), { recursive: true, force: true });
      const first = await installed.startApp(app, await freePort(), { TMPDIR: benchTmp });
      await first.stop();
      const restart = await installed.startApp(app, await freePort(), { TMPDIR: benchTmp });
      await restart.stop();
      if (first.answer.status !== 200 || restart.answer.status !== 200) throw new Error(`the installed app answered ${first.answer.status}, then ${restart.answer.status}`);
      rounds.push({ first: first.seconds, restart: restart.seconds });
    }
    return rounds;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main() {
  const rounds = [];
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bench-start-'));
  try {
    const floorDir = path.join(work, 'floor');
    await timedScript(MAKE_FLOOR, [floorDir]);
    // This user's unpacked copy of the template, as any memory:// start after the first finds it.
    await timedScript(MEMORY);
    for (let i = 0; i < ROUNDS; i++) {
      const before = await timedScript(FLOOR, [floorDir]);
      const dataDir = path.join(work, `example-${i}`);
      const first = await startExample(dataDir);
      const restart = await startExample(dataDir);
      const memory = await timedScript(MEMORY);
      const after = await timedScript(FLOOR, [floorDir]);
      rounds.push({ floor: (before.seconds + after.seconds) / 2, floors: [before.seconds, after.seconds], first, restart, memory });
    }
  } finally {
    // Deleted at the end, not between rounds: deleting a thousand files keeps this machine's disk
    // busy (ext4 with \`discard\`) for seconds, and the next first start's file creation slowed 3-4x.
    fs.rmSync(work, { recursive: true, force: true });
  }
  const installedApp = await installedRounds();
  fs.rmSync(benchTmp, { recursive: true, force: true });
  const m = (pick) => median(rounds.map(pick));
  const mi = (pick) => median(installedApp.map(pick));
  const rows = [
    ["PGlite's floor: a bare new PGlite(dir) reopening its directory, spawn to ready", m((r) => r.floor), 's', null],
    ['example app, first start (new .bcms): spawn to first answer', m((r) => r.first.seconds), 's', null],
    ['example app, first start / floor (same round)', m((r) => r.first.seconds / r.floor), 'x', 2.0],
    ['example app, restart: spawn to first answer', m((r) => r.restart.seconds), 's', null],
    ['example app, restart / floor (same round)', m((r) => r.restart.seconds / r.floor), 'x', 1.2],
    ['memory:// router, spawn to first read', m((r) => r.memory.seconds), 's', null],
    ['memory:// router, first read / floor (same round)', m((r) => r.memory.seconds / r.floor), 'x', 1.2],
    ['first start: RSS 2 s later', m((r) => r.first.rss), 'MB', 350],
    ['first start: peak RSS', m((r) => r.first.peak), 'MB', null],
    ['restart: RSS 2 s later', m((r) => r.restart.rss), 'MB', null],
    ['memory://: RSS at first read', m((r) => r.memory.rss), 'MB', null],
    ["require('bcms-extensions') (in the memory:// row)", m((r) => r.memory.require), 's', null],
    [`installed from the tarball (PGlite ${pgliteInstalled}): first start, first answer`, mi((r) => r.first), 's', null],
    ['installed from the tarball: restart, first answer', mi((r) => r.restart), 's', null],
    ['installed from the tarball: first start / restart (same round)', mi((r) => r.first / r.restart), 'x', 2],
  ];
  const fmt = (value, unit) => (unit === 's' || unit === 'x' ? value.toFixed(2) : value.toFixed(0));
  console.log(`\n| embedded database (median of ${ROUNDS} rounds) | value | target | met? |`);
  console.log('|---|--:|--:|---|');
  for (const [name, value, unit, target] of rows) {
    const met = target === null ? '—' : value <= target ? 'yes' : '**missed**';
    console.log(`| ${name} | ${fmt(value, unit)} ${unit} | ${target === null ? '—' : `<= ${target} ${unit}`} | ${met} |`);
  }
  console.log(`\nInstalled from the tarball, every round (first start s; restart s): ${installedApp.map((r) => `${r.first.toFixed(2)}; ${r.restart.toFixed(2)}`).join(' | ')}`);
  console.log('\nEvery round (floor s, before/after; first start s / RSS MB / peak MB; restart s / RSS MB; memory:// s / RSS MB):');
  for (const { floors, first, restart, memory } of rounds) {
    console.log(
      `  ${floors.map((s) => s.toFixed(2)).join('/')};  ${first.seconds.toFixed(2)} / ${first.rss.toFixed(0)} / ${first.peak.toFixed(0)};  ` +
        `${restart.seconds.toFixed(2)} / ${restart.rss.toFixed(0)};  ${memory.seconds.toFixed(2)} / ${memory.rss.toFixed(0)}`,
    );
  }
}

main().catch((error) => {
  console.error(`bench (embedded database) failed: ${error.stack || error}`);
  process.exitCode = 1;
});

'use strict';
// `npm run bench`, embedded-database rows: how long the example app takes to answer its first HTTP
// request on a new data directory (first start) and on existing data (restart), its resident memory
// 2 s after that answer and its peak, and how long `{ pglite: 'memory://' }` takes to be ready (a
// router's `ready`, migrations included: what a test file waits for). Each start runs in a process
// of its own, as a user starts it, with no DATABASE_URL. BENCH_STARTUP_ROUNDS (default 5) rounds;
// the median is printed against its target, and every round's figures below it.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { positiveInteger } = require('./env');
const installed = require('../test/support/installed-app');

const root = path.resolve(__dirname, '..');
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
  const env = { ...process.env, PORT: String(port), EXAMPLE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  delete env.DATABASE_URL;
  delete env.NODE_OPTIONS;
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

/**
 * A fresh process that builds a router on memory:// and waits for `ready` (migrations included),
 * as a test file does. Timed from the router's creation; loading the package is timed apart.
 */
function memoryReady() {
  const script = `
    const required = process.hrtime.bigint();
    const { bcmsExtensions } = require(${JSON.stringify(root)});
    const started = process.hrtime.bigint();
    const quiet = { info() {}, warn() {}, error() {}, debug() {}, child() { return quiet; } };
    const router = bcmsExtensions({}, { database: { pglite: 'memory://' }, logger: quiet });
    router.ready.then(async () => {
      await router.db.raw('select count(*) from bcms_templates');
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const { rss } = process.memoryUsage();
      await router.close();
      process.stdout.write(JSON.stringify({ seconds, require: Number(started - required) / 1e9, rss: rss / ${MB} }));
    });`;
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env.DATABASE_URL;
    delete env.NODE_OPTIONS;
    const child = spawn(process.execPath, ['-e', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`memory:// round exited with ${code}: ${err}`))));
  });
}

/**
 * The packed tarball installed into a new app (with the embedded database's packages), as a user
 * installs it: each round a first start on no data, then a restart on what it made. Each start is
 * timed from the spawn to the first answer of a function that reads the database.
 */
async function installedRounds() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bench-installed-'));
  try {
    const app = path.join(work, 'app');
    installed.installApp(app, installed.pack(work), installed.tested('@electric-sql/pglite', 'knex-pglite'));
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      fs.rmSync(path.join(app, '.bcms'), { recursive: true, force: true });
      const first = await installed.startApp(app, await freePort());
      await first.stop();
      const restart = await installed.startApp(app, await freePort());
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
  const dataDirs = [];
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bench-start-'));
      dataDirs.push(dataDir);
      const first = await startExample(dataDir);
      const restart = await startExample(dataDir);
      const memory = await memoryReady();
      rounds.push({ first, restart, memory });
    }
  } finally {
    // Deleted at the end, not between rounds: deleting a thousand files keeps this machine's disk
    // busy (ext4 with `discard`) for seconds, and the next first start's file creation slowed 3-4x.
    for (const dataDir of dataDirs) fs.rmSync(dataDir, { recursive: true, force: true });
  }
  const installedApp = await installedRounds();
  const m = (pick) => median(rounds.map(pick));
  const mi = (pick) => median(installedApp.map(pick));
  const rows = [
    ['first start: first answer', m((r) => r.first.seconds), 's', 1.5],
    ['first start: RSS 2 s later', m((r) => r.first.rss), 'MB', 350],
    ['first start: peak RSS', m((r) => r.first.peak), 'MB', null],
    ['restart: first answer', m((r) => r.restart.seconds), 's', 1.0],
    ['restart: RSS 2 s later', m((r) => r.restart.rss), 'MB', null],
    ['memory://: router ready', m((r) => r.memory.seconds), 's', 1.0],
    ['memory://: RSS when ready', m((r) => r.memory.rss), 'MB', null],
    ["require('bcms-extensions') (before the router, not in the row above)", m((r) => r.memory.require), 's', null],
    ['installed from the tarball: first start, first answer', mi((r) => r.first), 's', null],
    ['installed from the tarball: restart, first answer', mi((r) => r.restart), 's', null],
    ['installed from the tarball: first start / restart (same round)', mi((r) => r.first / r.restart), 'x', 2],
  ];
  const fmt = (value, unit) => (unit === 's' || unit === 'x' ? value.toFixed(2) : value.toFixed(0));
  console.log(`\n| embedded database (example app and memory://, median of ${ROUNDS}) | value | target | met? |`);
  console.log('|---|--:|--:|---|');
  for (const [name, value, unit, target] of rows) {
    const met = target === null ? '—' : value <= target ? 'yes' : '**missed**';
    console.log(`| ${name} | ${fmt(value, unit)} ${unit} | ${target === null ? '—' : `<= ${target} ${unit}`} | ${met} |`);
  }
  console.log(`\nInstalled from the tarball, every round (first start s; restart s): ${installedApp.map((r) => `${r.first.toFixed(2)}; ${r.restart.toFixed(2)}`).join(' | ')}`);
  console.log('\nEvery round (first start s / RSS MB / peak MB; restart s / RSS MB; memory:// s / RSS MB):');
  for (const { first, restart, memory } of rounds) {
    console.log(
      `  ${first.seconds.toFixed(2)} / ${first.rss.toFixed(0)} / ${first.peak.toFixed(0)};  ` +
        `${restart.seconds.toFixed(2)} / ${restart.rss.toFixed(0)};  ${memory.seconds.toFixed(2)} / ${memory.rss.toFixed(0)}`,
    );
  }
}

main().catch((error) => {
  console.error(`bench (embedded database) failed: ${error.stack || error}`);
  process.exitCode = 1;
});

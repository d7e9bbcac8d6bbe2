'use strict';
// `npm run bench:sandbox` (also part of `npm run bench`): what the sandbox costs an isolate.
// - Start: from spawning an isolate to its first answer (load a function bundle, answer one call),
//   in bubblewrap and as a plain child process, interleaved round by round so that both see the
//   same machine; medians in ms and their ratio (target: sandboxed ≤ 1.3× plain).
// - Memory: the resident set of ten idle sandboxed function isolates, summed over each one's
//   processes (bubblewrap's two and Node), read from /proc (target: under 600 MB).
// Writes bench/results/sandbox.json. Needs `npm run build` and bubblewrap.

const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { IsolatePool } = require('../dist/isolate/pool');
const { chooseSandbox, resolvePermissions } = require('../dist/isolate/sandbox');
const { childrenOf } = require('../dist/isolate/cpu');
const { LogBudget } = require('../dist/isolate/log-budget');
const { AnswerHeaderCheck } = require('../dist/isolate/answer-headers');
const { positiveInteger } = require('./env');

const ROUNDS = positiveInteger('BENCH_SANDBOX_ROUNDS', 15);
const IDLE = 10;

const code = `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => ({ hello: 'world' }) }));`;

const filesDir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'bcms-bench-sandbox-'));

function services(sandbox) {
  const quiet = { info() {}, warn() {}, error() {}, debug() {} };
  return {
    logger: quiet,
    // The bench's function asks nothing of the service.
    bridge: { releaseAll: async () => {}, idle: async () => {} },
    verifyAccessToken: async () => undefined,
    verifyPluginKey: async () => null,
    memoryMb: 256,
    env: {},
    loadTimeoutMs: 10_000,
    closing: new AbortController().signal,
    filesDir,
    layerModules: [],
    publish() {},
    answerLimit: 16 * 1024 * 1024,
    logBudget: new LogBudget(quiet),
    answerHeaders: new AnswerHeaderCheck(quiet),
    sandbox,
    permissions: resolvePermissions(undefined),
  };
}

const request = {
  method: 'POST',
  url: '/api/function/hello',
  originalUrl: '/api/function/hello',
  baseUrl: '',
  path: '/api/function/hello',
  params: {},
  query: {},
  headers: {},
  body: {},
  ip: '127.0.0.1',
  protocol: 'http',
  hostname: 'localhost',
  secure: false,
};

async function startAndAnswer(sandbox, name = 'hello') {
  const began = performance.now();
  const pool = await IsolatePool.start(`function ${name}`, 'function', name, { type: 'bundle', code, filename: `${name}.js` }, services(sandbox));
  const answer = await pool.call({ t: 'function', request, auth: null }, {}, 10_000, () => new Error('timed out'));
  const ms = performance.now() - began;
  if (answer === undefined) throw new Error('no answer');
  return { pool, ms };
}

/** Resident memory of a process and its descendants, in kB. */
function treeRssKb(pid) {
  let total = 0;
  const visit = (each) => {
    try {
      const status = fs.readFileSync(`/proc/${each}/status`, 'utf8');
      total += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    } catch {
      return;
    }
    for (const child of childrenOf(each)) visit(child);
  };
  visit(pid);
  return total;
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

async function main() {
  // Isolates never keep the service's process alive (their handles are unref'd): this bench must.
  const alive = setInterval(() => {}, 1000);
  const sandboxed = chooseSandbox('bubblewrap');
  const plain = chooseSandbox('none');
  const times = { bubblewrap: [], none: [] };
  // One of each first, not measured: the first spawn of each kind pays for reading files cold.
  for (const choice of [sandboxed, plain]) await (await startAndAnswer(choice)).pool.close();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [sandboxed, plain] : [plain, sandboxed];
    for (const choice of order) {
      const { pool, ms } = await startAndAnswer(choice);
      times[choice.kind].push(ms);
      await pool.close();
    }
  }
  const start = { sandboxedMs: median(times.bubblewrap), plainMs: median(times.none) };
  start.ratio = start.sandboxedMs / start.plainMs;

  const pools = [];
  for (let index = 0; index < IDLE; index++) pools.push((await startAndAnswer(sandboxed)).pool);
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const rssKb = pools.reduce((sum, pool) => sum + pool.isolates.reduce((each, isolate) => each + treeRssKb(isolate.child.pid), 0), 0);
  await Promise.all(pools.map((pool) => pool.close()));
  fs.rmSync(filesDir, { recursive: true, force: true });

  const result = {
    date: new Date().toISOString(),
    rounds: ROUNDS,
    start: { ...start, sandboxedRuns: times.bubblewrap, plainRuns: times.none, target: 'sandboxed ≤ 1.3× plain', met: start.ratio <= 1.3 },
    idle: { isolates: IDLE, rssMb: rssKb / 1024, target: 'under 600 MB', met: rssKb / 1024 < 600 },
  };
  fs.mkdirSync(path.join(__dirname, 'results'), { recursive: true });
  fs.writeFileSync(path.join(__dirname, 'results', 'sandbox.json'), `${JSON.stringify(result, null, 2)}\n`);
  console.log('| measure | sandboxed (bubblewrap) | plain child process | ratio | target |');
  console.log('|---|---|---|---|---|');
  console.log(
    `| isolate start, spawn to first answer (median of ${ROUNDS}) | ${start.sandboxedMs.toFixed(1)} ms | ${start.plainMs.toFixed(1)} ms | ${start.ratio.toFixed(2)}× | ≤ 1.3× ${result.start.met ? '(met)' : '(NOT met)'} |`,
  );
  clearInterval(alive);
  console.log(`| RSS of ${IDLE} idle function isolates | ${result.idle.rssMb.toFixed(0)} MB | | | < 600 MB ${result.idle.met ? '(met)' : '(NOT met)'} |`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

'use strict';
// `npm run bench` (and `npm run bench:transport` alone): what one call to an isolate costs in
// transport alone, for the four ways an isolate could be reached: a worker thread (postMessage),
// a child process with IPC in 'json' serialization (what lib/isolate/host.ts used), one with
// 'advanced' (structured clone), and one with lib/isolate/channel.ts's length-prefixed frames on a
// pipe at fd 3 (what lib/isolate/host.ts uses: Node's IPC channel buffers a message until its
// newline, with no cap). A request-sized message (method, url, params, query, six headers, as
// lib/isolate/extension.ts toWireRequest builds it) goes to the peer (isolate-transport-peer.js),
// which answers a plugin answer (status, headers, JSON text). With IN_FLIGHT calls in flight, it
// counts round trips a second and, from performance.eventLoopUtilization(), the main thread's busy
// time per call: what every isolated call takes from the service's event loop. It also times how
// long each peer takes to come online (its first line of code runs) and to load dist/api.js, and
// how long creating it blocks the main thread (new Worker() or fork() itself): in this bare process,
// and again at the end with an embedded database open in it (a router on PGlite in
// .bcms/bench-transport, as a service without DATABASE_URL has one), since fork() copies the page
// tables of everything the process has mapped.
// BENCH_TRANSPORT_ROUNDS rounds (default 5) of each, a fresh peer each time, the order rotated
// every round; medians. Not pinned to cores: the main thread and the peer each have one of two.

const { fork, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { Worker } = require('node:worker_threads');
const { positiveInteger, positiveNumber } = require('./env');

const PEER = path.join(__dirname, 'isolate-transport-peer.js');
const RESULTS = path.join(__dirname, 'results');
const ROUNDS = positiveInteger('BENCH_TRANSPORT_ROUNDS', 5);
const SECONDS = positiveNumber('BENCH_TRANSPORT_SECONDS', 2);
const WARMUP_SECONDS = 0.5;
const IN_FLIGHT = 50;

/** A call as lib/isolate/extension.ts sends one for GET /api/plugin/bench/hello/world?page=2 (`id` set per call). */
const CALL = {
  t: 'call',
  id: 0,
  route: 0,
  request: {
    method: 'GET',
    url: '/hello/world?page=2',
    originalUrl: '/api/plugin/bench/hello/world?page=2',
    baseUrl: '/api/plugin/bench',
    path: '/hello/world',
    params: { id: 'world' },
    query: { page: '2' },
    headers: {
      host: '127.0.0.1:3000',
      'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
      accept: 'application/json',
      'accept-encoding': 'gzip, deflate, br',
      'accept-language': 'en-US,en;q=0.9',
      connection: 'keep-alive',
    },
    ip: '127.0.0.1',
    protocol: 'http',
    hostname: '127.0.0.1',
    secure: false,
  },
  runGuard: false,
};

const TRANSPORTS = {
  worker: () => {
    const worker = new Worker(PEER);
    return {
      send: (message) => worker.postMessage(message),
      on: (listener) => worker.on('message', listener),
      stop: () => worker.terminate(),
    };
  },
  'child json': () => child('json'),
  'child advanced': () => child('advanced'),
  'child framed': () => framedChild(),
};

/** A child whose channel is lib/isolate/channel.ts on a pipe at fd 3: what lib/isolate/host.ts uses. */
function framedChild() {
  const { Channel, MAX_FRAME_BYTES } = require('../dist/isolate/channel.js');
  const peer = spawn(process.execPath, [PEER, 'framed'], { stdio: ['ignore', 'inherit', 'inherit', 'pipe'] });
  const listeners = [];
  const channel = new Channel(peer.stdio[3], {
    maxFrameBytes: MAX_FRAME_BYTES,
    receive: (message) => {
      listeners.forEach((listener) => {
        listener(message);
      });
    },
    fault: () => peer.kill(),
  });
  return {
    send: (message) => channel.send(message),
    on: (listener) => listeners.push(listener),
    stop: () =>
      new Promise((resolve) => {
        peer.once('exit', resolve);
        channel.close();
      }),
  };
}

function child(serialization) {
  const peer = fork(PEER, [], { serialization, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return {
    send: (message) => peer.send(message),
    on: (listener) => peer.on('message', listener),
    stop: () =>
      new Promise((resolve) => {
        peer.once('exit', resolve);
        peer.disconnect();
      }),
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One peer: started, timed to online and to loaded, then loaded with IN_FLIGHT calls. */
async function measure(name) {
  const started = performance.now();
  const peer = TRANSPORTS[name]();
  const stallMs = performance.now() - started;
  let onlineMs;
  let readyMs;
  let loadMs;
  let nextId = 0;
  let counting = false;
  let sending = true;
  let answered = 0;
  let inFlight = 0;
  let drained;
  const ready = new Promise((resolve) => {
    peer.on((message) => {
      if (message.t === 'done') {
        inFlight -= 1;
        if (counting) answered += 1;
        if (sending) {
          inFlight += 1;
          peer.send({ ...CALL, id: ++nextId });
        } else if (inFlight === 0) drained();
      } else if (message.t === 'up') {
        onlineMs = performance.now() - started;
      } else if (message.t === 'ready') {
        readyMs = performance.now() - started;
        loadMs = message.loadMs;
        resolve();
      }
    });
  });
  await ready;
  for (let i = 0; i < IN_FLIGHT; i += 1) {
    inFlight += 1;
    peer.send({ ...CALL, id: ++nextId });
  }
  await sleep(WARMUP_SECONDS * 1000);
  counting = true;
  const elu = performance.eventLoopUtilization();
  const from = performance.now();
  await sleep(SECONDS * 1000);
  const used = performance.eventLoopUtilization(elu);
  const elapsed = performance.now() - from;
  counting = false;
  const calls = answered;
  sending = false;
  await new Promise((resolve) => {
    drained = resolve;
    if (inFlight === 0) resolve();
  });
  await peer.stop();
  return {
    roundTripsPerSec: (calls / elapsed) * 1000,
    busyPerCallUs: (used.active / calls) * 1000,
    utilization: used.utilization,
    onlineMs,
    readyMs,
    loadMs,
    stallMs,
  };
}

/** How long creating a peer blocks the main thread, in this process as it is now: median of `times`. */
async function stalls(name, times) {
  const measured = [];
  for (let i = 0; i < times; i += 1) {
    const started = performance.now();
    const peer = TRANSPORTS[name]();
    measured.push(performance.now() - started);
    await new Promise((resolve) => peer.on((message) => message.t === 'ready' && resolve()));
    await peer.stop();
  }
  return median(measured);
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

async function main() {
  if (!fs.existsSync(path.join(__dirname, '..', 'dist', 'api.js'))) throw new Error('dist/api.js is missing: run npm run build first');
  const names = Object.keys(TRANSPORTS);
  const rssBare = process.memoryUsage().rss / 1024 ** 2;
  const rounds = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    const order = names.map((_, i) => names[(i + round) % names.length]);
    for (const name of order) {
      const result = await measure(name);
      rounds[name].push(result);
      console.error(
        `[transport round ${round + 1}/${ROUNDS}] ${name}: ${Math.round(result.roundTripsPerSec)} round trips/s, ` +
          `${result.busyPerCallUs.toFixed(1)} µs main-thread busy per call (utilization ${result.utilization.toFixed(2)}), ` +
          `online ${result.onlineMs.toFixed(0)} ms, dist/api.js loaded ${result.readyMs.toFixed(0)} ms (its require ${result.loadMs.toFixed(0)} ms)`,
      );
    }
  }
  const rows = names.map((name) => {
    const of = (key) => median(rounds[name].map((result) => result[key]));
    return {
      transport: name,
      roundTripsPerSec: of('roundTripsPerSec'),
      busyPerCallUs: of('busyPerCallUs'),
      utilization: of('utilization'),
      onlineMs: of('onlineMs'),
      readyMs: of('readyMs'),
      loadMs: of('loadMs'),
      stallMs: of('stallMs'),
    };
  });
  // Last, as it leaves the embedded database's memory in this process: a service without DATABASE_URL.
  const { bcmsExtensions } = require('..');
  const quiet = { info() {}, warn() {}, error() {}, debug() {} };
  const router = bcmsExtensions({}, { database: { pglite: path.join(__dirname, '..', '.bcms', 'bench-transport') }, logger: quiet });
  await router.ready;
  const rssMB = process.memoryUsage().rss / 1024 ** 2;
  for (const row of rows) row.stallWithDatabaseMs = await stalls(row.transport, ROUNDS);
  await router.close();
  const cpus = os.cpus();
  const info = { cpu: cpus[0] ? cpus[0].model : 'unknown', cores: cpus.length, node: process.version, date: new Date().toISOString() };
  const lines = [
    `| isolate transport (median of ${ROUNDS}) | round trips/s, ${IN_FLIGHT} in flight | main-thread busy per call µs | online ms | dist/api.js loaded ms | start blocks the main thread ms | the same, embedded database open ms |`,
    '|---|--:|--:|--:|--:|--:|--:|',
    ...rows.map(
      (row) =>
        `| ${row.transport} | ${Math.round(row.roundTripsPerSec)} | ${row.busyPerCallUs.toFixed(1)} | ${row.onlineMs.toFixed(0)} | ${row.readyMs.toFixed(0)} | ` +
        `${row.stallMs.toFixed(1)} | ${row.stallWithDatabaseMs.toFixed(1)} |`,
    ),
    '',
    `Machine: ${info.cpu}, ${info.cores} cores, Node ${info.node}, ${info.date}. Each round: a fresh peer, ${WARMUP_SECONDS} s of load unmeasured, ` +
      `then ${SECONDS} s measured; a request-sized call out, a plugin answer back. "online": from creating the worker or forking the child ` +
      'to its first message; "loaded": to its message once it required dist/api.js. "Start blocks the main thread": how long ' +
      `new Worker() or fork() took before returning, in this process (RSS about ${Math.round(rssBare)} MB), then with a router on an embedded PGlite open in it ` +
      `(RSS ${Math.round(rssMB)} MB), ${ROUNDS} starts each.`,
  ];
  console.log(lines.join('\n'));
  fs.mkdirSync(RESULTS, { recursive: true });
  fs.writeFileSync(path.join(RESULTS, 'transport.json'), `${JSON.stringify({ machine: info, rssBareMB: rssBare, rssWithDatabaseMB: rssMB, rounds, rows }, null, 2)}\n`);
}

main().catch((error) => {
  console.error(`transport bench failed: ${error.stack || error}`);
  process.exitCode = 1;
});

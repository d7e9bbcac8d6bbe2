'use strict';
// The flood (issue 23, item 5): an open GET's median latency while 4 clients without credentials
// post 1 MB bodies of nested arrays to a route behind the JWT guard, against the same GET without
// them, on one server in one run. `npm run build`, then `node bench/flood.js`.
//
// The server (bench/server.js flood, bench/apps.js floodApp) runs in its own process; this one
// sends the GETs one after another and runs the flooding clients. Quiet and flooded rounds
// alternate (ROUNDS of each), so that a machine whose load changes during the run weighs on both;
// the medians are over every GET of each kind. Target: the flooded median within 1.5x the quiet one.

const http = require('node:http');
const path = require('node:path');
const { fork } = require('node:child_process');
const { performance } = require('node:perf_hooks');
const autocannon = require('autocannon');

const FLOODERS = 4;
const ROUNDS = 3;
const GETS_PER_ROUND = 200;
/** As npm run bench loads its servers: the reviewer's 24 ms median was the open GET under such a load. */
const CONNECTIONS = 50;
const LOAD_SECONDS = 4;
const TARGET = 1.5;
const MB = 1024 * 1024;
// 1 MB of nested arrays: what a JSON parser pays most for, and deep enough to hurt a recursive one.
const FLOOD_BODY = Buffer.from('['.repeat(MB / 2) + ']'.repeat(MB / 2));

function startServer() {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'server.js'), ['flood'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    child.once('message', (message) => resolve({ child, port: message.port }));
    child.once('exit', (code) => reject(new Error(`the flood server exited (${code}) before it listened`)));
  });
}

function send(agent, port, method, url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: url, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** `count` GETs one after another on one keep-alive connection: their latencies in ms. */
async function timeGets(port, count) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const times = [];
  for (let i = 0; i < count; i += 1) {
    const started = performance.now();
    const status = await send(agent, port, 'GET', '/api/plugin/bench/hello/world', {});
    if (status !== 200) throw new Error(`the open GET answered ${status}`);
    times.push(performance.now() - started);
  }
  agent.destroy();
  return times;
}

/**
 * FLOODERS clients posting FLOOD_BODY without a token, each as fast as it is answered, until
 * stopped: in a process of their own, so that the GETs' timing is not this event loop's wait on them.
 */
function startFlood(port) {
  const child = fork(__filename, ['--flood', String(port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return () =>
    new Promise((resolve) => {
      child.once('message', (statuses) => resolve(statuses));
      child.send('stop');
    });
}

/** In the flooding process: the clients, until the parent says stop; then their answers by status. */
function flood(port) {
  let running = true;
  const statuses = {};
  const headers = { 'content-type': 'application/json', 'content-length': FLOOD_BODY.length };
  const client = async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    while (running) {
      const status = await send(agent, port, 'POST', '/api/plugin/bench/hello/inbox', headers, FLOOD_BODY).catch((error) => error.code ?? 'error');
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
    agent.destroy();
  };
  const clients = Array.from({ length: FLOODERS }, client);
  process.once('message', async () => {
    running = false;
    await Promise.all(clients);
    process.send(statuses, () => process.exit(0));
  });
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** One autocannon load of the open GET: CONNECTIONS connections for LOAD_SECONDS; its p50 latency and req/s. */
async function loadGets(port) {
  const result = await autocannon({ url: `http://127.0.0.1:${port}/api/plugin/bench/hello/world`, connections: CONNECTIONS, duration: LOAD_SECONDS });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`the open GET failed under load (${result.non2xx} non-2xx, ${result.errors} errors)`);
  return { p50: result.latency.p50, p99: result.latency.p99, reqPerSec: result.requests.average };
}

async function main() {
  const { child, port } = await startServer();
  try {
    await timeGets(port, 100); // warm-up
    const quiet = { one: [], loaded: [] };
    const flooded = { one: [], loaded: [] };
    const statuses = {};
    const stopped = (counts) => {
      for (const [status, count] of Object.entries(counts)) statuses[status] = (statuses[status] ?? 0) + count;
    };
    for (let round = 0; round < ROUNDS; round += 1) {
      quiet.one.push(...(await timeGets(port, GETS_PER_ROUND)));
      quiet.loaded.push(await loadGets(port));
      const stop = startFlood(port);
      await new Promise((resolve) => setTimeout(resolve, 300)); // the flood under way before the first GET
      flooded.one.push(...(await timeGets(port, GETS_PER_ROUND)));
      flooded.loaded.push(await loadGets(port));
      stopped(await stop());
    }
    const p50 = (loads) => median(loads.map((load) => load.p50));
    const rps = (loads) => Math.round(median(loads.map((load) => load.reqPerSec)));
    const p99 = (loads) => median(loads.map((load) => load.p99));
    const quantile = (times, q) => Number([...times].sort((a, b) => a - b)[Math.floor((times.length - 1) * q)].toFixed(2));
    const rows = [
      {
        scenario: `plugin-get under load (${CONNECTIONS} connections), p50 ms: median of ${ROUNDS} loads of ${LOAD_SECONDS} s`,
        quiet: p50(quiet.loaded),
        flooded: p50(flooded.loaded),
        ratio: Number((p50(flooded.loaded) / p50(quiet.loaded)).toFixed(2)),
        target: `<= ${TARGET}`,
        reqPerSec: { quiet: rps(quiet.loaded), flooded: rps(flooded.loaded) },
        p99: { quiet: p99(quiet.loaded), flooded: p99(flooded.loaded) },
      },
      {
        scenario: `plugin-get one at a time, p50 ms of ${quiet.one.length} GETs`,
        quiet: Number(median(quiet.one).toFixed(2)),
        flooded: Number(median(flooded.one).toFixed(2)),
        ratio: Number((median(flooded.one) / median(quiet.one)).toFixed(2)),
        target: '—',
        p99: { quiet: quantile(quiet.one, 0.99), flooded: quantile(flooded.one, 0.99) },
        max: { quiet: quantile(quiet.one, 1), flooded: quantile(flooded.one, 1) },
      },
    ];
    console.log(JSON.stringify({ rows, floodAnswers: statuses }, null, 2));
    if (!statuses['401']) throw new Error(`no flooding post was answered 401 (${JSON.stringify(statuses)})`);
  } finally {
    child.kill('SIGTERM');
  }
}

if (process.argv[2] === '--flood') flood(Number(process.argv[3]));
else
  main().catch((error) => {
    console.error(error);
    process.exitCode = 1;
  });

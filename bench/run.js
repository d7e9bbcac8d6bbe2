'use strict';
// `npm run bench`: starts each scenario's server in a child process, verifies its answer, loads it
// with autocannon from this process, stops it, then prints a Markdown table and writes
// bench/results/latest.json. Exits 0 when the run completed, whether or not targets were met;
// non-zero on an error (a wrong answer, a failed request, a server that does not start).

const { fork } = require('node:child_process');
const path = require('node:path');
const { isDeepStrictEqual } = require('node:util');
const autocannon = require('autocannon');
const { scenarios } = require('./scenarios');
const { compare, machine, markdown, writeJson } = require('./report');

const RESULTS = path.join(__dirname, 'results');
const SERVER_START_MS = 15_000;

function positiveNumber(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

function readSettings() {
  return {
    connections: Math.round(positiveNumber('BENCH_CONNECTIONS', 50)),
    duration: positiveNumber('BENCH_DURATION', 10),
    warmup: positiveNumber('BENCH_WARMUP', 2),
    // Profiles each server with --cpu-prof into bench/results/profiles (slows them down).
    profile: process.env.BENCH_PROFILE === '1',
  };
}

/** Forks `server.js <name>` and resolves once it reports its port. */
function startServer(name, settings) {
  const execArgv = settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS, 'profiles')}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
  const child = fork(path.join(__dirname, 'server.js'), [name], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error(`server "${name}" did not report its port within ${SERVER_START_MS} ms`));
    }, SERVER_START_MS);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server "${name}" exited before listening (code ${code}, signal ${signal})`));
    });
    child.once('message', (message) => {
      clearTimeout(timer);
      resolve({ port: message.port, stop: () => stopServer(child) });
    });
  });
}

function stopServer(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

/** One request before loading: a server that answers wrongly would make its numbers meaningless. */
async function verify(scenario, url, request) {
  const response = await fetch(url, { method: request.method, headers: request.headers, body: request.body });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  if (response.status !== 200 || !isDeepStrictEqual(body, scenario.expect)) {
    throw new Error(
      `${scenario.name}: ${request.method} ${url} answered ${response.status} ${text}; ` +
        `expected 200 ${JSON.stringify(scenario.expect)}`,
    );
  }
}

/** Requests that did not end in a 2xx: non-2xx answers, connection errors and time-outs. */
function failuresOf(result) {
  return result.non2xx + result.errors + result.timeouts;
}

async function measure(scenario, settings) {
  const server = await startServer(scenario.name, settings);
  try {
    const url = `http://127.0.0.1:${server.port}${scenario.path}`;
    const request = {
      method: scenario.method,
      headers: scenario.headers ? scenario.headers() : {},
      body: scenario.body === undefined ? undefined : JSON.stringify(scenario.body),
    };
    await verify(scenario, url, request);
    const load = (duration) => autocannon({ url, connections: settings.connections, duration, ...request });
    // Warm-up: lets V8 optimise the hot paths before measuring; its numbers are discarded.
    const warm = await load(settings.warmup);
    if (failuresOf(warm) > 0) throw new Error(`${scenario.name}: warm-up had failed requests ${JSON.stringify(warm.statusCodeStats)}`);
    const result = await load(settings.duration);
    const summary = {
      name: scenario.name,
      baseline: scenario.baseline,
      target: scenario.target,
      reqPerSec: result.requests.average,
      p99Ms: result.latency.p99,
      totalRequests: result.requests.total,
      statusCodes: result.statusCodeStats,
      non2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      failures: failuresOf(result),
    };
    console.error(`${scenario.name}: ${Math.round(summary.reqPerSec)} req/s, p99 ${summary.p99Ms} ms`);
    return summary;
  } finally {
    await server.stop();
  }
}

async function main() {
  const settings = readSettings();
  const results = [];
  // One at a time: on a 2-core machine, two servers at once would share cores and skew each other.
  for (const scenario of scenarios) results.push(await measure(scenario, settings));

  const rows = compare(results);
  const info = machine();
  console.log(markdown(rows, info, settings));
  writeJson(path.join(RESULTS, 'latest.json'), rows, info, settings);

  const failed = rows.filter((row) => row.failures > 0);
  if (failed.length > 0) {
    for (const row of failed) {
      console.error(
        `${row.name}: ${row.failures} failed requests (non-2xx ${row.non2xx}, errors ${row.errors}, ` +
          `timeouts ${row.timeouts}); status codes ${JSON.stringify(row.statusCodes)}`,
      );
    }
    process.exitCode = 1;
  }
}

main().catch((error) => {
  console.error(`bench failed: ${error.stack || error}`);
  process.exitCode = 1;
});

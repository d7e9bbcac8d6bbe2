'use strict';
// `npm run bench`: in each of BENCH_ROUNDS rounds, runs every scenario once, in order: starts its
// server in a child process, verifies its answer, loads it with autocannon from this process and
// stops it. Then prints a Markdown table of medians over the rounds and writes
// bench/results/latest.json (with every round's numbers). Exits 0 when the run completed, whether or not targets were met;
// non-zero on an error (a wrong answer, a failed request, a server that does not start).

const { execFileSync, fork } = require('node:child_process');
const os = require('node:os');
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

function positiveInteger(name, fallback) {
  const value = positiveNumber(name, fallback);
  if (!Number.isInteger(value)) throw new Error(`${name} must be a positive integer, got "${process.env[name]}"`);
  return value;
}

function readSettings() {
  return {
    // Rounds of the whole list: a scenario and its baseline are measured minutes apart at most, and
    // the median over rounds shrugs off one round disturbed by the machine's noise.
    rounds: positiveInteger('BENCH_ROUNDS', 3),
    connections: Math.round(positiveNumber('BENCH_CONNECTIONS', 50)),
    duration: positiveNumber('BENCH_DURATION', 10),
    warmup: positiveNumber('BENCH_WARMUP', 2),
    // Profiles each server with --cpu-prof into bench/results/profiles (slows them down).
    profile: process.env.BENCH_PROFILE === '1',
  };
}

/**
 * Pins the load generator to the last core and the servers to the first, when `taskset` is there
 * and the machine has two cores or more: without it the scheduler moves both between cores, and
 * that noise was larger than the differences measured.
 */
function pinning() {
  if (os.cpus().length < 2) return null;
  try {
    const load = String(os.cpus().length - 1);
    execFileSync('taskset', ['-pc', load, String(process.pid)], { stdio: 'ignore' });
    return { server: '0', load };
  } catch {
    return null;
  }
}

/** Forks `server.js <name>` (through `taskset` when pinned) and resolves once it reports its port. */
function startServer(name, settings) {
  const profile = settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS, 'profiles')}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
  const options = settings.pinned
    ? { execPath: 'taskset', execArgv: ['-c', settings.pinned.server, process.execPath, ...profile] }
    : { execArgv: profile };
  const child = fork(path.join(__dirname, 'server.js'), [name], { ...options, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
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

/**
 * What a scenario sends, built once per run (so tokens are signed before any load). With
 * `rotatingHeaders`, `nextHeaders()` hands out the sets round-robin; each server gets a fresh
 * rotation that starts at the first set and carries on through verification, warm-up and the
 * measured run, so no set comes back before all the others have been sent.
 */
function prepare(scenario) {
  const request = {
    method: scenario.method,
    headers: scenario.headers ? scenario.headers() : {},
    body: scenario.body === undefined ? undefined : JSON.stringify(scenario.body),
  };
  const rotating = scenario.rotatingHeaders ? scenario.rotatingHeaders() : undefined;
  const rotation = () => {
    if (rotating === undefined) return undefined;
    let next = 0;
    return () => {
      const headers = rotating[next];
      next = (next + 1) % rotating.length;
      return headers;
    };
  };
  return { scenario, request, rotation };
}

/** autocannon options for one load: with a rotation, each request is rebuilt with the next headers. */
function loadOptions(request, nextHeaders) {
  if (nextHeaders === undefined) return request;
  // setupRequest runs before every request of every connection (all share `nextHeaders`); the
  // request object it gets is already a merge of the defaults, so it returns a new one.
  return { ...request, requests: [{ setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...nextHeaders() } }) }] };
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

async function measure({ scenario, request, rotation }, settings, round) {
  const server = await startServer(scenario.name, settings);
  try {
    const url = `http://127.0.0.1:${server.port}${scenario.path}`;
    const nextHeaders = rotation();
    const first = nextHeaders === undefined ? request : { ...request, headers: { ...request.headers, ...nextHeaders() } };
    await verify(scenario, url, first);
    const options = loadOptions(request, nextHeaders);
    const load = (duration) => autocannon({ url, connections: settings.connections, duration, ...options });
    // Warm-up: lets V8 optimise the hot paths before measuring; its numbers are discarded.
    const warm = await load(settings.warmup);
    if (failuresOf(warm) > 0) throw new Error(`${scenario.name}: warm-up had failed requests ${JSON.stringify(warm.statusCodeStats)}`);
    const result = await load(settings.duration);
    const summary = {
      name: scenario.name,
      reqPerSec: result.requests.average,
      p99Ms: result.latency.p99,
      totalRequests: result.requests.total,
      statusCodes: result.statusCodeStats,
      non2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      failures: failuresOf(result),
    };
    console.error(
      `[round ${round}/${settings.rounds}] ${scenario.name}: ${Math.round(summary.reqPerSec)} req/s, p99 ${summary.p99Ms} ms`,
    );
    return summary;
  } finally {
    await server.stop();
  }
}

async function main() {
  const settings = { ...readSettings(), pinned: pinning() };
  const plans = scenarios.map(prepare);
  // rounds[r][i]: scenario i in round r. One at a time: on a 2-core machine, two servers at once
  // would share cores and skew each other.
  const rounds = [];
  for (let round = 1; round <= settings.rounds; round += 1) {
    const results = [];
    for (const plan of plans) results.push(await measure(plan, settings, round));
    rounds.push(results);
  }

  const rows = compare(scenarios, rounds);
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

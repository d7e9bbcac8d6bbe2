'use strict';
// `npm run bench`: measures each scenario against its baseline in interleaved A/B slices. For each
// (baseline, scenario) pair it starts both servers in child processes, verifies both answers, warms
// both up, then loads them in turn with autocannon from this process, BENCH_SLICES slice pairs of
// BENCH_SLICE seconds each, and stops them. Then prints a Markdown table of medians and writes
// bench/results/latest.json (with every slice's numbers). Exits 0 when the run completed, whether
// or not targets were met; non-zero on an error (a wrong answer, a failed request, a server that
// does not start).

const { execFileSync, fork } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const os = require('node:os');
const path = require('node:path');
const { isDeepStrictEqual } = require('node:util');
const autocannon = require('autocannon');
const { signRequest } = require('../dist/client');
const { bcmsClientSignature } = require('../dist/bcms/client/signature');
const { scenarios } = require('./scenarios');
const { positiveInteger, positiveNumber } = require('./env');
const { compare, machine, markdown, writeJson } = require('./report');

const RESULTS = path.join(__dirname, 'results');
// A server that deploys to itself (apps.js) also starts an embedded database and its isolates.
const SERVER_START_MS = 30_000;
/**
 * After the spinning clients of a load stop (see startSpinners): time for the last killed isolate's
 * replacement to start, so that it is not the next server's slice that pays for its start.
 */
const SPIN_SETTLE_MS = 1_000;

function readSettings() {
  // Replaced by BENCH_SLICES and BENCH_SLICE; say so rather than silently run something else.
  for (const gone of ['BENCH_ROUNDS', 'BENCH_DURATION']) {
    if (process.env[gone] !== undefined) throw new Error(`${gone} is no longer read: use BENCH_SLICES and BENCH_SLICE`);
  }
  const settings = {
    // Slice pairs per (baseline, scenario) pair. The machine's speed drifts over seconds to minutes
    // (a ratio measured minutes apart ranged 0.93–1.76); a slice of the scenario and one of its
    // baseline taken back to back see nearly the same machine, so their ratio cancels the drift.
    slices: positiveInteger('BENCH_SLICES', 12),
    // Server processes per scenario (and per baseline), one after the other, the slice pairs shared
    // out among them. A server process has a speed of its own (where V8 and the kernel put its code
    // and data): two processes of the very same app measured 0.97× and 1.07× each other over six
    // slice pairs, a bias no slicing cancels. Fresh pairs of processes average it out.
    processes: positiveInteger('BENCH_PROCESSES', 6),
    // Seconds per measured slice.
    slice: positiveNumber('BENCH_SLICE', 3),
    connections: Math.round(positiveNumber('BENCH_CONNECTIONS', 50)),
    // Seconds of discarded load per server before its first slice.
    warmup: positiveNumber('BENCH_WARMUP', 2),
    // Profiles each server with --cpu-prof into bench/results/profiles (slows them down).
    profile: process.env.BENCH_PROFILE === '1',
  };
  if (settings.processes % 2 !== 0 || settings.slices % (2 * settings.processes) !== 0) {
    throw new Error(
      `BENCH_PROCESSES (${settings.processes}) must be even, and BENCH_SLICES (${settings.slices}) a multiple of twice it: ` +
        'the schedule is mirrored between pairs of rounds, and each round takes an even number of slice pairs',
    );
  }
  return settings;
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
    // `all`: for the scenarios with `cores: 'all'` (a server whose isolates are to use every core).
    return { server: '0', load, all: `0-${load}` };
  } catch {
    return null;
  }
}

/**
 * Forks `server.js <name>` (through `taskset` when pinned) and resolves once it reports its port.
 * `profileName` names its --cpu-prof file: a baseline's server is started once per pair.
 */
function startServer(name, settings, profileName = name, cores = 'server') {
  const profile = settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(RESULTS, 'profiles')}`, `--cpu-prof-name=${profileName}.cpuprofile`] : [];
  const options = settings.pinned ? { execPath: 'taskset', execArgv: ['-c', settings.pinned[cores], process.execPath, ...profile] } : { execArgv: profile };
  // stdout to /dev/null: the servers' log lines are written (and paid for) but read by nobody. A pipe
  // read by this process would slow the servers with every line it has to carry.
  const child = fork(path.join(__dirname, 'server.js'), [name], { ...options, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
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
      resolve({ port: message.port, key: message.key, stop: () => stopServer(child) });
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
 * The path and query of a call signed as the BCMS client signs it (@becomes/cms-client: key, nonce,
 * timestamp, signature). The nonce is 8 random bytes rather than the client's 3: at thousands of
 * requests a second, two of the client's in one millisecond would share a nonce every few hours, and
 * the second would be refused as a replay; the cost is the same.
 */
function bcmsClientPath(path, key, body) {
  const nonce = randomBytes(8).toString('hex');
  const timestamp = String(Date.now());
  const signature = bcmsClientSignature({ secret: key.secret, nonce, timestamp, key: key.keyId, body: body ?? '{}' });
  return `${path}?key=${key.keyId}&nonce=${nonce}&timestamp=${timestamp}&signature=${signature}`;
}

/**
 * What a scenario sends, built once per run (so tokens are signed before any load). With
 * `rotatingHeaders`, `next()` hands out the sets round-robin; each server gets a fresh
 * rotation that starts at the first set and carries on through verification, warm-up and all of
 * its slices, so no set comes back before all the others have been sent. A rotation gives each
 * request what changes: `{ headers }`, or `{ path }` for a query-string signature.
 */
function prepare(scenario) {
  const request = {
    method: scenario.method,
    headers: scenario.headers ? scenario.headers() : {},
    body: scenario.body === undefined ? undefined : JSON.stringify(scenario.body),
  };
  const rotating = scenario.rotatingHeaders ? scenario.rotatingHeaders() : undefined;
  const rotation = (server) => {
    // Signed anew for every request, with the key the server made: a signature is accepted once.
    if (scenario.signed) return () => ({ headers: signRequest({ ...server.key, method: request.method, url: scenario.path, body: request.body }) });
    if (scenario.signedQuery) return () => ({ path: bcmsClientPath(scenario.path, server.key, request.body) });
    if (rotating === undefined) return undefined;
    let next = 0;
    return () => {
      const headers = rotating[next];
      next = (next + 1) % rotating.length;
      return { headers };
    };
  };
  return { scenario, request, rotation };
}

/** A request with what a rotation changes for it. */
function withChange(request, change) {
  const changed = { ...request, headers: { ...request.headers, ...change.headers } };
  if (change.path !== undefined) changed.path = change.path;
  return changed;
}

/** autocannon options for one load: with a rotation, each request is rebuilt with the next change. */
function loadOptions(request, next) {
  if (next === undefined) return request;
  // setupRequest runs before every request of every connection (all share `next`); the request
  // object it gets is already a merge of the defaults, so it returns a new one.
  return { ...request, requests: [{ setupRequest: (req) => withChange(req, next()) }] };
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
    throw new Error(`${scenario.name}: ${request.method} ${url} answered ${response.status} ${text}; ` + `expected 200 ${JSON.stringify(scenario.expect)}`);
  }
}

/**
 * `spinning.clients` clients that call `spinning.path` one call after another until stopped: a
 * deployed function that never returns, so each call is answered 504 at its time-out and its
 * isolate killed and replaced. They run in this process (beside autocannon; a few calls a second).
 * `stop()` waits for the calls under way to be answered, then SPIN_SETTLE_MS, and resolves to the
 * count of answers by status (`error`: no answer).
 */
function startSpinners(origin, spinning) {
  let running = true;
  const statuses = {};
  const count = (status) => (statuses[status] = (statuses[status] ?? 0) + 1);
  const client = async () => {
    while (running) {
      try {
        const response = await fetch(origin + spinning.path, { method: spinning.method, headers: { 'content-type': 'application/json' }, body: '{}' });
        await response.arrayBuffer();
        count(response.status);
      } catch {
        count('error');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
  const clients = Array.from({ length: spinning.clients }, client);
  return {
    stop: async () => {
      running = false;
      await Promise.all(clients);
      await new Promise((resolve) => setTimeout(resolve, SPIN_SETTLE_MS));
      return statuses;
    },
  };
}

/** Requests that did not end in a 2xx: non-2xx answers, connection errors and time-outs. */
function failuresOf(result) {
  return result.non2xx + result.errors + result.timeouts;
}

/** The numbers of one autocannon load that the report keeps. */
function summarize(result) {
  return {
    reqPerSec: result.requests.average,
    p99Ms: result.latency.p99,
    totalRequests: result.requests.total,
    statusCodes: result.statusCodeStats,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    failures: failuresOf(result),
    ...(result.spinning === undefined ? {} : { spinning: result.spinning }),
  };
}

/**
 * (baseline, scenario) plans in scenario order, one pair per scenario with a `baseline`. A scenario
 * that is neither would never be measured, so it is an error rather than a silently missing row.
 */
function pairsOf(plans) {
  const byName = new Map(plans.map((plan) => [plan.scenario.name, plan]));
  const pairs = plans
    .filter((plan) => plan.scenario.baseline !== undefined)
    .map((plan) => {
      const baseline = byName.get(plan.scenario.baseline);
      if (baseline === undefined) throw new Error(`${plan.scenario.name}: unknown baseline "${plan.scenario.baseline}"`);
      return { baseline, scenario: plan };
    });
  const paired = new Set(pairs.flatMap((pair) => [pair.baseline.scenario.name, pair.scenario.scenario.name]));
  const lone = plans.filter((plan) => !paired.has(plan.scenario.name)).map((plan) => plan.scenario.name);
  if (lone.length > 0) throw new Error(`scenarios in no pair (no baseline, and nobody's baseline): ${lone.join(', ')}`);
  return pairs;
}

/**
 * Starts a plan's server and verifies its answer; resolves to `{ name, load(seconds), stop() }`.
 * The server's header rotation (if any) lives as long as the server, so it carries on across
 * verification, warm-up and every slice.
 */
async function openServer({ scenario, request, rotation }, settings, profileName) {
  const server = await startServer(scenario.name, settings, profileName, scenario.cores === 'all' ? 'all' : 'server');
  try {
    const origin = `http://127.0.0.1:${server.port}`;
    const url = origin + scenario.path;
    const next = rotation(server);
    const first = next === undefined ? request : withChange(request, next());
    await verify(scenario, origin + (first.path ?? scenario.path), first);
    const options = loadOptions(request, next);
    let load = (duration) => autocannon({ url, connections: settings.connections, duration, ...options });
    if (scenario.spinning !== undefined) {
      // The spinning clients run only while this server is loaded (its warm-up and its slices), and
      // stop before the other server of the pair is: that one shares the core its isolates use.
      const plain = load;
      load = async (duration) => {
        const spinners = startSpinners(origin, scenario.spinning);
        let result;
        try {
          result = await plain(duration);
        } finally {
          const statuses = await spinners.stop();
          if (result !== undefined) result.spinning = statuses;
        }
        if (!result.spinning['504']) {
          throw new Error(`${scenario.name}: no call of ${scenario.spinning.path} ran past its time-out during the load (${JSON.stringify(result.spinning)})`);
        }
        return result;
      };
    }
    return { name: scenario.name, load, stop: server.stop };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/**
 * Measures one (baseline A, scenario B) pair in `settings.processes` rounds: each round starts
 * both servers (pinned to the same core, but only one under load at any time; the idle one just
 * waits on its socket), warms both up, takes its share of the slice pairs, and stops them.
 *
 * Where a slice falls in the schedule changes its speed by 5–10% here (a server measured right
 * after itself, or right after its warm-up, is faster: the core's caches hold its code and data).
 * So the schedule is the same for A and B: each round warms up last the server it measures first,
 * flips the order every slice pair, and every other round is the mirror image of the one before:
 * B A | A B B A, then A B | B A A B (warm-ups before the bar). Any effect of the position cancels
 * out. (A fixed schedule, A B | A B B A in every round, read the bare route as 1.05–1.07× a
 * second process of itself, and B A | A B B A as 0.94×.)
 */
async function measurePair(pair, settings, label) {
  const slices = [];
  const perProcess = settings.slices / settings.processes;
  for (let round = 0; round < settings.processes; round += 1) {
    const suffix = `.${round + 1}`;
    const open = [];
    try {
      open.push(await openServer(pair.baseline, settings, `${pair.baseline.scenario.name}.with-${pair.scenario.scenario.name}${suffix}`));
      open.push(await openServer(pair.scenario, settings, `${pair.scenario.scenario.name}${suffix}`));
      const [a, b] = open;
      // Warm-up: lets V8 optimise the hot paths before measuring; its numbers are discarded. The
      // server measured first in this round is warmed last (the schedule above).
      const [first, second] = round % 2 === 0 ? [a, b] : [b, a];
      for (const server of [second, first]) {
        const warm = await server.load(settings.warmup);
        if (failuresOf(warm) > 0) throw new Error(`${server.name}: warm-up had failed requests ${JSON.stringify(warm.statusCodeStats)}`);
      }
      for (let step = 0; step < perProcess; step += 1) {
        const index = slices.length;
        const order = step % 2 === 0 ? [first, second] : [second, first];
        const measured = new Map();
        for (const server of order) measured.set(server, summarize(await server.load(settings.slice)));
        const baseline = measured.get(a);
        const scenario = measured.get(b);
        const ratio = baseline.reqPerSec > 0 ? scenario.reqPerSec / baseline.reqPerSec : null;
        slices.push({ index, process: round + 1, first: order[0].name, baseline, scenario, ratio });
        console.error(
          `[${label} slice ${index + 1}/${settings.slices}, processes ${round + 1}/${settings.processes}] ` +
            `${a.name} ${Math.round(baseline.reqPerSec)} req/s p99 ${baseline.p99Ms} ms, ` +
            `${b.name} ${Math.round(scenario.reqPerSec)} req/s p99 ${scenario.p99Ms} ms, ` +
            `ratio ${ratio === null ? '—' : ratio.toFixed(2)} (${order[0].name} first)` +
            (scenario.spinning === undefined ? '' : `; spinning calls by status ${JSON.stringify(scenario.spinning)}`),
        );
      }
    } finally {
      await Promise.all(open.map((server) => server.stop()));
    }
  }
  return { baseline: pair.baseline.scenario.name, scenario: pair.scenario.scenario.name, slices };
}

async function main() {
  const settings = { ...readSettings(), pinned: pinning() };
  // BENCH_ONLY=plugin-get,function-post measures just those scenarios (each with its baseline).
  const only = (process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
  const runnable = scenarios.filter((scenario) => {
    if (scenario.optional && !only.includes(scenario.name)) return false;
    if (!scenario.needsDatabase || process.env.DATABASE_URL) return true;
    console.error(`${scenario.name}: skipped, DATABASE_URL is not set (it needs the Postgres server).`);
    return false;
  });
  const pairs = pairsOf(runnable.map(prepare)).filter((pair) => only.length === 0 || only.includes(pair.scenario.scenario.name));
  if (pairs.length === 0) throw new Error(`BENCH_ONLY="${process.env.BENCH_ONLY}" names no scenario with a baseline`);
  // One pair at a time: on a 2-core machine, a third or fourth server would only add contention.
  const measured = [];
  for (const [i, pair] of pairs.entries()) {
    measured.push(await measurePair(pair, settings, `pair ${i + 1}/${pairs.length}`));
  }

  const rows = compare(runnable, measured);
  const info = machine();
  if (measured.some((pair) => pair.scenario === 'function-cpu-deployed')) info.cpuCallMs = cpuCallMs();
  console.log(markdown(rows, info, settings));
  writeJson(path.join(RESULTS, 'latest.json'), rows, measured, info, settings);

  const failed = rows.filter((row) => row.failures > 0);
  if (failed.length > 0) {
    for (const row of failed) {
      console.error(`${row.name}: ${row.failures} failed requests (non-2xx ${row.non2xx}, errors ${row.errors}, ` + `timeouts ${row.timeouts}); status codes ${JSON.stringify(row.statusCodes)}`);
    }
    process.exitCode = 1;
  }
}

/** One call's work of the `cpu` function, timed in this process: median of 21 after 5 unmeasured. */
function cpuCallMs() {
  const { work } = require('./extensions/cpu-function');
  const times = [];
  for (let i = 0; i < 26; i += 1) {
    const started = performance.now();
    work(String(i));
    if (i >= 5) times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[10];
}

main().catch((error) => {
  console.error(`bench failed: ${error.stack || error}`);
  process.exitCode = 1;
});

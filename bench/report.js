'use strict';
// Turns measured scenarios into the Markdown table, the machine line and bench/results/latest.json.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { COLD_TOKENS, TOKEN_CACHE_CAPACITY } = require('./scenarios');

function machine() {
  const cpus = os.cpus();
  return {
    cpu: cpus[0] ? cpus[0].model : 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    date: new Date().toISOString(),
  };
}

/** The q-quantile (0 ≤ q ≤ 1) by linear interpolation between the closest ranks; null if empty. */
function quantile(values, q) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.ceil(position);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below);
}

/** Counts by key (`{ "504": 3 }`) added up. */
function mergeCounts(counts) {
  const merged = {};
  for (const each of counts) for (const [key, count] of Object.entries(each)) merged[key] = (merged[key] ?? 0) + count;
  return merged;
}

function median(values) {
  return quantile(values, 0.5);
}

function sum(values) {
  return values.reduce((total, value) => total + value, 0);
}

/** Status code counts of several slices added up, in autocannon's `{ "200": { count } }` shape. */
function mergeStatusCodes(results) {
  const merged = {};
  for (const result of results) {
    for (const [code, { count }] of Object.entries(result.statusCodes || {})) {
      merged[code] = { count: (merged[code] ? merged[code].count : 0) + count };
    }
  }
  return merged;
}

/**
 * One row per scenario from the measured pairs (`{ baseline, scenario, slices }`, see run.js).
 * A scenario's own slices are its B slices in its pair; a baseline's are its A slices in every
 * pair it took part in, pooled. req/s and p99 are medians over those slices. A scenario with a
 * baseline also gets its slice-pair ratios, their median and interquartile range, and whether the
 * median met the target (`met` is null without a baseline or without a target).
 */
function compare(scenarios, pairs) {
  return scenarios.map((scenario) => {
    const own = [];
    let ratios = null;
    for (const pair of pairs) {
      if (pair.scenario === scenario.name) {
        own.push(...pair.slices.map((slice) => slice.scenario));
        ratios = pair.slices.map((slice) => slice.ratio);
      } else if (pair.baseline === scenario.name) {
        own.push(...pair.slices.map((slice) => slice.baseline));
      }
    }
    // A null ratio is a slice whose baseline served nothing: no median is better than a skewed one.
    const ratio = ratios === null || ratios.includes(null) ? null : median(ratios);
    // A latency target (p99TargetMs) is held against the worst slice's p99: the p99 of the whole
    // measurement is no higher than that (each slice has at most 1% of its requests above it).
    const p99WorstMs = own.length === 0 ? null : Math.max(...own.map((result) => result.p99Ms));
    const spun = own.filter((result) => result.spinning !== undefined);
    let met = ratio === null || scenario.target === undefined ? null : ratio >= scenario.target;
    if (scenario.p99TargetMs !== undefined && p99WorstMs !== null) met = p99WorstMs < scenario.p99TargetMs && met !== false;
    return {
      name: scenario.name,
      baseline: scenario.baseline,
      target: scenario.target,
      slices: own.length,
      reqPerSec: median(own.map((result) => result.reqPerSec)),
      p99Ms: median(own.map((result) => result.p99Ms)),
      p99WorstMs,
      p99TargetMs: scenario.p99TargetMs,
      cores: scenario.cores,
      spinning: spun.length === 0 ? undefined : mergeCounts(spun.map((result) => result.spinning)),
      ratio,
      ratioP25: ratio === null ? null : quantile(ratios, 0.25),
      ratioP75: ratio === null ? null : quantile(ratios, 0.75),
      ratios,
      met,
      totalRequests: sum(own.map((result) => result.totalRequests)),
      statusCodes: mergeStatusCodes(own),
      non2xx: sum(own.map((result) => result.non2xx)),
      errors: sum(own.map((result) => result.errors)),
      timeouts: sum(own.map((result) => result.timeouts)),
      failures: sum(own.map((result) => result.failures)),
    };
  });
}

function markdown(rows, info, settings) {
  const fixed = (value, digits) => (value === null || value === undefined ? '—' : value.toFixed(digits));
  const n = settings.slices;
  const lines = [
    `| scenario | req/s (median of its slices) | p99 latency ms (median of its slices) | ratio to baseline (median of ${n} slice pairs) | ratio IQR (25th–75th percentile) | target | met? |`,
    '|---|--:|--:|--:|--:|--:|---|',
  ];
  for (const row of rows) {
    const targets = [];
    if (row.target !== undefined) targets.push(`>= ${row.target} × ${row.baseline}`);
    if (row.p99TargetMs !== undefined) targets.push(`p99 < ${row.p99TargetMs} ms (worst slice: ${fixed(row.p99WorstMs, 1)})`);
    const target = targets.length === 0 ? '—' : targets.join('; ');
    const met = row.met === null ? '—' : row.met ? 'yes' : 'missed';
    const range = row.ratio === null ? '—' : `${fixed(row.ratioP25, 2)}–${fixed(row.ratioP75, 2)}`;
    const failed = row.failures > 0 ? ` (${row.failures} failed requests)` : '';
    lines.push(`| ${row.name}${failed} | ${fixed(row.reqPerSec, 0)} | ${fixed(row.p99Ms, 1)} | ${fixed(row.ratio, 3)} | ${range} | ${target} | ${met} |`);
  }
  // "baseline-get 24, baseline-post 8": how many slices each baseline row pools.
  const pooled = rows
    .filter((row) => row.baseline === undefined)
    .map((row) => `${row.name} ${row.slices}`)
    .join(', ');
  lines.push(
    '',
    `Machine: ${info.cpu}, ${info.cores} cores, ${info.memoryGiB} GiB, Node ${info.node}, ${info.date}`,
    '',
    `Each scenario ran alongside its baseline: both servers were up at once, each in its own process, and after a ` +
      `${settings.warmup} s warm-up each (discarded) autocannon (${settings.connections} connections, in the runner's process) ` +
      `loaded one at a time in ${n} slice pairs of ${settings.slice} s, alternating which went first (A B, B A, …). ` +
      `The pairs were shared out among ${settings.processes} pairs of server processes started one after the other ` +
      `(${n / settings.processes} slice pairs each), since each process has a speed of its own; each round warmed up last ` +
      'the server it measured first, and every other round was the mirror image of the one before (B A | A B B A, then ' +
      'A B | B A A B), so that neither server gained from where its slices fell.',
    `The ratio is the median over the ${n} pairs of scenario req/s ÷ baseline req/s within a pair, measured seconds apart so ` +
      "slow drifts of the machine's speed cancel out, and the IQR is the 25th–75th percentile of those ratios.",
    `req/s and p99 are medians over a row's own slices; a baseline row pools its slices from every pair it took part in (${pooled}).`,
    "The bcms-extensions scenarios log one pino line per request through the package's default logger (pino, to stdout, " +
      "written once per turn of the event loop), with each server's stdout on /dev/null, so formatting and writing each line is included; the baseline Express apps log nothing.",
    "A slice's req/s is the average of autocannon's per-second samples. plugin-get-guarded-cold is plugin-get-guarded's server sent " +
      `${COLD_TOKENS.toLocaleString('en-US')} distinct valid tokens round-robin, carried on across its warm-up and slices, more than its ` +
      `${TOKEN_CACHE_CAPACITY.toLocaleString('en-US')}-token verified-token cache (FIFO) holds, so every request misses it and ` +
      'is verified by express-jwt; autocannon rebuilds each of its requests to change the token, a little more work on the load side.',
  );
  lines.push(
    settings.pinned
      ? `Servers were pinned to core ${settings.pinned.server} and autocannon to core ${settings.pinned.load} (taskset), so neither competes with the other for a core.`
      : 'Processes were not pinned to cores (no taskset, or a single core).',
  );
  const measuredRows = rows.filter((row) => row.slices > 0);
  const deployed = measuredRows.filter((row) => /-deployed$|-while-spinning$/.test(row.name)).map((row) => row.name);
  if (deployed.length > 0) {
    lines.push(
      `${deployed.join(', ')}: each server deploys bench/extensions/*.js to itself at start (POST /api/extensions/deployments, signed ` +
        'with a deploy key it creates, on an embedded PGlite in .bcms/bench-<scenario> or a schema of DATABASE_URL), so that code runs in isolates ' +
        '(child processes, forked by the server and pinned where it is: an isolate inherits its cores). The baselines run the same ' +
        "handlers in the server's process.",
    );
  }
  const allCores = measuredRows.filter((row) => row.cores === 'all').map((row) => row.name);
  if (allCores.length > 0 && settings.pinned) {
    lines.push(
      `${allCores.join(' and ')} ran with their servers (and isolates) allowed on every core (${settings.pinned.all}), autocannon still on ` +
        `core ${settings.pinned.load}: at a few hundred requests a second it takes little of it.` +
        (info.cpuCallMs === undefined ? '' : ` One call's work of the cpu function took ${info.cpuCallMs.toFixed(2)} ms in the runner's process.`),
    );
  }
  for (const row of measuredRows.filter((each) => each.spinning !== undefined)) {
    lines.push(
      `${row.name}: p99 ${fixed(row.p99Ms, 1)} ms (median of its slices), ${fixed(row.p99WorstMs, 1)} ms in its worst slice (target: under ${row.p99TargetMs} ms). ` +
        `While it was loaded (warm-ups not counted), the spinning function's calls were answered ${JSON.stringify(row.spinning)} by status: ` +
        'a 504 is a call that ran past its time-out, its isolate killed and replaced; a 500 a call queued on that isolate behind it.',
    );
  }
  if (settings.profile) lines.push('Servers ran under --cpu-prof (BENCH_PROFILE): the numbers are slower than usual.');
  return lines.join('\n');
}

/** `pairs` holds every slice's numbers, in the order they were measured. */
function writeJson(file, rows, pairs, info, settings) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify({ machine: info, settings, scenarios: rows, pairs }, null, 2)}\n`);
}

module.exports = { compare, machine, markdown, writeJson };

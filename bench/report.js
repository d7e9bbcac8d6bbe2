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

function median(values) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function sum(values) {
  return values.reduce((total, value) => total + value, 0);
}

/** Status code counts of all rounds added up, in autocannon's `{ "200": { count } }` shape. */
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
 * One row per scenario from `rounds[r][i]` (scenario i measured in round r): the medians of req/s
 * and p99 over the rounds and, for a scenario with a baseline, the ratio of each round (against
 * the baseline measured in that same round), their median, min and max, and whether the median
 * met the target. `met` is null without a baseline or without a target.
 */
function compare(scenarios, rounds) {
  return scenarios.map((scenario, i) => {
    const own = rounds.map((results) => results[i]);
    const perRound = rounds.map((results) => {
      const result = results[i];
      let ratio = null;
      if (scenario.baseline !== undefined) {
        const baseline = results.find((candidate) => candidate.name === scenario.baseline);
        ratio = baseline && baseline.reqPerSec > 0 ? result.reqPerSec / baseline.reqPerSec : null;
      }
      return { ...result, ratio };
    });
    const ratios = perRound.map((result) => result.ratio).filter((ratio) => ratio !== null);
    const ratio = ratios.length === perRound.length ? median(ratios) : null;
    return {
      name: scenario.name,
      baseline: scenario.baseline,
      target: scenario.target,
      reqPerSec: median(own.map((result) => result.reqPerSec)),
      p99Ms: median(own.map((result) => result.p99Ms)),
      ratio,
      ratioMin: ratio === null ? null : Math.min(...ratios),
      ratioMax: ratio === null ? null : Math.max(...ratios),
      met: ratio === null || scenario.target === undefined ? null : ratio >= scenario.target,
      totalRequests: sum(own.map((result) => result.totalRequests)),
      statusCodes: mergeStatusCodes(own),
      non2xx: sum(own.map((result) => result.non2xx)),
      errors: sum(own.map((result) => result.errors)),
      timeouts: sum(own.map((result) => result.timeouts)),
      failures: sum(own.map((result) => result.failures)),
      rounds: perRound.map(({ name, ...result }) => result),
    };
  });
}

function markdown(rows, info, settings) {
  const fixed = (value, digits) => (value === null || value === undefined ? '—' : value.toFixed(digits));
  const n = settings.rounds;
  const lines = [
    `| scenario | req/s (median of ${n}) | p99 latency ms (median of ${n}) | ratio to baseline (median of ${n}) | ratio range (min–max of ${n}) | target | met? |`,
    '|---|--:|--:|--:|--:|--:|---|',
  ];
  for (const row of rows) {
    const target = row.target === undefined ? '—' : `>= ${row.target.toFixed(1)} × ${row.baseline}`;
    const met = row.met === null ? '—' : row.met ? 'yes' : 'missed';
    const range = row.ratio === null ? '—' : `${fixed(row.ratioMin, 2)}–${fixed(row.ratioMax, 2)}`;
    const failed = row.failures > 0 ? ` (${row.failures} failed requests)` : '';
    lines.push(
      `| ${row.name}${failed} | ${fixed(row.reqPerSec, 0)} | ${fixed(row.p99Ms, 1)} | ${fixed(row.ratio, 2)} | ${range} | ${target} | ${met} |`,
    );
  }
  lines.push(
    '',
    `Machine: ${info.cpu}, ${info.cores} cores, ${info.memoryGiB} GiB, Node ${info.node}, ${info.date}`,
    '',
    `Each server ran alone in its own process, one scenario at a time; autocannon ran in the runner's process ` +
      `(${settings.connections} connections, ${settings.duration} s measured after a ${settings.warmup} s warm-up whose result is discarded).`,
    `The whole list ran ${n} times in a row (rounds), each round running every scenario once in order, so a scenario and its baseline ` +
      'were measured close in time; req/s and p99 are medians over the rounds, and the ratio is the median of the per-round ratios ' +
      "(scenario req/s ÷ its baseline's req/s in the same round), with their min–max as the range.",
    'The bcms-extensions scenarios log one pino line per request to a real pino logger writing to /dev/null ' +
      "(pino.destination('/dev/null')), so formatting and writing each line is included; the baseline Express apps log nothing.",
    "A round's req/s is the average of autocannon's per-second samples. plugin-get-guarded-cold is plugin-get-guarded's server sent " +
      `${COLD_TOKENS.toLocaleString('en-US')} distinct valid tokens round-robin, more than its ` +
      `${TOKEN_CACHE_CAPACITY.toLocaleString('en-US')}-token verified-token cache (FIFO) holds, so every request misses it and ` +
      'is verified by express-jwt; autocannon rebuilds each of its requests to change the token, a little more work on the load side.',
  );
  lines.push(
    settings.pinned
      ? `Servers were pinned to core ${settings.pinned.server} and autocannon to core ${settings.pinned.load} (taskset), so neither competes with the other for a core.`
      : 'Processes were not pinned to cores (no taskset, or a single core).',
  );
  if (settings.profile) lines.push('Servers ran under --cpu-prof (BENCH_PROFILE): the numbers are slower than usual.');
  return lines.join('\n');
}

function writeJson(file, rows, info, settings) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify({ machine: info, settings, scenarios: rows }, null, 2)}\n`);
}

module.exports = { compare, machine, markdown, writeJson };

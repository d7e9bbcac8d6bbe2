'use strict';
// Turns measured scenarios into the Markdown table, the machine line and bench/results/latest.json.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

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

/** Adds `ratio` and `met` to each scenario that names a baseline. */
function compare(results) {
  const byName = new Map(results.map((result) => [result.name, result]));
  return results.map((result) => {
    if (result.baseline === undefined) return { ...result, ratio: null, met: null };
    const baseline = byName.get(result.baseline);
    const ratio = baseline && baseline.reqPerSec > 0 ? result.reqPerSec / baseline.reqPerSec : null;
    return { ...result, ratio, met: ratio === null ? null : ratio >= result.target };
  });
}

function markdown(rows, info, settings) {
  const fixed = (value, digits) => (value === null || value === undefined ? '—' : value.toFixed(digits));
  const lines = [
    '| scenario | req/s (avg) | p99 latency ms | ratio to baseline | target | met? |',
    '|---|--:|--:|--:|--:|---|',
  ];
  for (const row of rows) {
    const target = row.target === undefined ? '—' : `>= ${row.target.toFixed(1)} × ${row.baseline}`;
    const met = row.met === null ? '—' : row.met ? 'yes' : 'missed';
    const failed = row.failures > 0 ? ` (${row.failures} failed requests)` : '';
    lines.push(`| ${row.name}${failed} | ${fixed(row.reqPerSec, 0)} | ${fixed(row.p99Ms, 1)} | ${fixed(row.ratio, 2)} | ${target} | ${met} |`);
  }
  lines.push(
    '',
    `Machine: ${info.cpu}, ${info.cores} cores, ${info.memoryGiB} GiB, Node ${info.node}, ${info.date}`,
    '',
    `Each server ran alone in its own process, one scenario at a time; autocannon ran in the runner's process ` +
      `(${settings.connections} connections, ${settings.duration} s measured after a ${settings.warmup} s warm-up whose result is discarded).`,
    'The bcms-extensions scenarios log one pino line per request to a real pino logger writing to /dev/null ' +
      "(pino.destination('/dev/null')), so formatting and writing each line is included; the baseline Express apps log nothing.",
    'req/s is the average of autocannon\'s per-second samples; ratio = scenario req/s ÷ its baseline\'s req/s.',
  );
  if (settings.profile) lines.push('Servers ran under --cpu-prof (BENCH_PROFILE): the numbers are slower than usual.');
  return lines.join('\n');
}

function writeJson(file, rows, info, settings) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify({ machine: info, settings, scenarios: rows }, null, 2)}\n`);
}

module.exports = { compare, machine, markdown, writeJson };

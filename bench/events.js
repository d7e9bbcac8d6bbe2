'use strict';
// `npm run bench`, events (issue 34), on the Postgres server of DATABASE_URL, each schema of its own:
// 1. entry writes a second (the host's repo, 8 at a time; then over HTTP, the SDK's route) with one
//    ENTRY/ALL handler subscribed, against none: the trigger's outbox rows and the deliveries share
//    the database (and the cores) with the writes;
// 2. commit to handler start, p50 and p99, at 100 writes a second: the handler on the writing instance,
//    then on another instance (a second process) while the writer serves none;
// 3. a backlog of 10,000 undelivered events drained by one instance to a handler that does nothing.
// Absolute numbers are noisy here: each line gives the ratio or times of one run.

const { fork } = require('node:child_process');
const autocannon = require('autocannon');
const express = require('express');
const jwt = require('jsonwebtoken');
const knexFactory = require('knex');
const { bcmsExtensions, createBcmsEvent } = require('..');

const quiet = require('pino')({ level: 'silent' });
const WRITE_SECONDS = Number(process.env.BENCH_EVENTS_SECONDS || 2);
const WRITE_ROUNDS = Number(process.env.BENCH_EVENTS_ROUNDS || 7);
const LATENCY_WRITES = Number(process.env.BENCH_EVENTS_LATENCY_WRITES || 1000);
const BACKLOG = Number(process.env.BENCH_EVENTS_BACKLOG || 10_000);

async function schemaUrl(base, schema) {
  const admin = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
  await admin.raw('drop schema if exists ?? cascade', [schema]);
  await admin.raw('create schema ??', [schema]);
  await admin.destroy();
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Entry writes a second through the host's repo, 8 at a time, for `seconds`. */
async function writesFor(router, templateId, seconds) {
  let writes = 0;
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (Date.now() < end) {
        await router.repo.entry.add({ templateId, status: 'bench', meta: [{ lng: 'en', props: [] }] });
        writes += 1;
      }
    }),
  );
  return writes / seconds;
}

/**
 * Rounds of writes alternate: no handler recorded, then one ENTRY/ALL handler delivering as the
 * writes go (each round waits, untimed, for the deliveries left over). The machine is noisy: the
 * median of the rounds' ratios is given. `load(plain, templateId)` writes for WRITE_SECONDS through
 * `plain` (a router with no handler) and resolves to its writes a second.
 */
async function writesWithAndWithout(url, load) {
  const secret = 'bench-secret-with-enough-length-123';
  const plain = bcmsExtensions({}, { database: url, logger: quiet, jwt: { secret } });
  await plain.ready;
  const [{ id: templateId }] = await plain.db('bcms_templates').insert({ name: 'writes' }).returning('id');
  let delivered = 0;
  const noop = createBcmsEvent(async () => ({
    name: 'bench-all-entries',
    config: { scope: 'ENTRY', method: 'ALL' },
    handler: async () => {
      delivered += 1;
    },
  }));
  const ratios = [];
  const lags = [];
  try {
    for (let round = 0; round < WRITE_ROUNDS; round++) {
      await plain.db('bcms_event_handlers').delete();
      const none = await load(plain, templateId, secret);
      const subscribed = bcmsExtensions({ events: [noop] }, { database: url, logger: quiet });
      await subscribed.ready;
      delivered = 0;
      const one = await load(plain, templateId, secret);
      lags.push(1 - delivered / (one * WRITE_SECONDS));
      while (delivered < one * WRITE_SECONDS) await sleep(20);
      await subscribed.close();
      ratios.push(one / none);
    }
  } finally {
    await plain.close();
  }
  return { ratio: percentile(ratios, 50), ratios, undeliveredAtRoundEnd: percentile(lags, 50) };
}

/** Through the host's repo, 8 writes at a time. */
const throughRepo = (plain, templateId) => writesFor(plain, templateId, WRITE_SECONDS);

/**
 * Over HTTP: the SDK's route a plugin UI writes an entry with
 * (`POST /api/extensions/templates/:id/entries`, an ADMIN token), 8 connections of autocannon.
 */
async function overHttp(plain, templateId, secret) {
  const server = express().use(plain).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const token = jwt.sign({ userId: 'bench', rls: [{ name: 'ADMIN', permissions: [{ name: 'READ' }, { name: 'WRITE' }] }] }, secret, { algorithm: 'HS256', expiresIn: '1h' });
  try {
    const result = await autocannon({
      url: `http://127.0.0.1:${server.address().port}/api/extensions/templates/${templateId}/entries`,
      method: 'POST',
      connections: 8,
      duration: WRITE_SECONDS,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ meta: [{ lng: 'en', props: [] }] }),
    });
    if (result.non2xx > 0) throw new Error(`bench/events.js: ${result.non2xx} writes over HTTP were refused`);
    return result['2xx'] / WRITE_SECONDS;
  } finally {
    server.close();
  }
}

/** Writes at `rate` a second; `started` maps an entry id to its handler's start (ms since epoch), filled by whoever handles it. */
async function commitToStart(router, started, rate) {
  const [{ id: templateId }] = await router
    .db('bcms_templates')
    .insert({ name: `lat${Date.now()}` })
    .returning('id');
  const committed = new Map();
  const gap = 1000 / rate;
  const begin = Date.now();
  const writes = [];
  for (let i = 0; i < LATENCY_WRITES; i++) {
    const due = begin + i * gap;
    const wait = due - Date.now();
    if (wait > 0) await sleep(wait);
    writes.push(router.repo.entry.add({ templateId }).then((entry) => committed.set(entry._id, Date.now())));
  }
  await Promise.all(writes);
  const deadline = Date.now() + 30_000;
  while ((await started()).size < LATENCY_WRITES && Date.now() < deadline) await sleep(100);
  const starts = await started();
  // A handler may start before the writer has seen its commit's answer: that counts as 0 ms.
  const latencies = [...committed].filter(([id]) => starts.has(id)).map(([id, at]) => Math.max(0, starts.get(id) - at));
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), delivered: latencies.length };
}

async function main() {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('bench/events.js needs DATABASE_URL (the Postgres server)');
  const results = {};

  // 1. Writes a second, with and without a handler.
  const urlW = await schemaUrl(base, 'bcms_bench_events_writes');
  results.writes = await writesWithAndWithout(urlW, throughRepo);
  console.log(
    `events: entry writes a second, one ENTRY/ALL handler vs none: ${results.writes.ratio.toFixed(2)}x, the median of ${WRITE_ROUNDS} rounds ` +
      `(${results.writes.ratios.map((r) => r.toFixed(2)).join(', ')}; at a round's end ${(results.writes.undeliveredAtRoundEnd * 100).toFixed(0)}% of its writes were still to be delivered; target >= 0.85x)`,
  );

  const urlH = await schemaUrl(base, 'bcms_bench_events_http_writes');
  results.httpWrites = await writesWithAndWithout(urlH, overHttp);
  console.log(
    `events: entry writes a second over HTTP (the SDK's route), one ENTRY/ALL handler vs none: ${results.httpWrites.ratio.toFixed(2)}x, the median of ${WRITE_ROUNDS} rounds ` +
      `(${results.httpWrites.ratios.map((r) => r.toFixed(2)).join(', ')}; target >= 0.85x)`,
  );

  // 2a. Commit to handler start, the handler on the writing instance.
  const urlL = await schemaUrl(base, 'bcms_bench_events_latency');
  const startedHere = new Map();
  const timer = createBcmsEvent(async () => ({
    name: 'bench-latency',
    config: { scope: 'ENTRY', method: 'ADD' },
    handler: async ({ payload }) => void startedHere.set(payload._id, Date.now()),
  }));
  const writer = bcmsExtensions({ events: [timer] }, { database: urlL, logger: quiet });
  await writer.ready;
  results.latencyOneInstance = await commitToStart(writer, async () => startedHere, 100);
  await writer.close();
  console.log(
    `events: commit to handler start at 100 writes/s, one instance: p50 ${results.latencyOneInstance.p50} ms, p99 ${results.latencyOneInstance.p99} ms (${results.latencyOneInstance.delivered} delivered; target p99 < 100 ms)`,
  );

  // 2b. Across two instances: the handler in a second process, which reports its start times at the end.
  const urlL2 = await schemaUrl(base, 'bcms_bench_events_latency2');
  const peer = fork(__filename, ['peer', urlL2], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  await new Promise((resolve) => peer.once('message', resolve));
  const plain = bcmsExtensions({}, { database: urlL2, logger: quiet });
  await plain.ready;
  const startedThere = () =>
    new Promise((resolve) => {
      peer.once('message', (entries) => resolve(new Map(entries)));
      peer.send('report');
    });
  results.latencyTwoInstances = await commitToStart(plain, startedThere, 100);
  peer.kill();
  await plain.close();
  console.log(
    `events: commit to handler start at 100 writes/s, across two instances: p50 ${results.latencyTwoInstances.p50} ms, p99 ${results.latencyTwoInstances.p99} ms (${results.latencyTwoInstances.delivered} delivered)`,
  );

  // 3. A backlog: events recorded while no instance serves the handler, then one starts.
  const urlB = await schemaUrl(base, 'bcms_bench_events_backlog');
  let handled = 0;
  const counter = createBcmsEvent(async () => ({
    name: 'bench-backlog',
    config: { scope: 'BENCH', method: 'ALL' },
    handler: async () => {
      handled += 1;
    },
  }));
  const first = bcmsExtensions({}, { database: urlB, logger: quiet });
  await first.ready;
  await first.db('bcms_event_handlers').insert({ name: 'bench-backlog', scope: 'BENCH', method: 'ALL', source: 'registry' });
  await first.db.raw(`select bcms_emit_event('BENCH', 'TICK', jsonb_build_object('n', g)) from generate_series(1, ?) g`, [BACKLOG]);
  await first.close();
  const began = Date.now();
  const drainer = bcmsExtensions({ events: [counter] }, { database: urlB, logger: quiet });
  await drainer.ready;
  while (handled < BACKLOG) await sleep(10);
  const handledIn = Date.now() - began;
  // Recorded, too: the last outcomes are written within a moment.
  for (let i = 0; i < 100; i++) {
    const [{ count }] = await drainer.db('bcms_event_deliveries').where({ status: 'delivered' }).count({ count: '*' });
    if (Number(count) === BACKLOG) break;
    await sleep(50);
  }
  const recordedIn = Date.now() - began;
  await drainer.close();
  results.backlog = { events: BACKLOG, handledMs: handledIn, recordedMs: recordedIn, perSecond: BACKLOG / (recordedIn / 1000) };
  console.log(`events: a backlog of ${BACKLOG} drained (handled and recorded) in ${recordedIn} ms: ${results.backlog.perSecond.toFixed(0)} a second (target >= 1000)`);
  return results;
}

async function peer(url) {
  const started = new Map();
  const timer = createBcmsEvent(async () => ({
    name: 'bench-latency-peer',
    config: { scope: 'ENTRY', method: 'ADD' },
    handler: async ({ payload }) => void started.set(payload._id, Date.now()),
  }));
  const router = bcmsExtensions({ events: [timer] }, { database: url, logger: quiet });
  await router.ready;
  process.on('message', () => process.send([...started]));
  process.send('ready');
}

if (process.argv[2] === 'peer') {
  peer(process.argv[3]).catch((error) => {
    console.error(error);
    process.exit(1);
  });
} else if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}

module.exports = { main };

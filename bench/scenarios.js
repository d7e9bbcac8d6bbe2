'use strict';
// What each scenario requests, what it must answer, and which baseline it is held against.
// The runner and the servers (apps.js) both read this file, so the two cannot drift apart.

const jwt = require('jsonwebtoken');

const JWT_SECRET = 'bench-secret';
const BODY = { name: 'bench', items: [1, 2, 3] };
const JSON_TYPE = { 'content-type': 'application/json' };
/** functionTimeoutMs of the plugin-get-while-spinning server: each call of its `spin` function ends then. */
const SPIN_TIMEOUT_MS = 1000;
/** How many clients keep calling `spin` while plugin-get-while-spinning is loaded (run.js). */
const SPIN_CLIENTS = 4;

/** What the `cpu` function answers to BODY, worked out once, when first asked (5 ms, in the runner only). */
let cpuAnswer;
function cpuExpect() {
  cpuAnswer ??= { success: true, result: require('./extensions/cpu-function').work(JSON.stringify(BODY)) };
  return cpuAnswer;
}

/**
 * A BCMS-shaped token the guard accepts: ADMIN holds READ. Signed once per run and valid for an
 * hour: a run longer than that would see its guarded requests answered 401 (counted as failures).
 */
function bearerHeaders(userId = 'u1') {
  const payload = { userId, rls: [{ name: 'ADMIN', permissions: [{ name: 'READ' }] }] };
  const token = jwt.sign(payload, JWT_SECRET, { algorithm: 'HS256', expiresIn: '1h' });
  return { authorization: `Bearer ${token}` };
}

/**
 * How many distinct tokens plugin-get-guarded-cold cycles through. The router's verified-token
 * cache (lib/security/token-cache.ts) holds 10,000 tokens and evicts the oldest insertion first
 * (FIFO: a hit does not refresh an entry). Sent round-robin, a token comes back only after the
 * 19,999 others; each of those misses and is inserted, so by then at least 10,000 insertions have
 * pushed it out and it misses again: every request is verified by express-jwt. The 50 connections
 * can reorder requests by a few dozen places at most, far less than the 10,000 margin.
 */
const COLD_TOKENS = 20_000;
// A copy of TOKEN_CACHE_SIZE in lib/security/jwt.ts (not exported): keep the two in step.
const TOKEN_CACHE_CAPACITY = 10_000;
if (COLD_TOKENS <= TOKEN_CACHE_CAPACITY) throw new Error('COLD_TOKENS must exceed the token cache capacity');

/** `count` header sets, each with a different valid token (userId u0, u1, …). */
function distinctBearerHeaders(count) {
  const headers = Array.from({ length: count }, (_, i) => bearerHeaders(`u${i}`));
  if (new Set(headers.map((h) => h.authorization)).size !== count) throw new Error('signed tokens are not distinct');
  return headers;
}

/**
 * In run order; `baseline` and `target` make the ratio column (scenario req/s ÷ baseline req/s).
 * `headers` are signed once per run and sent with every request; `rotatingHeaders` are also signed
 * once per run, and each request carries the next set, round-robin (see run.js).
 */
const scenarios = [
  { name: 'baseline-get', method: 'GET', path: '/hello', expect: { message: 'Hello' } },
  {
    // The most any middleware mounted in Express can do: an app.use that only writes its answer
    // (Content-Type and Content-Length). No target: it shows how close the router comes to it.
    name: 'express-use-ceiling',
    method: 'GET',
    path: '/hello',
    expect: { message: 'Hello' },
    baseline: 'baseline-get',
  },
  {
    // The ceiling doing only what every answer of the router must do (#12's constraints): an async
    // handler, Access-Control-Allow-Origin and X-Request-Id, the default logger's line; no routing,
    // no context, no error handling. No target: a router that must do these comes no nearer the ceiling.
    name: 'express-use-constrained',
    method: 'GET',
    path: '/hello',
    expect: { message: 'Hello' },
    baseline: 'baseline-get',
  },
  // What each of the three costs: the constrained app without one, against the bare ceiling. Run
  // only when BENCH_ONLY names them (`optional`), not in a full `npm run bench`.
  ...['log', 'headers', 'async'].map((part) => ({
    name: `constrained-without-${part}`,
    method: 'GET',
    path: '/hello',
    expect: { message: 'Hello' },
    baseline: 'express-use-ceiling',
    optional: true,
  })),
  {
    // The bare route against a second process of itself: what the bench reads when there is no
    // difference at all. No target: a ratio elsewhere that differs from 1 by less than this row's
    // spread is not a difference.
    name: 'baseline-get-again',
    method: 'GET',
    path: '/hello',
    expect: { message: 'Hello' },
    baseline: 'baseline-get',
  },
  {
    name: 'plugin-get',
    method: 'GET',
    path: '/api/plugin/bench/hello/world',
    expect: { message: 'Hello' },
    baseline: 'baseline-get',
    target: 1.2,
  },
  {
    name: 'plugin-get-guarded',
    method: 'GET',
    path: '/api/plugin/bench/hello/world',
    headers: bearerHeaders,
    expect: { message: 'Hello' },
    baseline: 'baseline-get',
    target: 1.1,
  },
  {
    // Same server as plugin-get-guarded, but no request's token is in the cache: what a miss costs.
    // No target: it is here to be reported, not to pass.
    name: 'plugin-get-guarded-cold',
    method: 'GET',
    path: '/api/plugin/bench/hello/world',
    rotatingHeaders: () => distinctBearerHeaders(COLD_TOKENS),
    expect: { message: 'Hello' },
    baseline: 'baseline-get',
  },
  {
    name: 'baseline-post',
    method: 'POST',
    path: '/echo',
    headers: () => JSON_TYPE,
    body: BODY,
    expect: { success: true, result: BODY },
  },
  {
    name: 'function-post',
    method: 'POST',
    path: '/api/function/echo',
    headers: () => JSON_TYPE,
    body: BODY,
    expect: { success: true, result: BODY },
    baseline: 'baseline-post',
    target: 1.15,
  },
  {
    // A private function called with an HTTP Signature (hmac-sha256, Digest, X-Bcms-Nonce): each
    // request is signed anew with the key the server created (run.js), so none is a replay, and
    // each is remembered in the Postgres server of DATABASE_URL (skipped without one).
    name: 'function-post-signed',
    method: 'POST',
    path: '/api/function/echo-private',
    headers: () => JSON_TYPE,
    signed: true,
    needsDatabase: true,
    body: BODY,
    expect: { success: true, result: BODY },
    baseline: 'baseline-post',
    target: 0.6,
  },
  {
    // The same private function called as the BCMS client calls it (@becomes/cms-client): key,
    // nonce, timestamp and an HMAC over them and the body in the query string, signed anew for
    // every request with a key the server created with bcmsClient: true (run.js), each remembered
    // in the Postgres server of DATABASE_URL as the row above. No target: it is reported beside
    // the HTTP Signature row, which it is measured against in docs/benchmark.md.
    name: 'function-post-bcms-client',
    method: 'POST',
    path: '/api/function/echo-private',
    headers: () => JSON_TYPE,
    signedQuery: true,
    needsDatabase: true,
    body: BODY,
    expect: { success: true, result: BODY },
    baseline: 'baseline-post',
  },
  // Deployed code: bench/extensions/*.js deployed by the server to itself at start (apps.js), so it
  // runs in isolates (child processes), each call crossing to one and back. Held against the same
  // handler in the registry, in the server's process.
  {
    name: 'plugin-get-deployed',
    method: 'GET',
    path: '/api/plugin/bench/hello/world',
    expect: { message: 'Hello' },
    baseline: 'plugin-get',
    target: 0.8,
  },
  {
    name: 'function-post-deployed',
    method: 'POST',
    path: '/api/function/echo',
    headers: () => JSON_TYPE,
    body: BODY,
    expect: { success: true, result: BODY },
    baseline: 'function-post',
    target: 0.8,
  },
  {
    // About 5 ms of CPU a call (bench/extensions/cpu-function.js), in the server's process: one
    // core's worth at most. `cores: 'all'`: its server, and whatever it starts, may run on every
    // core (pinned, they would share the one core of the servers; autocannon keeps its own).
    name: 'function-cpu',
    method: 'POST',
    path: '/api/function/cpu',
    headers: () => JSON_TYPE,
    body: BODY,
    get expect() {
      return cpuExpect();
    },
    cores: 'all',
  },
  {
    // The same function deployed: its pool grows to one isolate per core while every one is busy.
    name: 'function-cpu-deployed',
    method: 'POST',
    path: '/api/function/cpu',
    headers: () => JSON_TYPE,
    body: BODY,
    get expect() {
      return cpuExpect();
    },
    baseline: 'function-cpu',
    target: 1.5,
    cores: 'all',
  },
  {
    // plugin-get's registry plugin on a server that also has a deployed function that never
    // returns (`while (true) {}`), with functionTimeoutMs 1000. While it is loaded, SPIN_CLIENTS
    // clients of the runner keep calling that function: each call is answered 504 after a second
    // and its isolate killed and replaced, over and over, during the measurement. The target is
    // the GET's p99 latency (its worst slice), not a ratio: the service's event loop must not wait
    // on deployed code.
    name: 'plugin-get-while-spinning',
    method: 'GET',
    path: '/api/plugin/bench/hello/world',
    expect: { message: 'Hello' },
    baseline: 'plugin-get',
    p99TargetMs: 100,
    spinning: { method: 'POST', path: '/api/function/spin', clients: SPIN_CLIENTS },
  },
];

module.exports = { COLD_TOKENS, JWT_SECRET, SPIN_TIMEOUT_MS, TOKEN_CACHE_CAPACITY, scenarios };

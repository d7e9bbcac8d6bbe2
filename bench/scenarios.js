'use strict';
// What each scenario requests, what it must answer, and which baseline it is held against.
// The runner and the servers (apps.js) both read this file, so the two cannot drift apart.

const jwt = require('jsonwebtoken');

const JWT_SECRET = 'bench-secret';
const BODY = { name: 'bench', items: [1, 2, 3] };
const JSON_TYPE = { 'content-type': 'application/json' };

/** A BCMS-shaped token the guard accepts: ADMIN holds READ. Signed once per run. */
function bearerHeaders() {
  const payload = { userId: 'u1', rls: [{ name: 'ADMIN', permissions: [{ name: 'READ' }] }] };
  const token = jwt.sign(payload, JWT_SECRET, { algorithm: 'HS256', expiresIn: '1h' });
  return { authorization: `Bearer ${token}` };
}

/** In run order; `baseline` and `target` make the ratio column (scenario req/s ÷ baseline req/s). */
const scenarios = [
  { name: 'baseline-get', method: 'GET', path: '/hello', expect: { message: 'Hello' } },
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
    target: 1.0,
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
    target: 1.1,
  },
];

module.exports = { JWT_SECRET, scenarios };

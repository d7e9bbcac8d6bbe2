import type { Knex } from 'knex';
import request from 'supertest';
import { createBcmsFunction, type BcmsExtensionsOptions } from '../../lib';
import { resolveOptions } from '../../lib/options';
import { buildApp, freePort, role, signToken, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { hmacKey, signedPost } from '../support/signature';
import { until } from '../support/wait';

// Rate limits of function calls (DESIGN.md "Sandbox": `rateLimit`): 429 RATE_LIMITED with
// Retry-After, counted in Postgres so that every instance on the database shares the count. Two
// routers on one database play two instances. On PGlite, and on the Postgres server when
// DATABASE_URL is set. (The BCMS client's signed calls: test/bcms/client-limits.test.ts.)

const echo = createBcmsFunction(async () => ({
  config: { name: 'echo', public: false },
  handler: async ({ request }) => request.body,
}));
const hello = createBcmsFunction(async () => ({
  config: { name: 'hello', public: true },
  handler: async () => 'hello',
}));
const registry = { functions: [echo, hello] };

/** A window long enough that a test's calls all fall in it (see freshWindow). */
const HOUR = 3600;

/**
 * Waits, by the database's clock (which cuts the windows), until the window of `seconds` under
 * way has at least `needSeconds` left: the calls that follow then share one window, whatever the
 * machine's load. With hour-long windows it waits only in the last `needSeconds` of an hour.
 */
async function freshWindow(knex: Knex, seconds: number, needSeconds: number): Promise<void> {
  const result = (await knex.raw('select extract(epoch from clock_timestamp()) as now')) as { rows: { now: string | number }[] };
  const now = Number(result.rows[0]!.now);
  const left = seconds - (now % seconds);
  if (left < needSeconds) await new Promise((resolve) => setTimeout(resolve, left * 1000 + 100));
}

const ledgerRows = async (knex: Knex, keyId: string): Promise<number> => Number((await knex('bcms_signature_replays').where({ key_id: keyId }).count({ n: '*' }))[0]?.n);

/** The 429 of a function call, as DESIGN.md words it: the functions family's body, Retry-After in whole seconds. */
function expectLimited(res: request.Response, most: number): number {
  expect(res.status).toBe(429);
  expect(res.body).toEqual({ success: false, error: { code: 'RATE_LIMITED', message: expect.stringMatching(/^This (caller|address) made more than \d+ calls in \d+ s: retry in \d+ s\.$/) } });
  const retryAfter = res.headers['retry-after'] as string;
  expect(retryAfter).toMatch(/^[1-9]\d*$/);
  expect(Number(retryAfter)).toBeLessThanOrEqual(most);
  expect(res.headers['access-control-expose-headers']).toContain('Retry-After'); // the router's CORS exposes it on every answer
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  return Number(retryAfter);
}

describe('the rateLimit option', () => {
  test('off by default; key and ip each { points, seconds } of positive integers, unknown keys refused', () => {
    expect(resolveOptions({}, {}).rateLimit).toBeUndefined();
    expect(resolveOptions({ rateLimit: { key: { points: 5, seconds: 1 } } }, {}).rateLimit).toEqual({ key: { points: 5, seconds: 1 } });
    const wrong: [unknown, RegExp][] = [
      [null, /^option rateLimit must be an object \{ key\?, ip\? \}$/],
      [{ user: { points: 1, seconds: 1 } }, /^unknown option "rateLimit.user" \(known: rateLimit.key, rateLimit.ip\)$/],
      [{ key: { points: 1, seconds: 1, burst: 2 } }, /^unknown option "rateLimit.key.burst"/],
      [{ key: { points: 0, seconds: 1 } }, /^option rateLimit.key.points must be a positive integer, got 0$/],
      [{ ip: { points: 1.5, seconds: 1 } }, /^option rateLimit.ip.points must be a positive integer, got 1.5$/],
      [{ ip: { points: 10 } }, /^option rateLimit.ip.seconds must be a positive integer of seconds, at most 86400, got undefined$/],
      [{ ip: { points: 10, seconds: '60' } }, /^option rateLimit.ip.seconds must be a positive integer/],
      [{ key: 100 }, /^option rateLimit.key must be an object \{ points, seconds \}$/],
    ];
    for (const [rateLimit, message] of wrong) expect(() => resolveOptions({ rateLimit } as BcmsExtensionsOptions, {})).toThrow(message);
  });
});

test('a count that cannot be reached: 503 DATABASE_UNAVAILABLE, never a call let through uncounted', async () => {
  // A Postgres server that is not there: a function that never touches the database answers 200 without a limit.
  const database = `postgres://postgres@127.0.0.1:${await freePort()}/none`;
  for (const [rateLimit, status] of [
    [undefined, 200],
    [{ ip: { points: 100, seconds: 60 } }, 503],
  ] as const) {
    const t = await buildApp(registry, { database, rateLimit });
    try {
      const res = await request(t.app).post('/api/function/hello');
      expect(res.status).toBe(status);
      if (status === 503) expect(res.body).toEqual({ success: false, error: { code: 'DATABASE_UNAVAILABLE', message: 'Database is unavailable; try again shortly.' } });
    } finally {
      await t.router.close();
    }
  }
}, 60_000);

describe.each(backends())('rate limits over HTTP (%s)', (backend) => {
  let database: TestDatabase;
  const started: TestApp[] = [];
  /** An instance of the service on this test's database. */
  const instance = async (rateLimit: BcmsExtensionsOptions['rateLimit']) => {
    const t = await buildApp(registry, { database: database.knex, rateLimit });
    started.push(t);
    return t;
  };

  beforeAll(async () => {
    database = await openTestDatabase(backend);
  }, 60_000);
  afterAll(async () => {
    for (const t of started) await t.router.close();
    await database.close();
  });

  test('per API key: the calls past its points are 429 with Retry-After, on every instance; the signature ledger does not grow for them', async () => {
    const [a, b] = [await instance({ key: { points: 3, seconds: HOUR } }), await instance({ key: { points: 3, seconds: HOUR } })];
    const key = await hmacKey(database.knex, ['echo']);
    const other = await hmacKey(database.knex, ['echo']);
    await freshWindow(database.knex, HOUR, 60);
    // Two instances share the count: 2 calls on one, 1 on the other, then both refuse.
    for (const t of [a, b, a]) expect((await signedPost(t.app, '/api/function/echo', key, { n: 1 })).status).toBe(200);
    expect(await ledgerRows(database.knex, key.keyId)).toBe(3);
    expectLimited(await signedPost(b.app, '/api/function/echo', key, { n: 4 }), HOUR);
    for (let i = 0; i < 10; i++) expectLimited(await signedPost(i % 2 ? a.app : b.app, '/api/function/echo', key, { n: 5 + i }), HOUR);
    // Refused before the ledger recorded them: a flood leaves no rows behind.
    expect(await ledgerRows(database.knex, key.keyId)).toBe(3);
    // One row counts the key's window, whichever instance counted.
    const rows = await database
      .knex('bcms_rate_limits')
      .where({ kind: 'key', subject: `key:${key.keyId}` })
      .select('points');
    expect(rows).toHaveLength(1);
    expect(rows[0].points).toBeGreaterThan(3);
    // Another key has points of its own.
    expect((await signedPost(a.app, '/api/function/echo', other, { mine: true })).body).toEqual({ success: true, result: { mine: true } });
  });

  test("a bearer token's call of a private function counts as its user under key: every token of one user shares the count", async () => {
    const t = await instance({ key: { points: 2, seconds: HOUR } });
    const tokenOf = (userId: string) => signToken([role('ADMIN', 'EXECUTE')], { payload: { userId } });
    const call = (token: string) => request(t.app).post('/api/function/echo').set('Authorization', `Bearer ${token}`).send({ n: 1 });
    await freshWindow(database.knex, HOUR, 60);
    expect((await call(tokenOf('ada'))).status).toBe(200);
    expect((await call(tokenOf('ada'))).status).toBe(200);
    expectLimited(await call(tokenOf('ada')), HOUR);
    expect((await call(tokenOf('grace'))).status).toBe(200);
  });

  test("per IP (req.ip, as Express's trust proxy gives it): every call counts, public functions too, on every instance", async () => {
    const [a, b] = [await instance({ ip: { points: 4, seconds: HOUR } }), await instance({ ip: { points: 4, seconds: HOUR } })];
    for (const t of [a, b]) t.app.set('trust proxy', true);
    const from = (t: TestApp, address: string) => request(t.app).post('/api/function/hello').set('X-Forwarded-For', address);
    const key = await hmacKey(database.knex, ['echo']);
    await freshWindow(database.knex, HOUR, 60);
    expect((await from(a, '203.0.113.7')).status).toBe(200);
    expect((await from(b, '203.0.113.7')).status).toBe(200);
    // A private function's refusal counts as well: the address spent a point on it.
    expect((await request(a.app).post('/api/function/echo').set('X-Forwarded-For', '203.0.113.7').send({})).status).toBe(401);
    const forwardedFrom = (headers: Record<string, string>): void => {
      headers['X-Forwarded-For'] = '203.0.113.7';
    };
    expect((await signedPost(b.app, '/api/function/echo', key, { n: 1 }, { tamper: forwardedFrom })).status).toBe(200);
    const limited = await from(a, '203.0.113.7');
    expectLimited(limited, HOUR);
    expect(limited.body.error.message).toMatch(/^This address made more than 4 calls in 3600 s/);
    // Checked before the signature: a signed call from the address is refused, and recorded nowhere.
    const before = await ledgerRows(database.knex, key.keyId);
    expectLimited(await signedPost(b.app, '/api/function/echo', key, { n: 2 }, { tamper: forwardedFrom }), HOUR);
    expect(await ledgerRows(database.knex, key.keyId)).toBe(before);
    // Another address has points of its own.
    expect((await from(b, '203.0.113.8')).body).toEqual({ success: true, result: 'hello' });
  });

  test('the window ends: a refused caller is served again after Retry-After', async () => {
    const t = await instance({ key: { points: 1, seconds: 2 } });
    const key = await hmacKey(database.knex, ['echo']);
    // Calls until two land in one window (the first two, unless a window ends between them, as it may
    // again and again on a busy machine).
    let refused: request.Response | undefined;
    let i = 0;
    await until(async () => {
      const res = await signedPost(t.app, '/api/function/echo', key, { i: i++ });
      if (res.status === 429) refused = res;
      else expect(res.status).toBe(200);
      return refused !== undefined;
    }, 1);
    const wait = expectLimited(refused!, 2);
    await new Promise((resolve) => setTimeout(resolve, wait * 1000 + 100));
    expect((await signedPost(t.app, '/api/function/echo', key, { again: true })).body).toEqual({ success: true, result: { again: true } });
  });

  test('ended windows are purged by a later call; without the option no call is counted', async () => {
    await database.knex('bcms_rate_limits').insert({ kind: 'ip', subject: '192.0.2.1', window_start: new Date(Date.now() - 120_000), points: 9, expires_at: new Date(Date.now() - 60_000) });
    const t = await buildApp(registry, { database: database.knex, rateLimit: { ip: { points: 100, seconds: HOUR } } });
    expect((await request(t.app).post('/api/function/hello')).status).toBe(200);
    await t.router.close(); // waits for the purge under way
    expect(await database.knex('bcms_rate_limits').where({ subject: '192.0.2.1' })).toEqual([]);

    const counted = Number((await database.knex('bcms_rate_limits').count({ n: '*' }))[0]?.n);
    const off = await instance(undefined);
    for (let i = 0; i < 3; i++) expect((await request(off.app).post('/api/function/hello')).status).toBe(200);
    expect(Number((await database.knex('bcms_rate_limits').count({ n: '*' }))[0]?.n)).toBe(counted);
  });

  test('the OpenAPI document lists the 429 of function calls when the option is set, and not otherwise', async () => {
    const responsesOf = (t: TestApp) => (t.router.openapi().paths as Record<string, { post: { responses: Record<string, unknown> } }>)['/api/function/echo']!.post.responses;
    expect(responsesOf(await instance({ ip: { points: 1, seconds: 1 } }))['429']).toEqual({ $ref: '#/components/responses/RATE_LIMITED' });
    expect(responsesOf(await instance(undefined))['429']).toBeUndefined();
  });
});

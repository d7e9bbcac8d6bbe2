import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { createBcmsFunction } from '../../lib';
import { buildApp, role, signToken, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { listen, postHead, rawClient } from '../support/raw-http';
import { deploy, functionSource } from '../support/deploy';
import { hmacKey, signedPost } from '../support/signature';
import { until } from '../support/wait';

// Idempotent retries (issue 23, item 9): a function call with an Idempotency-Key runs once per
// key, caller and body; every instance on the database gives its outcome again for 24 h. On
// PGlite, and on the Postgres server when DATABASE_URL is set.

const runs = new Map<string, number>();
const ran = (name: string): number => runs.get(name) ?? 0;
const count = (name: string): number => {
  const n = ran(name) + 1;
  runs.set(name, n);
  return n;
};
let releaseSlow: () => void = () => {};

const counter = createBcmsFunction(async () => ({
  config: { name: 'counter', public: true },
  handler: async ({ request, idempotencyKey }) => ({ run: count('counter'), body: request.body, idempotencyKey: idempotencyKey ?? null }),
}));
const privateCounter = createBcmsFunction(async () => ({
  config: { name: 'private-counter', public: false },
  handler: async ({ request }) => ({ run: count('private-counter'), body: request.body }),
}));
const refuse = createBcmsFunction(async () => ({
  config: { name: 'refuse', public: true },
  handler: async ({ errorHandler }) => {
    throw errorHandler.occurred(409, `refused on run ${count('refuse')}`);
  },
}));
const crash = createBcmsFunction(async () => ({
  config: { name: 'crash', public: true },
  handler: async () => {
    if (count('crash') === 1) throw new Error('the first run breaks');
    return 'fine';
  },
}));
const slow = createBcmsFunction(async () => ({
  config: { name: 'slow', public: true },
  handler: async () => {
    count('slow');
    await new Promise<void>((resolve) => (releaseSlow = resolve));
    return 'done';
  },
}));
const registry = { functions: [counter, privateCounter, refuse, crash, slow] };

describe('Idempotency-Key on function calls', () => {
  let t: TestApp;
  let other: TestApp; // a second instance on the same database
  beforeAll(async () => {
    const { knex } = await sharedTestDatabase();
    t = await buildApp(registry, { database: knex });
    other = await buildApp(registry, { database: knex });
  }, 60_000);
  afterAll(async () => {
    await t.router.close();
    await other.router.close();
  });

  const call = (app: TestApp, name: string, key: string | undefined, body: unknown) => {
    const test = request(app.app).post(`/api/function/${name}`);
    return (key === undefined ? test : test.set('Idempotency-Key', key)).send(body as object);
  };

  test('the same key and body: the handler runs once, the second answer is the first (status, body), marked replayed', async () => {
    const key = randomUUID();
    const before = ran('counter');
    const first = await call(t, 'counter', key, { a: 1 });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ success: true, result: { run: before + 1, body: { a: 1 }, idempotencyKey: key } });
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const second = await call(t, 'counter', key, { a: 1 });
    expect(second.status).toBe(200);
    expect(second.text).toBe(first.text);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(second.headers['access-control-expose-headers']).toContain('Idempotent-Replayed');
    expect(ran('counter')).toBe(before + 1);
  });

  test('the same key with another body: 422 IDEMPOTENCY_KEY_REUSED, and the handler does not run', async () => {
    const key = randomUUID();
    await call(t, 'counter', key, { a: 1 }).expect(200);
    const before = ran('counter');
    const res = await call(t, 'counter', key, { a: 2 });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ success: false, error: { code: 'IDEMPOTENCY_KEY_REUSED', message: expect.stringContaining('another body') } });
    // The bytes count: the same JSON written otherwise is another body.
    const spaced = await request(t.app).post('/api/function/counter').set('Idempotency-Key', key).set('Content-Type', 'application/json').send('{ "a": 1 }');
    expect(spaced.status).toBe(422);
    expect(ran('counter')).toBe(before);
  });

  test('another function, or no key at all: runs as ever; the context has the key only when sent', async () => {
    const key = randomUUID();
    await call(t, 'counter', key, {}).expect(200);
    const before = ran('counter');
    const plain = await call(t, 'counter', undefined, {});
    expect(plain.body.result).toEqual({ run: before + 1, body: {}, idempotencyKey: null });
    const elsewhere = await signedPost(t.app, '/api/function/private-counter', await hmacKey(t.router.db, ['private-counter']), {}, { tamper: (headers) => (headers['Idempotency-Key'] = key) });
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.headers['idempotent-replayed']).toBeUndefined();
  });

  test('no header: no database round trip (with one: the claim and its outcome)', async () => {
    const queries: string[] = [];
    const onQuery = (query: { sql: string }) => queries.push(query.sql);
    t.router.db.on('query', onQuery);
    try {
      await call(t, 'counter', undefined, { a: 1 }).expect(200);
      expect(queries).toEqual([]);
      await call(t, 'counter', randomUUID(), { a: 1 }).expect(200);
      expect(queries.length).toBeGreaterThan(0);
    } finally {
      t.router.db.off('query', onQuery);
    }
  });

  test('a claim whose instance died (its lease lapsed, no outcome): a retry takes it over and runs', async () => {
    const key = randomUUID();
    await t.router.db('bcms_idempotency_keys').insert({
      caller: 'anonymous',
      function_name: 'counter',
      key,
      claim: randomUUID(),
      body_hash: '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', // SHA-256 of {}
      locked_until: t.router.db.raw("clock_timestamp() - interval '1 second'"),
    });
    const before = ran('counter');
    const res = await call(t, 'counter', key, {});
    expect([res.status, res.headers['idempotent-replayed']]).toEqual([200, undefined]);
    expect(ran('counter')).toBe(before + 1);
    // Still held (its lease not over): 409.
    const held = randomUUID();
    await t.router.db('bcms_idempotency_keys').insert({
      caller: 'anonymous',
      function_name: 'counter',
      key: held,
      claim: randomUUID(),
      body_hash: '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a',
      locked_until: t.router.db.raw("clock_timestamp() + interval '1 minute'"),
    });
    expect((await call(t, 'counter', held, {})).status).toBe(409);
  });

  test('callers are apart: two API keys, two users and an anonymous caller each run with the same key', async () => {
    const key = randomUUID();
    const keyA = await hmacKey(t.router.db, ['private-counter']);
    const keyB = await hmacKey(t.router.db, ['private-counter']);
    const withKey = (headers: Record<string, string>) => (headers['Idempotency-Key'] = key);
    const before = ran('private-counter');
    const a = await signedPost(t.app, '/api/function/private-counter', keyA, { x: 1 }, { tamper: withKey });
    const b = await signedPost(t.app, '/api/function/private-counter', keyB, { x: 1 }, { tamper: withKey });
    const executor = [role('ADMIN', 'EXECUTE')];
    const user = (userId: string) =>
      request(t.app)
        .post('/api/function/private-counter')
        .set('Authorization', `Bearer ${signToken(executor, { payload: { userId } })}`)
        .set('Idempotency-Key', key)
        .send({ x: 1 });
    const u1 = await user('user-1');
    const u2 = await user('user-2');
    expect([a, b, u1, u2].map((res) => [res.status, res.headers['idempotent-replayed']])).toEqual(Array(4).fill([200, undefined]));
    expect(ran('private-counter')).toBe(before + 4);
    // Each caller's own retry is its own outcome again.
    const aAgain = await signedPost(t.app, '/api/function/private-counter', keyA, { x: 1 }, { tamper: withKey });
    const u2Again = await user('user-2');
    expect([aAgain.text, aAgain.headers['idempotent-replayed']]).toEqual([a.text, 'true']);
    expect([u2Again.text, u2Again.headers['idempotent-replayed']]).toEqual([u2.text, 'true']);
    expect(ran('private-counter')).toBe(before + 4);

    // A public function: a valid bearer token keeps its user apart from anonymous callers.
    const anonymous = await call(t, 'counter', key, {});
    const signedIn = await request(t.app)
      .post('/api/function/counter')
      .set('Authorization', `Bearer ${signToken([], { payload: { userId: 'user-1' } })}`)
      .set('Idempotency-Key', key)
      .send({});
    expect(anonymous.headers['idempotent-replayed']).toBeUndefined();
    expect(signedIn.headers['idempotent-replayed']).toBeUndefined();
    expect(signedIn.body.result.run).toBe(anonymous.body.result.run + 1);
  });

  test("every instance on the database: the second router gives the first one's outcome, and refuses another body", async () => {
    const key = randomUUID();
    const before = ran('counter');
    const first = await call(t, 'counter', key, { n: 7 });
    const again = await call(other, 'counter', key, { n: 7 });
    expect([again.status, again.text, again.headers['idempotent-replayed']]).toEqual([200, first.text, 'true']);
    expect((await call(other, 'counter', key, { n: 8 })).body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(ran('counter')).toBe(before + 1);
  });

  test('after 24 h the key is forgotten: the call runs again (and another body is taken)', async () => {
    const key = randomUUID();
    const first = await call(t, 'counter', key, { day: 1 });
    await t.router
      .db('bcms_idempotency_keys')
      .where({ key })
      .update({ created_at: t.router.db.raw("clock_timestamp() - interval '24 hours 1 second'") });
    const later = await call(other, 'counter', key, { day: 1 });
    expect(later.status).toBe(200);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(later.body.result.run).toBe(first.body.result.run + 1);
    // The new outcome is the one given again now; an old row with another body is no refusal either.
    expect((await call(t, 'counter', key, { day: 1 })).text).toBe(later.text);
    await t.router
      .db('bcms_idempotency_keys')
      .where({ key })
      .update({ created_at: t.router.db.raw("clock_timestamp() - interval '25 hours'") });
    expect((await call(t, 'counter', key, { day: 2 })).status).toBe(200);
  });

  test('rows past 24 h are purged, by a call that claims a key (no timer), and close() waits for it', async () => {
    const old = randomUUID();
    await t.router.db('bcms_idempotency_keys').insert({
      caller: 'anonymous',
      function_name: 'counter',
      key: old,
      claim: randomUUID(),
      body_hash: 'x',
      status: 200,
      response: '{}',
      created_at: t.router.db.raw("clock_timestamp() - interval '25 hours'"),
    });
    const third = await buildApp(registry, { database: t.router.db });
    try {
      await call(third, 'counter', randomUUID(), {}).expect(200);
    } finally {
      await third.router.close();
    }
    expect(await t.router.db('bcms_idempotency_keys').where({ key: old })).toEqual([]);
  });

  test.each([
    ['empty', '', 'is empty'],
    ['256 characters', 'k'.repeat(256), 'has 256 characters'],
    ['not ASCII', 'clé', 'not printable ASCII'],
  ])('a key that is %s: 400 IDEMPOTENCY_KEY_INVALID naming the header, and nothing runs', async (_what, key, says) => {
    const before = ran('counter');
    const res = await request(t.app).post('/api/function/counter').set('Idempotency-Key', key).send({});
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'IDEMPOTENCY_KEY_INVALID', message: expect.stringContaining(says) } });
    expect(res.body.error.message).toContain('Idempotency-Key');
    expect(ran('counter')).toBe(before);
  });

  test("255 characters, and the IETF draft's quoted form, are keys; the header twice is 400", async () => {
    expect((await call(t, 'counter', 'k'.repeat(255), {})).status).toBe(200);
    const key = randomUUID();
    const quoted = await call(t, 'counter', `"${key}"`, {});
    expect(quoted.body.result.idempotencyKey).toBe(key);
    expect((await call(t, 'counter', key, {})).headers['idempotent-replayed']).toBe('true');
    const server = await listen(t.app);
    try {
      const client = rawClient(server.port);
      client.write(`${postHead('/api/function/counter', 2, { 'Idempotency-Key': 'a', 'idempotency-key': 'b' })}{}`);
      const answer = await client.next();
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ error: { code: 'IDEMPOTENCY_KEY_INVALID', message: expect.stringContaining('more than once') } });
      client.destroy();
    } finally {
      await server.close();
    }
  });

  test('a second call while the first runs: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After, on either instance; then the outcome', async () => {
    const key = randomUUID();
    const before = ran('slow');
    const first = call(t, 'slow', key, {}).then((res) => res);
    // Once the first call runs, however long a busy machine takes to start it.
    await until(() => ran('slow') !== before, 10);
    for (const instance of [t, other]) {
      const second = await call(instance, 'slow', key, {});
      expect(second.status).toBe(409);
      expect(second.headers['retry-after']).toBe('1');
      expect(second.body).toEqual({ success: false, error: { code: 'IDEMPOTENCY_KEY_IN_USE', message: expect.stringContaining('still running') } });
    }
    // Another body is refused as such, even while the first runs.
    expect((await call(t, 'slow', key, { other: true })).status).toBe(422);
    releaseSlow();
    expect((await first).body).toEqual({ success: true, result: 'done' });
    const third = await call(other, 'slow', key, {});
    expect([third.status, third.headers['idempotent-replayed'], third.body.result]).toEqual([200, 'true', 'done']);
    expect(ran('slow')).toBe(before + 1);
  });

  test("a handler's 4xx is an outcome: given again, with its status and body", async () => {
    const key = randomUUID();
    const before = ran('refuse');
    const first = await call(t, 'refuse', key, {});
    expect(first.status).toBe(409);
    expect(first.body).toEqual({ success: false, error: { code: 'HANDLER_ERROR', message: `refused on run ${before + 1}` } });
    const again = await call(other, 'refuse', key, {});
    expect([again.status, again.text, again.headers['idempotent-replayed']]).toEqual([409, first.text, 'true']);
    expect(ran('refuse')).toBe(before + 1);
  });

  test('a 500 is not stored: the retry runs the handler again, and its outcome is the one kept', async () => {
    const key = randomUUID();
    const first = await call(t, 'crash', key, {});
    expect(first.status).toBe(500);
    expect(first.body.error.code).toBe('INTERNAL_ERROR');
    const retry = await call(t, 'crash', key, {});
    expect([retry.status, retry.body, retry.headers['idempotent-replayed']]).toEqual([200, { success: true, result: 'fine' }, undefined]);
    expect((await call(other, 'crash', key, {})).headers['idempotent-replayed']).toBe('true');
    expect(ran('crash')).toBe(2);
  });

  test('refusals before the handler are not outcomes: a bad token, then the right one, runs', async () => {
    const key = randomUUID();
    const denied = await request(t.app).post('/api/function/private-counter').set('Authorization', 'Bearer not.a.token').set('Idempotency-Key', key).send({});
    expect(denied.status).toBe(401);
    const accepted = await request(t.app)
      .post('/api/function/private-counter')
      .set('Authorization', `Bearer ${signToken([role('ADMIN', 'EXECUTE')])}`)
      .set('Idempotency-Key', key)
      .send({});
    expect([accepted.status, accepted.headers['idempotent-replayed']]).toEqual([200, undefined]);
  });

  test('a deployed function (in an isolate): its context has the key, its outcome is given again', async () => {
    const deployer = await hmacKey(t.router.db, [], { deploy: true });
    await deploy(
      t.app,
      deployer,
      'function',
      'isolated-counter',
      functionSource('isolated-counter', 'async ({ idempotencyKey }) => ({ pid: process.pid, n: ++runs, idempotencyKey: idempotencyKey ?? null })', 'let runs = 0;'),
    );
    const key = randomUUID();
    const first = await call(t, 'isolated-counter', key, {});
    expect(first.body).toEqual({ success: true, result: { pid: expect.any(Number), n: 1, idempotencyKey: key } });
    expect(first.body.result.pid).not.toBe(process.pid);
    const again = await call(t, 'isolated-counter', key, {});
    expect([again.text, again.headers['idempotent-replayed']]).toEqual([first.text, 'true']);
    expect((await call(t, 'isolated-counter', undefined, {})).body.result).toMatchObject({ n: 2, idempotencyKey: null });
  }, 30_000);

  test('a preflight allows the header', async () => {
    const res = await request(t.app).options('/api/function/counter').set('Origin', 'https://elsewhere.example').set('Access-Control-Request-Method', 'POST');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-headers']).toContain('Idempotency-Key');
  });
});

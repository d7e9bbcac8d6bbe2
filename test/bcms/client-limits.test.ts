import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import request from 'supertest';
import { createApiKey, createBcmsFunction } from '../../lib';
import { bcmsClientSignature } from '../../lib/bcms/client/signature';
import { MAX_JSON_DEPTH } from '../../lib/http/body';
import { API_KEYS_TABLE } from '../../lib/security/secrets';
import { buildApp, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { signedPost } from '../support/signature';

// The BCMS client's signed calls (the layer's key scheme) meet the core's limits as HTTP
// Signatures do: the key's rate limit (one count for both schemes, before the ledger records the
// signature), the JSON depth limit, and a sealed secret that does not open (401, never a 500).

const echo = createBcmsFunction(async () => ({ config: { name: 'echo', public: false }, handler: async ({ request }) => request.body }));
const HOUR = 3600;
const SECRETS_KEY = randomBytes(32);

/** A call signed as `@becomes/cms-client` signs it: `text` is the body as sent and signed. */
function clientCall(t: TestApp, key: { id: string; secret: string }, text: string): request.Test {
  const nonce = randomBytes(6).toString('hex');
  const timestamp = String(Date.now());
  const signature = bcmsClientSignature({ secret: key.secret, nonce, timestamp, key: key.id, body: text });
  return request(t.app).post(`/api/function/echo?key=${key.id}&nonce=${nonce}&timestamp=${timestamp}&signature=${signature}`).set('Content-Type', 'application/json').send(text);
}

/** Waits until the hour-long window under way has a minute left, by the database's clock (see test/function/rate-limit.test.ts). */
async function freshWindow(knex: Knex): Promise<void> {
  const result = (await knex.raw('select extract(epoch from clock_timestamp()) as now')) as { rows: { now: string | number }[] };
  const left = HOUR - (Number(result.rows[0]!.now) % HOUR);
  if (left < 60) await new Promise((resolve) => setTimeout(resolve, left * 1000 + 100));
}

describe.each(backends())("the BCMS client's signed calls and the service's limits (%s)", (backend) => {
  let database: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    t = await buildApp({ functions: [echo] }, { database: database.knex, rateLimit: { key: { points: 2, seconds: HOUR } }, secretsKey: SECRETS_KEY });
  }, 60_000);
  afterAll(async () => {
    await t.router.close();
    await database.close();
  });

  test("rateLimit.key: the client's calls and the key's HTTP Signatures share one count; the refused ones leave the ledger alone", async () => {
    const made = await createApiKey(t.router.db, { name: 'client', functions: ['echo'], bcmsClient: true });
    const key = { id: made.id, secret: made.secret! };
    await freshWindow(database.knex);
    expect((await clientCall(t, key, '{"n":1}')).body).toEqual({ success: true, result: { n: 1 } });
    expect((await signedPost(t.app, '/api/function/echo', { keyId: key.id, secret: key.secret }, { n: 2 })).status).toBe(200);
    for (let i = 3; i < 6; i++) {
      const res = await clientCall(t, key, `{"n":${i}}`);
      expect(res.status).toBe(429);
      expect(res.body.error.code).toBe('RATE_LIMITED');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(Number((await database.knex('bcms_signature_replays').where({ key_id: key.id }).count({ n: '*' }))[0]?.n)).toBe(2);
  });

  test(`a body nested more than ${MAX_JSON_DEPTH} levels: 400 INVALID_JSON, not a 500`, async () => {
    const made = await createApiKey(t.router.db, { name: 'deep', functions: ['echo'], bcmsClient: true });
    const res = await clientCall(t, { id: made.id, secret: made.secret! }, '['.repeat(50_000) + ']'.repeat(50_000));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'INVALID_JSON', message: `Request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.` } });
  });

  test("a key whose sealed secret was altered: 401 SIGNATURE_INVALID with the scheme's challenge, logged as an error", async () => {
    const made = await createApiKey(t.router.db, { name: 'altered', functions: ['echo'], bcmsClient: true });
    const stored = ((await database.knex(API_KEYS_TABLE).first('secret').where({ id: made.id })) as { secret: string }).secret;
    const [kid, payload] = stored.slice('enc:v1:'.length).split(':') as [string, string];
    const bytes = Buffer.from(payload, 'base64url');
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 0x01; // in GCM's tag
    await database
      .knex(API_KEYS_TABLE)
      .where({ id: made.id })
      .update({ secret: `enc:v1:${kid}:${bytes.toString('base64url')}` });
    const res = await clientCall(t, { id: made.id, secret: made.secret! }, '{}');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('SIGNATURE_INVALID');
    expect(res.headers['www-authenticate']).toMatch(/^BCMS-Client /);
    expect(t.log.lines.some((line) => line.level === 50 && line.keyId === made.id && String(line.msg).includes('cannot be opened'))).toBe(true);
  });
});

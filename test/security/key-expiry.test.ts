import request from 'supertest';
import { createBcmsFunction } from '../../lib';
import { buildApp, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { bundle, functionSource, signed } from '../support/deploy';
import { expireKey, hmacKey, inAnHour, publicKeyKey, signedPost } from '../support/signature';

// Keys with an expiry (issue 23): past it, every signature of the key is refused with 401
// KEY_EXPIRED, on functions and deploys (key-guarded plugin routes: test/bcms/key-expiry-route.test.ts); before it, the key works.

const report = createBcmsFunction(async () => ({ config: { name: 'report', public: false }, handler: async () => ({ ok: true }) }));
const SIGNATURE_CHALLENGE = 'Signature realm="bcms",headers="(request-target) date digest"';

describe.each(backends())('API keys past their expiry (%s)', (backend) => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
    t = await buildApp({ functions: [report] }, { database: db.knex });
  });
  afterAll(async () => {
    await t.router.close();
    await db.close();
  });

  /** Time passes for a key: createApiKey takes no expiry in the past. Resolves to when it expired. */
  const expire = (id: string): Promise<string> => expireKey(db.knex, id);

  test('a function call, HMAC or Ed25519: 200 before the expiry, 401 KEY_EXPIRED after, with the Signature challenge and when', async () => {
    const hmac = await hmacKey(db.knex, ['report'], { expiresAt: inAnHour() });
    const ed25519 = await publicKeyKey(db.knex, 'ed25519', ['report']);
    await db
      .knex('bcms_api_keys')
      .where({ id: ed25519.keyId })
      .update({ expires_at: new Date(inAnHour()) });
    for (const key of [hmac, ed25519]) {
      const before = await signedPost(t.app, '/api/function/report', key, {});
      expect([before.status, before.body]).toEqual([200, { success: true, result: { ok: true } }]);
    }
    // Neither key was read before: the refusal comes from the key as it is read now.
    const fresh = await hmacKey(db.knex, ['report'], { expiresAt: inAnHour() });
    const when = await expire(fresh.keyId);
    const res = await signedPost(t.app, '/api/function/report', fresh, {});
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      success: false,
      error: { code: 'KEY_EXPIRED', message: `This API key expired at ${when}: sign with a key that has not (bcms-ext keys create).` },
    });
    expect(res.headers['www-authenticate']).toBe(SIGNATURE_CHALLENGE);
  });

  test("a key that expires while the service holds it in memory: refused by the database's clock", async () => {
    for (const key of [await hmacKey(db.knex, ['report'], { expiresAt: inAnHour() }), await publicKeyKey(db.knex, 'ed25519', ['report'])]) {
      await db
        .knex('bcms_api_keys')
        .where({ id: key.keyId })
        .update({ expires_at: new Date(inAnHour()) });
      expect((await signedPost(t.app, '/api/function/report', key, {})).status).toBe(200); // read, and kept in memory
      await expire(key.keyId);
      const res = await signedPost(t.app, '/api/function/report', key, {});
      expect([res.status, res.body.error.code, res.headers['www-authenticate']]).toEqual([401, 'KEY_EXPIRED', SIGNATURE_CHALLENGE]);
      expect(res.body.error.message).toBe('This API key has expired: sign with a key that has not (bcms-ext keys create).');
    }
  });

  test('no expiry (the default) never expires; a bad signature of an expired key is SIGNATURE_INVALID, telling nothing of the key', async () => {
    const forever = await hmacKey(db.knex, ['report']);
    expect((await signedPost(t.app, '/api/function/report', forever, {})).status).toBe(200);
    const key = await hmacKey(db.knex, ['report'], { expiresAt: inAnHour() });
    await expire(key.keyId);
    const forged = await signedPost(t.app, '/api/function/report', { keyId: key.keyId, secret: 'not-its-secret' }, {});
    expect([forged.status, forged.body.error.code]).toEqual([401, 'SIGNATURE_INVALID']);
  });

  test('a deploy: 401 { message } and nothing deployed; before its expiry, the same key deploys', async () => {
    const deployer = await hmacKey(db.knex, [], { deploy: true, expiresAt: inAnHour() });
    const live = await signed(t.app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'expiry-fn', functionSource('expiry-fn', 'async () => "v1"')));
    expect(live.status).toBe(201);
    expect((await request(t.app).post('/api/function/expiry-fn')).body.result).toBe('v1');

    await expire(deployer.keyId);
    const res = await signed(t.app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'expiry-fn', functionSource('expiry-fn', 'async () => "v2"')));
    expect([res.status, res.body]).toEqual([401, { message: 'This API key has expired: sign with a key that has not (bcms-ext keys create).' }]);
    expect(res.headers['www-authenticate']).toBe(SIGNATURE_CHALLENGE);
    const listed = await signed(t.app, 'GET', '/api/extensions/deployments', deployer);
    expect(listed.status).toBe(401);
    expect((await request(t.app).post('/api/function/expiry-fn')).body.result).toBe('v1');
  }, 30_000);
});

import { generateKeyPairSync } from 'node:crypto';
import request from 'supertest';
import { bcmsExtensions, listApiKeys } from '../../lib';
import { buildApp, role, signToken, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// Deploy rights (issue 23): a deploy key runs code on every instance, so /api/extensions/keys makes
// one only where the host allows it (keys.deployOverHttp), and then only for a SUDO role holding
// WRITE. Other keys keep the rules they had: SUDO or ADMIN with WRITE.

const admin = `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE', 'DELETE')])}`;
const sudo = `Bearer ${signToken([role('SUDO', 'READ', 'WRITE', 'DELETE')])}`;
/** SUDO, but WRITE only in another role: not enough for a deploy key. */
const sudoReader = `Bearer ${signToken([role('SUDO', 'READ'), role('ADMIN', 'WRITE')])}`;
const publicKey = () => generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();

const OFF =
  'Deploy keys are not created over HTTP on this service (a deploy key runs code on every instance): create it on the database instead: ' +
  'DATABASE_URL=<the database> npx --no bcms-ext keys create --name deployer --deploy. Or let SUDO tokens create them here with the option keys: { deployOverHttp: true }.';
const NOT_SUDO =
  'Only a token whose SUDO role holds WRITE may create a deploy key, and this one has none: sign in as a SUDO user, or create it on the database instead: ' +
  'DATABASE_URL=<the database> npx --no bcms-ext keys create --name deployer --deploy.';

describe.each(backends())('POST /api/extensions/keys: deploy rights (%s)', (backend) => {
  let db: TestDatabase;
  let byDefault: TestApp;
  let allowed: TestApp;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
    byDefault = await buildApp({}, { database: db.knex });
    allowed = await buildApp({}, { database: db.knex, keys: { deployOverHttp: true } });
  });
  afterAll(async () => {
    await byDefault.router.close();
    await allowed.router.close();
    await db.close();
  });

  const create = (t: TestApp, authorization: string, body: object) => request(t.app).post('/api/extensions/keys').set('Authorization', authorization).send(body);
  const deployKeys = async () => (await listApiKeys(db.knex)).filter((key) => key.deploy).length;

  test.each([
    ['an ADMIN token', admin],
    ['a SUDO token', sudo],
  ])('by default, %s cannot create a deploy key: 403 saying why and how; no key is made', async (_name, authorization) => {
    const before = await deployKeys();
    for (const body of [
      { name: 'deployer', functions: [], deploy: true },
      { name: 'deployer', functions: [], deploy: true, algorithm: 'ed25519', publicKey: publicKey() },
    ]) {
      const res = await create(byDefault, authorization, body);
      expect([res.status, res.body]).toEqual([403, { message: OFF }]);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    }
    expect(await deployKeys()).toBe(before);
  });

  test('by default, other keys keep their rules: an ADMIN token holding WRITE creates them (deploy: false too)', async () => {
    const plain = await create(byDefault, admin, { name: 'forms', functions: ['submit-form'] });
    expect([plain.status, plain.body]).toEqual([201, { id: expect.any(String), secret: expect.any(String) }]);
    const notDeploy = await create(byDefault, admin, { name: 'forms 2', functions: ['submit-form'], deploy: false });
    expect(notDeploy.status).toBe(201);
    const readOnly = await create(byDefault, `Bearer ${signToken([role('ADMIN', 'READ')])}`, { name: 'x', functions: [] });
    expect([readOnly.status, readOnly.body]).toEqual([403, { message: 'Token is not authorized for this action.' }]);
  });

  test.each([
    ['an ADMIN token', admin],
    ['a SUDO role without WRITE (WRITE in another role)', sudoReader],
  ])('with keys.deployOverHttp, %s still cannot: 403 naming the SUDO role', async (_name, authorization) => {
    const before = await deployKeys();
    const res = await create(allowed, authorization, { name: 'deployer', functions: [], deploy: true });
    expect([res.status, res.body]).toEqual([403, { message: NOT_SUDO }]);
    expect(await deployKeys()).toBe(before);
  });

  test('with keys.deployOverHttp, a SUDO role holding WRITE creates deploy keys, public-key or HMAC', async () => {
    const pem = publicKey();
    const signer = await create(allowed, sudo, { name: 'deployer', functions: [], deploy: true, algorithm: 'ed25519', publicKey: pem });
    expect([signer.status, signer.body]).toEqual([201, { id: expect.any(String) }]);
    const hmac = await create(allowed, sudo, { name: 'hmac deployer', functions: [], deploy: true });
    expect([hmac.status, hmac.body]).toEqual([201, { id: expect.any(String), secret: expect.any(String) }]);
    const keys = await listApiKeys(db.knex);
    expect(keys.find((key) => key.id === signer.body.id)).toMatchObject({ algorithm: 'ed25519', deploy: true, publicKey: pem });
    expect(keys.find((key) => key.id === hmac.body.id)).toMatchObject({ algorithm: 'hmac-sha256', deploy: true });
    // Other keys: ADMIN still makes them there.
    expect((await create(allowed, admin, { name: 'forms', functions: ['submit-form'] })).status).toBe(201);
  });

  test('expiresAt: kept and listed in epoch ms; none by default; a past or malformed one is a 400 saying what to give', async () => {
    const at = '2099-01-31T12:00:00Z';
    const created = await create(byDefault, admin, { name: 'audit', functions: ['report'], expiresAt: at });
    expect(created.status).toBe(201);
    const plain = await create(byDefault, admin, { name: 'forever', functions: ['report'] });
    const listed = await request(byDefault.app).get('/api/extensions/keys').set('Authorization', admin);
    expect(listed.body.keys).toContainEqual(expect.objectContaining({ id: created.body.id, expiresAt: Date.parse(at) }));
    expect(listed.body.keys).toContainEqual(expect.objectContaining({ id: plain.body.id, expiresAt: null }));
    const past = await create(byDefault, admin, { name: 'x', functions: [], expiresAt: '2020-01-01' });
    expect([past.status, past.body]).toEqual([400, { message: 'API key expiresAt must be in the future; 2020-01-01T00:00:00.000Z has passed' }]);
    const malformed = await create(byDefault, admin, { name: 'x', functions: [], expiresAt: 'next week' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.message).toMatch(/^API key expiresAt must be a time: an ISO 8601 date \("2027-01-31", midnight UTC\) or date-time with its offset/);
  });
});

describe('option keys', () => {
  test('unknown nested names and values that are not booleans throw when the router is built', () => {
    expect(() => bcmsExtensions({}, { keys: { deployOverHTTP: true } as never })).toThrow('unknown option "keys.deployOverHTTP" (known: keys.deployOverHttp)');
    expect(() => bcmsExtensions({}, { keys: { deployOverHttp: 'yes' } as never })).toThrow('option keys.deployOverHttp must be true or false, got "yes"');
    expect(() => bcmsExtensions({}, { keys: true } as never)).toThrow('option keys must be an object');
  });
});

import { generateKeyPairSync } from 'node:crypto';
import request from 'supertest';
import { blockApiKey, createApiKey, deleteApiKey, listApiKeys, migrate, MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE } from '../../lib';
import { expiryOf } from '../../lib/security/api-keys';
import { buildApp, role, signToken, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

const ed25519 = () => generateKeyPairSync('ed25519');
const pem = (key: import('node:crypto').KeyObject, type: 'spki' | 'pkcs8') => key.export({ type, format: 'pem' }).toString();

describe.each(backends())('API keys (%s)', (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(() => db.close());

  test('create on a database never migrated, list without secrets, block, delete', async () => {
    const created = await createApiKey(db.knex, { name: 'forms', functions: ['submit-form', 'submit-form'] });
    expect(created).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    const pair = ed25519();
    const signer = await createApiKey(db.knex, { name: 'deployer', functions: [], algorithm: 'ed25519', publicKey: pair.publicKey, deploy: true });
    expect(signer).toEqual({ id: expect.any(String) });

    const keys = await listApiKeys(db.knex);
    expect(keys).toEqual([
      {
        id: created.id,
        name: 'forms',
        algorithm: 'hmac-sha256',
        publicKey: null,
        blocked: false,
        functions: ['submit-form'],
        plugins: [],
        deploy: false,
        bcmsClient: false,
        expiresAt: null,
        createdAt: expect.any(Number),
        updatedAt: expect.any(Number),
      },
      {
        id: signer.id,
        name: 'deployer',
        algorithm: 'ed25519',
        publicKey: pem(pair.publicKey, 'spki'),
        blocked: false,
        functions: [],
        plugins: [],
        deploy: true,
        bcmsClient: false,
        expiresAt: null,
        createdAt: expect.any(Number),
        updatedAt: expect.any(Number),
      },
    ]);
    expect(JSON.stringify(keys)).not.toContain(created.secret);

    expect(await blockApiKey(db.knex, created.id)).toBe(true);
    expect((await listApiKeys(db.knex)).find((key) => key.id === created.id)?.blocked).toBe(true);
    expect(await deleteApiKey(db.knex, created.id)).toBe(true);
    expect(await deleteApiKey(db.knex, created.id)).toBe(false);
    expect(await blockApiKey(db.knex, created.id)).toBe(false);
    expect(await blockApiKey(db.knex, 'not-a-uuid')).toBe(false);
    expect((await listApiKeys(db.knex)).map((key) => key.id)).toEqual([signer.id]);
  });

  test('expiresAt: a Date, epoch ms or an ISO date, stored and listed in epoch ms', async () => {
    const inAnHour = Date.now() + 3_600_000;
    const fromDate = await createApiKey(db.knex, { name: 'a', functions: [], expiresAt: new Date(inAnHour) });
    const fromMs = await createApiKey(db.knex, { name: 'b', functions: [], expiresAt: inAnHour });
    const fromIso = await createApiKey(db.knex, { name: 'c', functions: [], expiresAt: '2099-12-31' });
    const keys = await listApiKeys(db.knex);
    const expiry = (id: string) => keys.find((key) => key.id === id)?.expiresAt;
    expect([expiry(fromDate.id), expiry(fromMs.id), expiry(fromIso.id)]).toEqual([inAnHour, inAnHour, Date.parse('2099-12-31T00:00:00Z')]);
  });

  test('the expiry migration on a database that has keys: they stay, and never expire', async () => {
    const older = await createApiKey(db.knex, { name: 'made before expiry', functions: ['f'] });
    const config = { directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'], name: '20261126000000_api_key_expiry.js' };
    await db.knex.migrate.down(config);
    expect(await db.knex.schema.hasColumn('bcms_api_keys', 'expires_at')).toBe(false);
    expect(await migrate(db.knex)).toEqual(['20261126000000_api_key_expiry.js']);
    expect((await listApiKeys(db.knex)).find((key) => key.id === older.id)).toMatchObject({ name: 'made before expiry', expiresAt: null });
  });

  test('plugins: the plugins a key may call, kept once each and listed; none by default', async () => {
    const { id } = await createApiKey(db.knex, { name: 'site', functions: [], plugins: ['todo', 'forms.v2', 'todo'] });
    expect((await listApiKeys(db.knex)).find((key) => key.id === id)?.plugins).toEqual(['todo', 'forms.v2']);
    const stored = await db.knex('bcms_api_keys').first('plugins').where({ id });
    expect(stored).toEqual({ plugins: ['todo', 'forms.v2'] });
  });

  test.each([
    ['no name', { name: ' ', functions: [] }, 'API key name must be a non-empty string'],
    ['functions not a list', { name: 'k', functions: 'submit-form' }, 'API key functions must be an array of function names ([] for none)'],
    ['a function name that is not one', { name: 'k', functions: ['../x'] }, 'API key functions: "../x" is not a function name'],
    ['plugins not a list', { name: 'k', functions: [], plugins: 'todo' }, 'API key plugins must be an array of plugin names ([] for none)'],
    ['a plugin name that is not one', { name: 'k', functions: [], plugins: ['todo', 'my plugin'] }, 'API key plugins: "my plugin" is not a plugin name (URL-safe, as in /api/plugin/<name>/)'],
    ['a plugin name that is not a string', { name: 'k', functions: [], plugins: [7] }, 'API key plugins: 7 is not a plugin name (URL-safe, as in /api/plugin/<name>/)'],
    ['an unknown algorithm', { name: 'k', functions: [], algorithm: 'hmac-md5' }, 'API key algorithm must be one of hmac-sha256, rsa-sha256, ed25519, got "hmac-md5"'],
    ['a public key for hmac', { name: 'k', functions: [], publicKey: 'x' }, 'an hmac-sha256 key takes no publicKey: the service issues its secret'],
    ['no public key for ed25519', { name: 'k', functions: [], algorithm: 'ed25519' }, 'an ed25519 key needs publicKey (PEM)'],
    [
      'a private key given as the public one',
      { name: 'k', functions: [], algorithm: 'ed25519', publicKey: pem(ed25519().privateKey, 'pkcs8') },
      'publicKey is a private key: keep it with the caller and pass the public key',
    ],
    ['not a key', { name: 'k', functions: [], algorithm: 'rsa-sha256', publicKey: 'hello' }, 'publicKey is not a PEM public key (-----BEGIN PUBLIC KEY-----)'],
    ['an Ed25519 key for rsa-sha256', { name: 'k', functions: [], algorithm: 'rsa-sha256', publicKey: pem(ed25519().publicKey, 'spki') }, 'an rsa-sha256 key needs an RSA public key, got ed25519'],
    [
      'a short RSA key',
      { name: 'k', functions: [], algorithm: 'rsa-sha256', publicKey: pem(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey, 'spki') },
      'an rsa-sha256 key needs 2048 bits or more, got 1024',
    ],
    ['an expiry that has passed', { name: 'k', functions: [], expiresAt: '2001-02-03T04:05:06Z' }, 'API key expiresAt must be in the future; 2001-02-03T04:05:06.000Z has passed'],
  ])('refused: %s', async (_name, input, message) => {
    await expect(createApiKey(db.knex, input as never)).rejects.toThrow(new TypeError(message));
  });
});

describe('expiryOf: what a key takes as expiresAt', () => {
  const now = Date.parse('2026-11-26T10:00:00Z');
  test.each([
    ['an ISO date: midnight UTC', '2027-01-31', '2027-01-31T00:00:00.000Z'],
    ['a date-time in UTC', '2027-01-31T12:30:00Z', '2027-01-31T12:30:00.000Z'],
    ['a date-time with an offset, to the millisecond', '2027-01-31T12:30:00.250+02:00', '2027-01-31T10:30:00.250Z'],
    ['minutes without seconds', '2026-11-26T10:01Z', '2026-11-26T10:01:00.000Z'],
    ['epoch milliseconds', now + 1, '2026-11-26T10:00:00.001Z'],
    ['a Date', new Date(now + 86_400_000), '2026-11-27T10:00:00.000Z'],
  ])('%s', (_name, value, iso) => {
    expect(expiryOf(value, now).toISOString()).toBe(iso);
  });

  test.each([
    ['a day not in the calendar', '2027-02-30'],
    ['a date-time without its offset (whose local time?)', '2027-01-31T12:00:00'],
    ['a duration (the CLI takes those)', '90d'],
    ['words', 'next week'],
    ['a fraction of a millisecond', now + 0.5],
    ['an invalid Date', new Date(Number.NaN)],
    ['null', null],
  ])('not a time: %s', (_name, value) => {
    expect(() => expiryOf(value, now)).toThrow(/^API key expiresAt must be a time: an ISO 8601 date/);
  });

  test('now or before is refused', () => {
    expect(() => expiryOf(now, now)).toThrow('API key expiresAt must be in the future; 2026-11-26T10:00:00.000Z has passed');
    expect(() => expiryOf('2026-11-26', now)).toThrow('API key expiresAt must be in the future; 2026-11-26T00:00:00.000Z has passed');
  });
});

describe('/api/extensions/keys: key management for an ADMIN token', () => {
  let t: TestApp;
  const admin = `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE', 'DELETE')])}`;
  beforeAll(async () => {
    t = await buildApp({});
  });

  test('create (201, the secret once), list, block, delete; unknown ids 404 KEY_NOT_FOUND', async () => {
    const created = await request(t.app)
      .post('/api/extensions/keys')
      .set('Authorization', admin)
      .send({ name: 'over http', functions: ['f'] });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.any(String), secret: expect.any(String) });
    expect(created.headers['access-control-allow-origin']).toBe('*');

    const list = await request(t.app).get('/api/extensions/keys').set('Authorization', admin);
    expect(list.status).toBe(200);
    expect(list.body.keys).toContainEqual(expect.objectContaining({ id: created.body.id, name: 'over http', functions: ['f'], blocked: false }));
    expect(list.text).not.toContain(created.body.secret);

    const blocked = await request(t.app).post(`/api/extensions/keys/${created.body.id}/block`).set('Authorization', admin);
    expect(blocked.body).toEqual({ id: created.body.id, blocked: true });
    const deleted = await request(t.app).delete(`/api/extensions/keys/${created.body.id}`).set('Authorization', admin);
    expect(deleted.body).toEqual({ id: created.body.id, deleted: true });
    const again = await request(t.app).delete(`/api/extensions/keys/${created.body.id}`).set('Authorization', admin);
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ message: `No API key has the id "${created.body.id}".` });
  });

  test('a body that is not a key: 400 with what to change', async () => {
    const res = await request(t.app).post('/api/extensions/keys').set('Authorization', admin).send({ name: 'x', functions: [], algorithm: 'rsa-sha256' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'an rsa-sha256 key needs publicKey (PEM)' });
  });

  test('bcmsClient over HTTP: kept and listed', async () => {
    const created = await request(t.app)
      .post('/api/extensions/keys')
      .set('Authorization', admin)
      .send({ name: 'bcms site', functions: ['f'], bcmsClient: true });
    expect(created.status).toBe(201);
    const list = await request(t.app).get('/api/extensions/keys').set('Authorization', admin);
    expect(list.body.keys).toContainEqual(expect.objectContaining({ id: created.body.id, bcmsClient: true }));
    const refused = await request(t.app).post('/api/extensions/keys').set('Authorization', admin).send({ name: 'x', functions: [], bcmsClient: 1 });
    expect(refused.body).toEqual({ message: 'API key bcmsClient must be true or false' });
  });

  test('plugins over HTTP: kept and listed; a name that is not one is a 400', async () => {
    const created = await request(t.app)
      .post('/api/extensions/keys')
      .set('Authorization', admin)
      .send({ name: 'plugin site', functions: [], plugins: ['todo'] });
    expect(created.status).toBe(201);
    const list = await request(t.app).get('/api/extensions/keys').set('Authorization', admin);
    expect(list.body.keys).toContainEqual(expect.objectContaining({ id: created.body.id, plugins: ['todo'] }));
    const refused = await request(t.app)
      .post('/api/extensions/keys')
      .set('Authorization', admin)
      .send({ name: 'x', functions: [], plugins: ['../todo'] });
    expect([refused.status, refused.body]).toEqual([400, { message: 'API key plugins: "../todo" is not a plugin name (URL-safe, as in /api/plugin/<name>/)' }]);
  });

  test.each([
    ['no token', undefined, 401, 'Token is `undefined`.'],
    ['a USER token', `Bearer ${signToken([role('USER', 'READ', 'WRITE', 'DELETE')])}`, 403, 'Token is not authorized for this action.'],
    ['an ADMIN token without WRITE', `Bearer ${signToken([role('ADMIN', 'READ')])}`, 403, 'Token is not authorized for this action.'],
  ])('%s cannot create keys', async (_name, authorization, status, message) => {
    const req = request(t.app).post('/api/extensions/keys');
    if (authorization !== undefined) req.set('Authorization', authorization);
    const res = await req.send({ name: 'x', functions: [] });
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ message });
  });

  test('other paths under /api/extensions/ fall through to the host', async () => {
    const res = await request(t.app).get('/api/extensions/nothing-here');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ host404: true });
  });
});

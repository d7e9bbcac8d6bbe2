import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { createApiKey, createBcmsFunction } from '../../lib';
import { main } from '../../lib/cli/main';
import { openDatabase } from '../../lib/db/connection';
import { API_KEYS_TABLE, openSecret, resolveSecretsKeys, sealSecret } from '../../lib/security/secrets';
import { buildApp, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { signedPost } from '../support/signature';

// HMAC secrets at rest (DESIGN.md "Trust"): sealed with AES-256-GCM under `secretsKey`, bound to
// their key's id; the ones in clear sealed at start; a row in clear refused once keys are given.

const echo = createBcmsFunction(async () => ({
  config: { name: 'echo', public: false },
  handler: async ({ request }) => request.body,
}));

const KEY = randomBytes(32);
const OLD = randomBytes(32);

describe('resolveSecretsKeys: the option, else BCMS_SECRETS_KEY', () => {
  test('32 bytes as hex, base64, base64url or a Buffer; several, the first sealing', () => {
    for (const written of [KEY.toString('hex'), KEY.toString('base64'), KEY.toString('base64url'), KEY]) {
      expect(resolveSecretsKeys(written, {})!.keys.map((entry) => entry.key)).toEqual([KEY]);
    }
    const both = resolveSecretsKeys(undefined, { BCMS_SECRETS_KEY: `${KEY.toString('base64')}, ${OLD.toString('hex')}` })!;
    expect(both.keys.map((entry) => entry.key)).toEqual([KEY, OLD]);
    expect(resolveSecretsKeys(undefined, {})).toBeUndefined();
  });

  test('anything else is refused, saying what to give', () => {
    expect(() => resolveSecretsKeys('too-short', {})).toThrow(/^option secretsKey must be 32 bytes: 64 hex digits, 32 bytes in base64, or a Buffer\. Make one with: node -e/);
    expect(() => resolveSecretsKeys(undefined, { BCMS_SECRETS_KEY: randomBytes(16).toString('hex') })).toThrow(/^BCMS_SECRETS_KEY must be 32 bytes/);
    expect(() => resolveSecretsKeys([KEY, 'x'], {})).toThrow(/^option secretsKey \(key 2\) must be 32 bytes/);
  });

  test('a sealed secret opens only with its key and for its own key id', () => {
    const keys = resolveSecretsKeys(KEY, {})!;
    const sealed = sealSecret('the secret', 'id-1', keys);
    expect(sealed).toMatch(/^enc:v1:[0-9a-f]{8}:[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain('the secret');
    expect(openSecret(sealed, 'id-1', keys).toString()).toBe('the secret');
    expect(() => openSecret(sealed, 'id-2', keys)).toThrow(/does not open with the key it names \(altered, or moved from another key\)/);
    expect(() => openSecret(sealed, 'id-1', resolveSecretsKeys(OLD, {}))).toThrow(/sealed under a key \([0-9a-f]{8}\) the service was not given/);
    expect(() => openSecret(sealed, 'id-1', undefined)).toThrow(/has a sealed secret, and the service has no secretsKey/);
  });
});

describe.each(backends())('secrets at rest, over HTTP (%s)', (backend) => {
  let database: TestDatabase;
  let knex: Knex;
  const started: TestApp[] = [];
  const start = async (secretsKey?: unknown) => {
    const t = await buildApp({ functions: [echo] }, { database: knex, ...(secretsKey === undefined ? {} : { secretsKey: secretsKey as never }) });
    started.push(t);
    return t;
  };
  const storedSecret = async (id: string) => ((await knex(API_KEYS_TABLE).first('secret').where({ id })) as { secret: string }).secret;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    knex = database.knex;
  });
  afterAll(async () => {
    for (const t of started) await t.router.close();
    await database.close();
  });

  test('without secretsKey: secrets in clear, and the start says so', async () => {
    const t = await start();
    expect(t.log.lines.some((line) => line.level === 40 && String(line.msg).startsWith('bcms-extensions: no secretsKey: the HMAC secrets of API keys are stored in clear'))).toBe(true);
    const { id, secret } = await createApiKey(t.router.db, { name: 'clear', functions: ['echo'] });
    expect(await storedSecret(id)).toBe(secret);
  });

  test('with secretsKey: createApiKey(router.db) seals; the signed call works; the row holds no secret; no warning', async () => {
    const t = await start(KEY.toString('base64'));
    expect(t.log.text()).not.toContain('no secretsKey');
    const { id, secret } = await createApiKey(t.router.db, { name: 'sealed', functions: ['echo'] });
    const stored = await storedSecret(id);
    expect(stored).toMatch(/^enc:v1:/);
    expect(stored).not.toContain(secret!);
    const res = await signedPost(t.app, '/api/function/echo', { keyId: id, secret: secret! }, { hello: 'sealed' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: { hello: 'sealed' } });
  });

  test('a start with secretsKey seals the secrets in clear (the migration), and their keys keep working', async () => {
    const before = await createApiKey(knex, { name: 'made in clear', functions: ['echo'] });
    // As a key made before this release (or by a service without a key) is stored: in clear.
    await knex(API_KEYS_TABLE).where({ id: before.id }).update({ secret: before.secret });
    const t = await start(KEY);
    expect(await storedSecret(before.id)).toMatch(/^enc:v1:/);
    expect(t.log.lines.some((line) => line.msg === 'bcms-extensions: sealed API key secrets under secretsKey')).toBe(true);
    expect((await signedPost(t.app, '/api/function/echo', { keyId: before.id, secret: before.secret! }, { n: 1 })).status).toBe(200);
  });

  test('a row in clear that the service did not write (put in the database by hand) is refused as unknown, and logged', async () => {
    const t = await start(KEY);
    const { id, secret } = await createApiKey(t.router.db, { name: 'soon tampered', functions: ['echo'] });
    await knex(API_KEYS_TABLE).where({ id }).update({ secret });
    const res = await signedPost(t.app, '/api/function/echo', { keyId: id, secret: secret! }, {});
    expect(res.status).toBe(401);
    expect(res.body.error).toEqual({ code: 'SIGNATURE_INVALID', message: 'Unknown keyId.' });
    expect(t.log.lines.some((line) => line.keyId === id && String(line.msg).includes('has its secret in clear, although secretsKey is set'))).toBe(true);
  });

  /** The 401 of a key whose sealed secret does not open: the caller learns nothing of why; the operator's log (at error) does. */
  const expectUnusableKey = (res: { status: number; body: { error: { code: string; message: string } }; headers: Record<string, string> }) => {
    expect(res.status).toBe(401);
    expect(res.body.error).toEqual({ code: 'SIGNATURE_INVALID', message: "This API key's secret cannot be used by this service (its log says why): sign with another key, or ask its operator." });
    expect(res.headers['www-authenticate']).toMatch(/^Signature /);
  };
  const loggedAsError = (t: TestApp, id: string, text: string) => t.log.lines.some((line) => line.level === 50 && line.keyId === id && String(line.msg).includes(text));

  test("a sealed secret moved onto another key's row does not open: 401 SIGNATURE_INVALID without internals, and the log says why", async () => {
    const t = await start(KEY);
    const first = await createApiKey(t.router.db, { name: 'first', functions: ['echo'] });
    const second = await createApiKey(t.router.db, { name: 'second', functions: ['echo'] });
    await knex(API_KEYS_TABLE)
      .where({ id: second.id })
      .update({ secret: await storedSecret(first.id) });
    const res = await signedPost(t.app, '/api/function/echo', { keyId: second.id, secret: first.secret! }, {});
    expectUnusableKey(res);
    expect(JSON.stringify(res.body)).not.toContain('sealed');
    expect(loggedAsError(t, second.id, 'cannot be opened: it does not open with the key it names')).toBe(true);
  });

  test('a sealed secret altered in the database (one byte of its ciphertext, or the key id it names): 401, never a 500, logged as an error', async () => {
    const t = await start(KEY);
    const made = await createApiKey(t.router.db, { name: 'tampered', functions: ['echo'] });
    const stored = await storedSecret(made.id);
    const [kid, payload] = stored.slice('enc:v1:'.length).split(':') as [string, string];
    const bytes = Buffer.from(payload, 'base64url');
    bytes[14] = (bytes[14] as number) ^ 0x01; // inside the ciphertext: GCM's tag no longer matches
    await knex(API_KEYS_TABLE)
      .where({ id: made.id })
      .update({ secret: `enc:v1:${kid}:${bytes.toString('base64url')}` });
    const altered = await signedPost(t.app, '/api/function/echo', { keyId: made.id, secret: made.secret! }, {});
    expectUnusableKey(altered);
    expect(loggedAsError(t, made.id, 'does not open with the key it names (altered, or moved from another key)')).toBe(true);

    await knex(API_KEYS_TABLE)
      .where({ id: made.id })
      .update({ secret: `enc:v1:00000000:${payload}` });
    expectUnusableKey(await signedPost(t.app, '/api/function/echo', { keyId: made.id, secret: made.secret! }, {}));
    expect(loggedAsError(t, made.id, 'it was sealed under a key (00000000) the service was not given')).toBe(true);
    // Put back as it was, the key works again: nothing of the refusal was remembered.
    await knex(API_KEYS_TABLE).where({ id: made.id }).update({ secret: stored });
    expect((await signedPost(t.app, '/api/function/echo', { keyId: made.id, secret: made.secret! }, { back: true })).body).toEqual({ success: true, result: { back: true } });
  });

  test('rotation: secretsKey [new, old] opens both and seals every secret again under the new one', async () => {
    const t = await start(OLD);
    const made = await createApiKey(t.router.db, { name: 'under old', functions: ['echo'] });
    const underOld = await storedSecret(made.id);
    const rotated = await start([KEY, OLD]);
    const underNew = await storedSecret(made.id);
    expect(underNew).not.toBe(underOld);
    expect(openSecret(underNew, made.id, resolveSecretsKeys(KEY, {})).toString()).toBe(made.secret);
    expect((await signedPost(rotated.app, '/api/function/echo', { keyId: made.id, secret: made.secret! }, {})).status).toBe(200);
    // The old key can now go.
    const onlyNew = await start(KEY);
    expect((await signedPost(onlyNew.app, '/api/function/echo', { keyId: made.id, secret: made.secret! }, {})).status).toBe(200);
  });

  test('a service without secretsKey cannot use a sealed secret: 401, and the log (at error) names the fix', async () => {
    const sealing = await start(KEY);
    const made = await createApiKey(sealing.router.db, { name: 'sealed elsewhere', functions: ['echo'] });
    const t = await start();
    const res = await signedPost(t.app, '/api/function/echo', { keyId: made.id, secret: made.secret! }, {});
    expectUnusableKey(res);
    expect(loggedAsError(t, made.id, 'has a sealed secret, and the service has no secretsKey: give the key it was sealed with')).toBe(true);
  });
});

test('bcms-ext migrate with BCMS_SECRETS_KEY (from the environment or .env) seals the secrets in clear, and says how many', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-secrets-cli-'));
  const data = path.join(dir, 'data');
  const database = openDatabase({ pglite: data });
  const made = await createApiKey(database.knex, { name: 'cli', functions: ['echo'] });
  const clear = await database.knex(API_KEYS_TABLE).first('secret').where({ id: made.id });
  await database.close();
  expect(clear).toEqual({ secret: made.secret });
  fs.writeFileSync(path.join(dir, '.env'), `BCMS_SECRETS_KEY=${KEY.toString('hex')}\n`);
  const out: string[] = [];
  const code = await main(['migrate', '--pglite', data], { out: (text) => void out.push(text), err: (text) => void out.push(text), env: {}, cwd: dir });
  expect(out.join('')).toContain('Sealed 1 API key secret under BCMS_SECRETS_KEY.');
  expect(code).toBe(0);
  const after = openDatabase({ pglite: data });
  const stored = (await after.knex(API_KEYS_TABLE).first('secret').where({ id: made.id })) as { secret: string };
  await after.close();
  expect(openSecret(stored.secret, made.id, resolveSecretsKeys(KEY, {})).toString()).toBe(made.secret);
  fs.rmSync(dir, { recursive: true, force: true });
}, 60_000);

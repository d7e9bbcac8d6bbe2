import { blockApiKey, createApiKey } from '../../lib';
import { PURGE_MARGIN_SECONDS, purgeExpiredSignatures, SignatureLedger } from '../../lib/security/replay';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

describe.each(backends())('the signature ledger (%s)', (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(() => db.close());

  test('signatures of one event-loop turn are recorded together, each with its own answer', async () => {
    const ledger = new SignatureLedger(db.knex, (query) => query());
    const forms = (await createApiKey(db.knex, { name: 'forms', functions: ['submit-form'] })).id;
    const deployer = (await createApiKey(db.knex, { name: 'deployer', functions: [], deploy: true })).id;
    const blocked = (await createApiKey(db.knex, { name: 'blocked', functions: ['submit-form'] })).id;
    await blockApiKey(db.knex, blocked);
    const later = new Date(Date.now() + 60_000);
    const fn = { function: 'submit-form' };

    const outcomes = await Promise.all([
      ledger.accept(forms, 'sig-1', fn, later),
      ledger.accept(forms, 'sig-1', fn, later), // the same pair again, in the same batch
      ledger.accept(forms, 'sig-2', fn, later),
      ledger.accept(forms, 'sig-3', { function: 'other' }, later),
      ledger.accept(forms, 'sig-4', { deploy: true }, later),
      ledger.accept(deployer, 'sig-1', { deploy: true }, later), // another key may carry the same signature text
      ledger.accept(blocked, 'sig-5', fn, later),
      ledger.accept('9d7c1f0e-0000-4000-8000-000000000000', 'sig-6', fn, later),
    ]);
    expect(outcomes).toEqual(['accepted', 'replayed', 'accepted', 'not-permitted', 'not-permitted', 'accepted', 'blocked', 'unknown']);
    // A later batch: what was accepted is now a replay; what was refused was never recorded.
    expect(await Promise.all([ledger.accept(forms, 'sig-2', fn, later), ledger.accept(forms, 'sig-3', fn, later)])).toEqual(['replayed', 'accepted']);
    expect(Number((await db.knex('bcms_signature_replays').count({ n: '*' }))[0]?.n)).toBe(4);
  });

  test("reading a key's access list (the BCMS client's): any key that is not blocked, once per signature", async () => {
    const ledger = new SignatureLedger(db.knex, (query) => query());
    const reader = (await createApiKey(db.knex, { name: 'reader', functions: [], bcmsClient: true })).id;
    const blocked = (await createApiKey(db.knex, { name: 'blocked reader', functions: [], bcmsClient: true })).id;
    await blockApiKey(db.knex, blocked);
    const later = new Date(Date.now() + 60_000);
    const outcomes = await Promise.all([ledger.accept(reader, 'list-1', { keyAccess: true }, later), ledger.accept(blocked, 'list-2', { keyAccess: true }, later)]);
    expect(outcomes).toEqual(['accepted', 'blocked']);
    // One memory for every route: the same signature is a replay wherever it is sent next.
    expect(await ledger.accept(reader, 'list-1', { function: 'f' }, later)).toBe('not-permitted');
    expect(await ledger.accept(reader, 'list-1', { keyAccess: true }, later)).toBe('replayed');
  });

  test('a plugin route: granted when the key lists the plugin (not a function of that name), refused when it does not', async () => {
    const ledger = new SignatureLedger(db.knex, (query) => query());
    const site = (await createApiKey(db.knex, { name: 'site', functions: ['other'], plugins: ['todo'] })).id;
    const blocked = (await createApiKey(db.knex, { name: 'blocked site', functions: [], plugins: ['todo'] })).id;
    await blockApiKey(db.knex, blocked);
    const later = new Date(Date.now() + 60_000);
    const outcomes = await Promise.all([
      ledger.accept(site, 'plugin-1', { plugin: 'todo' }, later),
      ledger.accept(site, 'plugin-2', { plugin: 'other' }, later), // a function of that name is no plugin
      ledger.accept(site, 'plugin-3', { function: 'todo' }, later), // nor the reverse
      ledger.accept(blocked, 'plugin-4', { plugin: 'todo' }, later),
    ]);
    expect(outcomes).toEqual(['accepted', 'not-permitted', 'not-permitted', 'blocked']);
    expect(await ledger.accept(site, 'plugin-1', { plugin: 'todo' }, later)).toBe('replayed');
    expect(await ledger.accept(site, 'plugin-1', { function: 'other' }, later)).toBe('replayed');
  });

  test('more than one batch in a turn: all answered', async () => {
    const ledger = new SignatureLedger(db.knex, (query) => query());
    const id = (await createApiKey(db.knex, { name: 'many', functions: ['f'] })).id;
    const outcomes = await Promise.all(Array.from({ length: 450 }, (_, i) => ledger.accept(id, `many-${i}`, { function: 'f' }, new Date(Date.now() + 60_000))));
    expect(outcomes.every((outcome) => outcome === 'accepted')).toBe(true);
  });

  test('a database error rejects every signature of the batch', async () => {
    const failing = new SignatureLedger(db.knex, () => Promise.reject(new Error('database down')));
    const id = (await createApiKey(db.knex, { name: 'x', functions: ['f'] })).id;
    await expect(Promise.all([failing.accept(id, 'a', { function: 'f' }, new Date()), failing.accept(id, 'b', { function: 'f' }, new Date())])).rejects.toThrow('database down');
  });

  test('purge forgets pairs whose window passed more than the margin ago, and keeps the others', async () => {
    const id = (await createApiKey(db.knex, { name: 'purge', functions: ['f'] })).id;
    const ago = (seconds: number) => new Date(Date.now() - seconds * 1000);
    await db.knex('bcms_signature_replays').insert([
      { key_id: id, signed_hash: 'old', expires_at: ago(PURGE_MARGIN_SECONDS + 10) },
      { key_id: id, signed_hash: 'within the margin', expires_at: ago(PURGE_MARGIN_SECONDS - 60) },
      { key_id: id, signed_hash: 'fresh', expires_at: ago(-60) },
    ]);
    expect(await purgeExpiredSignatures(db.knex)).toBeGreaterThanOrEqual(1);
    const left = (await db.knex('bcms_signature_replays').where({ key_id: id }).select('signed_hash')).map((row) => row.signed_hash);
    expect(left.sort()).toEqual(['fresh', 'within the margin']);
  });

  test("a key past its expiry, by the database's clock: expired (after blocked), never recorded", async () => {
    const ledger = new SignatureLedger(db.knex, (query) => query());
    const later = new Date(Date.now() + 60_000);
    const fn = { function: 'submit-form' };
    const live = (await createApiKey(db.knex, { name: 'live', functions: ['submit-form'], expiresAt: Date.now() + 3_600_000 })).id;
    const expired = (await createApiKey(db.knex, { name: 'expired', functions: ['submit-form'], expiresAt: Date.now() + 3_600_000 })).id;
    const both = (await createApiKey(db.knex, { name: 'expired and blocked', functions: ['submit-form'], expiresAt: Date.now() + 3_600_000 })).id;
    await blockApiKey(db.knex, both);
    // Time passes: createApiKey takes no expiry in the past.
    await db
      .knex('bcms_api_keys')
      .whereIn('id', [expired, both])
      .update({ expires_at: db.knex.raw("now() - interval '1 second'") });
    const outcomes = await Promise.all([ledger.accept(live, 'exp-1', fn, later), ledger.accept(expired, 'exp-2', fn, later), ledger.accept(both, 'exp-3', fn, later)]);
    expect(outcomes).toEqual(['accepted', 'expired', 'blocked']);
    expect(await db.knex('bcms_signature_replays').whereIn('key_id', [expired, both]).select('key_id')).toEqual([]);
  });
});

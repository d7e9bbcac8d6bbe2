import { randomUUID } from 'node:crypto';
import express from 'express';
import type { Knex } from 'knex';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, type BcmsExtensionsRouter } from '../../lib';
import { noteFailedStatement, wroteBeforeLost } from '../../lib/db/outcome';
import { ContentStore } from '../../lib/db/store';
import { BcmsHttpError } from '../../lib/http/errors';
import { memoryLogger } from '../support/app';
import { proxiedServerSchema, sharedTestDatabase } from '../support/database';
import type { TcpProxy } from '../support/proxy';

// Issue 23, item 9: a write whose answer was lost with the connection may be in the database.
// Its caller is told so (503 DATABASE_OUTCOME_UNKNOWN), never "try again shortly"
// (DATABASE_UNAVAILABLE), which is kept for reads and for failures before anything was sent.

const lost = () => new Error('Connection terminated unexpectedly');

describe('which lost connections leave a write unknown', () => {
  test.each([
    ['an insert', { sql: 'insert into "bcms_entries" ("x") values ($1)', method: 'insert', inTransaction: false }, true],
    ['an update', { sql: 'update "bcms_entries" set "x" = $1', method: 'update', inTransaction: false }, true],
    ['raw SQL that writes', { sql: 'with gone as (delete from t returning *) select count(*) from gone', method: 'raw', inTransaction: false }, true],
    ['a COMMIT', { sql: 'COMMIT;', inTransaction: true }, true],
    ['a write inside a transaction (rolled back with the connection)', { sql: 'insert into t values (1)', method: 'insert', inTransaction: true }, false],
    ['a select', { sql: 'select * from "bcms_entries"', method: 'select', inTransaction: false }, false],
    ['a raw select', { sql: '  SELECT 1', method: 'raw', inTransaction: false }, false],
    ['a ROLLBACK', { sql: 'ROLLBACK', inTransaction: true }, false],
  ])('%s', (_what, statement, unknown) => {
    const error = lost();
    noteFailedStatement(error, statement);
    expect(wroteBeforeLost(error)).toBe(unknown);
  });

  test("a client broken before the statement was sent, or the pool's time-out: not unknown", () => {
    for (const error of [new Error('Client has encountered a connection error and is not queryable'), Object.assign(new Error('Knex: Timeout acquiring a connection'), { name: 'KnexTimeoutError' })]) {
      noteFailedStatement(error, { sql: 'insert into t values (1)', inTransaction: false });
      expect(wroteBeforeLost(error)).toBe(false);
    }
  });

  test('through the store: 503 DATABASE_OUTCOME_UNKNOWN for a write, DATABASE_UNAVAILABLE for a read', async () => {
    const { knex } = await sharedTestDatabase();
    const store = new ContentStore({ knex, description: 'test', close: async () => {} }, memoryLogger().logger, { migratedElsewhere: true });
    const failing = (sql: string) => () => {
      const error = lost();
      noteFailedStatement(error, { sql, inTransaction: false });
      return Promise.reject(error);
    };
    await expect(store.run(failing('insert into t values (1)'))).rejects.toMatchObject({ code: 'DATABASE_OUTCOME_UNKNOWN', status: 503 });
    await expect(store.run(failing('select 1'))).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE', status: 503 });
    // Knex's own failed statements are watched: a lost connection is no bad query, so this one stays what it is.
    await expect(store.run((db) => db.raw('select * from no_such_table'))).rejects.not.toBeInstanceOf(BcmsHttpError);
  });
});

// Through a proxy of the test's own, which lets one statement reach the Postgres server and cuts
// the connection before its answer comes back. Needs the server: CI always sets DATABASE_URL.
(process.env.DATABASE_URL ? describe : describe.skip)('the connection lost after a write was sent (Postgres, through a proxy)', () => {
  let proxy: TcpProxy;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let admin: Knex;
  let schema: string;
  let drop: () => Promise<void>;
  let templateId = '';
  const log = memoryLogger();

  const entryOf = (key: string) => ({ templateId, meta: [{ lng: 'en', props: [{ id: 'key', data: [key] }] }] });
  const addEntry = createBcmsFunction(async () => ({
    config: { name: 'add-entry', public: true },
    handler: async ({ repo, request }) => (await repo.entry.add(entryOf(request.body.key)))._id,
  }));
  const countEntries = createBcmsFunction(async () => ({
    config: { name: 'count-entries', public: true },
    handler: async ({ repo }) => repo.entry.countByTemplateId(templateId),
  }));
  // As docs/http.md suggests: the handler makes its own write happen once, by the call's key.
  const addOnce = createBcmsFunction(async () => ({
    config: { name: 'add-once', public: true },
    handler: async ({ repo, idempotencyKey }) => {
      const mine = (await repo.entry.findAllByTemplateId(templateId)).find((entry) => (entry.meta[0]?.props[0]?.data as string[] | undefined)?.[0] === idempotencyKey);
      return (mine ?? (await repo.entry.add(entryOf(idempotencyKey as string))))._id;
    },
  }));

  beforeAll(async () => {
    let through: string;
    ({ schema, admin, drop, proxy, url: through } = await proxiedServerSchema('bcms_outcome'));
    router = bcmsExtensions({ functions: [addEntry, countEntries, addOnce] }, { database: through, logger: log.logger });
    await router.ready;
    [{ id: templateId }] = await router.db('bcms_templates').insert({ name: 'outcome' }).returning('id');
    app = express().use(router);
  }, 60_000);
  afterAll(async () => {
    await router.close();
    await proxy.stop();
    await drop();
  });

  const storedKeys = async (): Promise<string[]> =>
    (await admin.withSchema(schema).from('bcms_entries').select('meta')).map((row: { meta: { props: { data: string[] }[] }[] }) => row.meta[0]!.props[0]!.data[0]!);

  /**
   * Waits for the cut statement to be committed: the server runs it once it read it, which may be a
   * moment after the client was told its answer was lost (on a busy machine, after a first look).
   */
  const landed = async (key: string): Promise<void> => {
    for (const end = Date.now() + 10_000; !(await storedKeys()).includes(key); ) {
      if (Date.now() > end) throw new Error(`the row of ${key} never landed`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };

  test('an insert whose answer is lost: 503 DATABASE_OUTCOME_UNKNOWN, and the row is in fact there', async () => {
    const key = randomUUID();
    const cut = proxy.cutAfter('insert into "bcms_entries"');
    const res = await request(app).post('/api/function/add-entry').send({ key });
    await cut;
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ success: false, error: { code: 'DATABASE_OUTCOME_UNKNOWN', message: expect.stringContaining('may or may not have been applied') } });
    expect(res.body.error.message).toContain('Idempotency-Key');
    await landed(key);
    expect(log.lines.some((line) => /outcome is unknown/.test(String(line.msg)))).toBe(true);
    // The pool connects again: the next write is answered.
    expect((await request(app).post('/api/function/add-entry').send({ key: randomUUID() })).status).toBe(200);
  });

  test('a read whose answer is lost: 503 DATABASE_UNAVAILABLE', async () => {
    const cut = proxy.cutAfter('select count(');
    const res = await request(app).post('/api/function/count-entries').send({});
    await cut;
    expect([res.status, res.body.error?.code]).toEqual([503, 'DATABASE_UNAVAILABLE']);
  });

  test('a COMMIT whose answer is lost: DATABASE_OUTCOME_UNKNOWN (it committed); a write lost inside a transaction: DATABASE_UNAVAILABLE (rolled back)', async () => {
    const store = new ContentStore({ knex: router.db, description: 'proxied', close: async () => {} }, log.logger, { migratedElsewhere: true });
    const addTemplate = (name: string) => store.run((db) => db.transaction(async (trx) => trx('bcms_templates').insert({ name })));
    const committed = `committed-${randomUUID()}`;
    const cutCommit = proxy.cutAfter('COMMIT;');
    await expect(addTemplate(committed)).rejects.toMatchObject({ code: 'DATABASE_OUTCOME_UNKNOWN', status: 503 });
    await cutCommit;
    const rolledBack = `rolled-back-${randomUUID()}`;
    const cutInsert = proxy.cutAfter('insert into "bcms_templates"');
    await expect(addTemplate(rolledBack)).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE', status: 503 });
    await cutInsert;
    const names = (await admin.withSchema(schema).from('bcms_templates').select('name')).map((row: { name: string }) => row.name);
    expect(names).toContain(committed);
    expect(names).not.toContain(rolledBack);
  });

  test('nothing sent (the database refuses connections): a write is 503 DATABASE_UNAVAILABLE', async () => {
    await proxy.stop();
    try {
      const res = await request(app).post('/api/function/add-entry').send({ key: randomUUID() });
      expect([res.status, res.body.error?.code]).toEqual([503, 'DATABASE_UNAVAILABLE']);
    } finally {
      await proxy.start();
    }
  });

  test('retried with the same Idempotency-Key: the retry runs (a 503 is not an outcome), and the handler that uses its key writes once', async () => {
    const key = randomUUID();
    const cut = proxy.cutAfter('insert into "bcms_entries"');
    const first = await request(app).post('/api/function/add-once').set('Idempotency-Key', key).send({});
    await cut;
    expect([first.status, first.body.error?.code]).toEqual([503, 'DATABASE_OUTCOME_UNKNOWN']);
    // The retry comes once the first write is in (had it not landed, the retry would write it).
    await landed(key);
    const retry = await request(app).post('/api/function/add-once').set('Idempotency-Key', key).send({});
    expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([200, undefined]);
    const again = await request(app).post('/api/function/add-once').set('Idempotency-Key', key).send({});
    expect([again.status, again.text, again.headers['idempotent-replayed']]).toEqual([200, retry.text, 'true']);
    expect((await storedKeys()).filter((stored) => stored === key)).toHaveLength(1);
  });
});

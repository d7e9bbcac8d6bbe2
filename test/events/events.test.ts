import express from 'express';
import request from 'supertest';
import {
  BCMSEventConfigMethod,
  BCMSEventConfigScope,
  bcmsExtensions,
  createBcmsEvent,
  type BCMSEventHandlerData,
  type BcmsExtensionsRouter,
  type BcmsExtensionsOptions,
  type BcmsRegistry,
} from '../../lib';
import { ContentStore } from '../../lib/db/store';
import { EventsAndJobs } from '../../lib/events/engine';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { until } from '../support/events';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// DESIGN.md "Events and jobs": every committed write of entries and templates, by any path, and every
// custom emit, reaches each matching handler once across instances, in commit order per document;
// a handler that throws is tried again with backoff, five times in all.

jest.setTimeout(60_000);

type Seen = BCMSEventHandlerData & { at: number };

describe.each(backends())('events (%s)', (backend) => {
  let database: TestDatabase;
  const routers: BcmsExtensionsRouter[] = [];

  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await Promise.all(routers.map((router) => router.close()));
    await database.close();
  });

  async function start(registry: BcmsRegistry, options: BcmsExtensionsOptions = {}): Promise<{ router: BcmsExtensionsRouter; app: express.Express; log: ReturnType<typeof memoryLogger> }> {
    const log = memoryLogger();
    const router = bcmsExtensions(registry, { jwt: { secret: JWT_SECRET }, logger: log.logger, database: database.knex, ...options });
    routers.push(router);
    await router.ready;
    return { router, app: express().use(router), log };
  }

  /** Until every delivery recorded for `handlers` is finished: nothing more will reach them of what was written so far. */
  const settled = (router: BcmsExtensionsRouter, handlers: string[]): Promise<void> =>
    until(async () => (await router.db('bcms_event_deliveries').whereIn('handler', handlers).whereNotIn('status', ['delivered', 'failed'])).length === 0, 'the deliveries finished');

  const recorder = (name: string, scope: string, method: string, seen: Seen[], fail?: (data: BCMSEventHandlerData) => boolean) =>
    createBcmsEvent(async () => ({
      name,
      config: { scope, method },
      handler: async (data) => {
        seen.push({ ...data, at: Date.now() });
        if (fail?.(data)) throw new Error('the handler failed on purpose');
      },
    }));

  test("each scope and method BCMS fires for templates and entries, through the SDK routes and the host's repo, with BCMS shapes", async () => {
    const seen: Seen[] = [];
    const { router, app } = await start({
      events: [recorder('all-writes', BCMSEventConfigScope.ALL, BCMSEventConfigMethod.ALL, seen), recorder('entry-deletes', BCMSEventConfigScope.ENTRY, BCMSEventConfigMethod.DELETE, seen)],
    });
    const admin = `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE', 'DELETE')])}`;
    // Through the SDK's routes (what plugin UIs call).
    const template = await request(app).post('/api/extensions/templates').set('Authorization', admin).send({ label: 'Events one' });
    expect(template.status).toBe(200);
    const templateId = template.body._id as string;
    const entry = await request(app)
      .post(`/api/extensions/templates/${templateId}/entries`)
      .set('Authorization', admin)
      .send({ meta: [{ lng: 'en', props: [] }] });
    expect(entry.status).toBe(200);
    // Through the host's repo.
    await router.repo.entry.update({ _id: entry.body._id, status: 'published' });
    await router.repo.entry.deleteById(entry.body._id);
    await router.repo.template.update({ _id: templateId, label: 'Renamed' });
    await until(() => seen.length === 6, 'six deliveries');
    expect(seen.map((s) => [s.scope, s.method])).toEqual(
      expect.arrayContaining([
        ['TEMPLATE', 'ADD'],
        ['ENTRY', 'ADD'],
        ['ENTRY', 'UPDATE'],
        ['ENTRY', 'DELETE'],
        ['ENTRY', 'DELETE'],
        ['TEMPLATE', 'UPDATE'],
      ]),
    );
    // The document as BCMS shapes it: an entry's `_id`, `templateId`, times in ms; a delete's is the entry as deleted.
    const added = seen.find((s) => s.scope === 'ENTRY' && s.method === 'ADD')!.payload as Record<string, unknown>;
    expect(added).toEqual(expect.objectContaining({ _id: entry.body._id, templateId, meta: [{ lng: 'en', props: [] }], createdAt: expect.any(Number) }));
    const deleted = seen.filter((s) => s.method === 'DELETE').map((s) => (s.payload as { status: string }).status);
    expect(deleted).toEqual(['published', 'published']);
    const renamed = seen.find((s) => s.scope === 'TEMPLATE' && s.method === 'UPDATE')!.payload as Record<string, unknown>;
    expect(renamed).toEqual(expect.objectContaining({ _id: templateId, label: 'Renamed', singleEntry: false }));
    // One document's events reach a handler in commit order (the second handler saw only the DELETE).
    const entryEvents = seen.filter((s) => s.scope === 'ENTRY' && (s.payload as { _id: string })._id === entry.body._id).map((s) => s.method);
    expect(entryEvents.filter((method, index) => method !== 'DELETE' || entryEvents.indexOf('DELETE') !== index)).toEqual(['ADD', 'UPDATE', 'DELETE']);
  });

  test('a write of plain SQL, and one rolled back: the first is delivered, the second never', async () => {
    const seen: Seen[] = [];
    const { router } = await start({ events: [recorder('sql-templates', BCMSEventConfigScope.TEMPLATE, BCMSEventConfigMethod.ADD, seen)] });
    await router.db
      .transaction(async (trx) => {
        await trx('bcms_templates').insert({ name: 'rolled_back' });
        await trx.rollback();
      })
      .catch(() => {});
    await router.db('bcms_templates').insert({ name: 'plain_sql' });
    await until(() => seen.some((s) => (s.payload as { name: string }).name === 'plain_sql'), 'the plain SQL write');
    // The rolled-back write took its delivery with it: one was recorded, and it is the only one handled.
    expect(Number((await router.db('bcms_event_deliveries').where({ handler: 'sql-templates' }).count({ n: '*' }))[0]?.n)).toBe(1);
    await settled(router, ['sql-templates']);
    expect(seen.map((s) => (s.payload as { name: string }).name)).toEqual(['plain_sql']);
  });

  test('a custom emit reaches handlers of its scope and method, and of ALL; not others', async () => {
    const seen: Seen[] = [];
    const { router } = await start({
      events: [
        recorder('custom-exact', 'NEWSLETTER', 'SENT', seen),
        recorder('custom-any-method', 'NEWSLETTER', BCMSEventConfigMethod.ALL, seen),
        recorder('custom-other', 'NEWSLETTER', 'BOUNCED', seen),
      ],
    });
    await router.emit('NEWSLETTER', 'SENT', { issue: 7, to: ['a@example.com'] });
    await until(() => seen.length === 2, 'two deliveries');
    // None was recorded for the handler of another method; the two recorded are all that is handled.
    expect(await router.db('bcms_event_deliveries').where({ handler: 'custom-other' })).toEqual([]);
    await settled(router, ['custom-exact', 'custom-any-method']);
    expect(seen.map((s) => [s.scope, s.method, s.payload])).toEqual([
      ['NEWSLETTER', 'SENT', { issue: 7, to: ['a@example.com'] }],
      ['NEWSLETTER', 'SENT', { issue: 7, to: ['a@example.com'] }],
    ]);
    await expect(router.emit('', 'SENT', {})).rejects.toThrow(/scope must be a string of 1 to 200 characters/);
    // ENTRY and TEMPLATE events are the writes' own: nobody forges one.
    await expect(router.emit('ENTRY', 'UPDATE', { _id: 'forged' })).rejects.toThrow(/ENTRY events are fired by the writes themselves/);
    await expect(router.emit('NEWSLETTER', 'SENT', 'x'.repeat(1024 * 1024))).rejects.toThrow(/larger than 1 MB/);
  });

  test('a handler that throws twice is tried again with backoff, then succeeds; one that always throws is failed after 5 tries', async () => {
    const flaky: Seen[] = [];
    const broken: Seen[] = [];
    const { router } = await start({
      events: [recorder('flaky', 'RETRY', 'FLAKY', flaky, () => flaky.length <= 2), recorder('broken', 'RETRY', 'BROKEN', broken, () => true)],
    });
    await router.emit('RETRY', 'FLAKY', { n: 1 });
    await router.emit('RETRY', 'BROKEN', { n: 2 });
    await until(() => flaky.length === 3, 'the third try');
    // Backoff: 1 s before the second try, 2 s before the third.
    expect(flaky[1]!.at - flaky[0]!.at).toBeGreaterThanOrEqual(900);
    expect(flaky[2]!.at - flaky[1]!.at).toBeGreaterThanOrEqual(1900);
    const rowOf = (handler: string) => router.db('bcms_event_deliveries').where({ handler }).first();
    await until(async () => (await rowOf('flaky'))?.status === 'delivered', 'the delivery recorded');
    expect(await rowOf('flaky')).toEqual(expect.objectContaining({ status: 'delivered', attempts: 3, error: null }));
    await until(async () => (await rowOf('broken'))?.status === 'failed', 'the fifth failure');
    expect(await rowOf('broken')).toEqual(expect.objectContaining({ status: 'failed', attempts: 5, error: 'the handler failed on purpose' }));
    expect(broken).toHaveLength(5);
  });

  test('finished deliveries (and their events) and job runs are kept a week, then pruned; unfinished ones are kept', async () => {
    const { router } = await start({});
    const db = router.db;
    const days = (n: number) => db.raw(`clock_timestamp() - ? * interval '1 day'`, [n]);
    const [old, recent, stuck] = ['9001', '9002', '9003'];
    const event = { handler: 'prune-test', scope: 'PRUNE', method: 'X', created_at: days(9) };
    await db('bcms_event_deliveries').insert([
      { ...event, event_id: old, status: 'delivered', finished_at: days(8) },
      { ...event, event_id: recent, status: 'failed', finished_at: days(2), created_at: days(2) },
      { ...event, event_id: stuck, status: 'retrying', run_at: days(-1) },
    ]);
    await db('bcms_job_runs').insert([
      { job: 'prune-test', tick_at: days(8), status: 'succeeded', started_at: days(8) },
      { job: 'prune-test', tick_at: days(1), status: 'failed', started_at: days(1) },
    ]);
    const store = new ContentStore({ knex: db, description: 'test', close: async () => {} }, memoryLogger().logger, { migratedElsewhere: true });
    await new EventsAndJobs(store, memoryLogger().logger, { functionTimeoutMs: 1000, jobTimeoutMs: 1000 }, {}).prune();
    expect((await db('bcms_event_deliveries').where({ handler: 'prune-test' }).orderBy('id')).map((d: { event_id: string }) => String(d.event_id))).toEqual([String(recent), String(stuck)]);
    expect((await db('bcms_job_runs').where({ job: 'prune-test' })).map((r: { status: string }) => r.status)).toEqual(['failed']);
    await db('bcms_event_deliveries').where({ handler: 'prune-test' }).delete();
  });

  test("two instances with the same handler: each write is handled once; one document's in commit order", async () => {
    const seen: Seen[] = [];
    const registry = { events: [recorder('shared', 'ENTRY', BCMSEventConfigMethod.ALL, seen)] };
    const one = await start(registry);
    await start(registry);
    const [{ id: templateId }] = await one.router.db('bcms_templates').insert({ name: 'two_instances' }).returning('id');
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await one.router.repo.entry.add({ templateId, status: `v0` }))._id);
    // Each entry is then changed twice, its changes interleaved with the others'.
    for (const round of [1, 2]) await Promise.all(ids.map((id) => one.router.repo.entry.update({ _id: id, status: `v${round}` })));
    await until(() => seen.length >= 60, 'sixty deliveries');
    // Every delivery finished (sixty recorded), none handled twice.
    await settled(one.router, ['shared']);
    expect(Number((await one.router.db('bcms_event_deliveries').where({ handler: 'shared' }).count({ n: '*' }))[0]?.n)).toBe(60);
    expect(seen).toHaveLength(60);
    for (const id of ids) {
      const mine = seen.filter((s) => (s.payload as { _id: string })._id === id).map((s) => `${s.method}:${(s.payload as { status: string }).status}`);
      expect(mine).toEqual(['ADD:v0', 'UPDATE:v1', 'UPDATE:v2']);
    }
  });
});

// PGlite has one role: on the server, roles keep extension code's session from the event tables.
(process.env.DATABASE_URL ? test : test.skip)(
  "in SQL, a role of the database that is not the service (extension code's) cannot record write events, nor emit one, nor a payload past 1 MB",
  async () => {
    const database = await openTestDatabase('postgres');
    const router = bcmsExtensions({}, { database: database.knex, logger: memoryLogger().logger });
    await router.ready;
    const role = `bcms_events_test_${process.pid}`;
    const schema = (await router.db.raw('select current_schema() as s')).rows[0].s as string;
    await router.db.raw(`drop role if exists ${role}`);
    await router.db.raw(`create role ${role}`);
    await router.db.raw(`grant usage on schema "${schema}" to ${role}`);
    try {
      const as = (sql: string) =>
        router.db.transaction(async (trx) => {
          await trx.raw(`set local role ${role}`);
          return trx.raw(sql);
        });
      await expect(as(`select bcms_record_event('ENTRY', 'UPDATE', 'ENTRY:x', '{}'::jsonb)`)).rejects.toThrow(/permission denied for function bcms_record_event/);
      await expect(as(`select bcms_emit_event('ENTRY', 'UPDATE', '{}'::jsonb)`)).rejects.toThrow(/ENTRY events are fired by the writes themselves/);
      await expect(as(`select bcms_emit_event('MINE', 'X', to_jsonb(repeat('a', 1048577)))`)).rejects.toThrow(/larger than 1 MB/);
      await expect(as(`insert into bcms_event_deliveries (event_id, handler) values (1, 'x')`)).rejects.toThrow(/permission denied/);
      await as(`select bcms_emit_event('MINE', 'X', '{"ok":true}'::jsonb)`);
    } finally {
      await router.db.raw(`revoke usage on schema "${schema}" from ${role}`);
      await router.db.raw(`drop role ${role}`);
      await router.close();
      await database.close();
    }
  },
);

import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type BcmsExtensionsRouter } from '../../lib';
import { ContentStore, isUnreachable } from '../../lib/db/store';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// What is too large for the database is the caller's doing: `repo.template` refuses an over-long
// label, name or desc with a 400 naming it, and a query Postgres refuses for its size is a 400
// (TOO_LARGE), never the 503 and "database unreachable" of an outage.

/** What a handler gives `repo.template.add` / `update`: the request's body, caught by no one. */
const addTemplate = createBcmsFunction(async () => ({
  config: { name: 'add-template', public: true },
  handler: async ({ repo, request: req }) => repo.template.add(req.body),
}));
const templates = createBcmsPlugin({
  name: 'templates',
  controllers: [
    createController({
      name: 'Templates',
      path: '/t',
      methods: () => ({
        add: createControllerMethod({ path: '/', type: 'post', handler: async ({ repo, request: req }) => repo.template.add(req.body) }),
        update: createControllerMethod({ path: '/', type: 'put', handler: async ({ repo, request: req }) => repo.template.update(req.body) }),
      }),
    }),
  ],
});

describe.each(backends())('too large for the database, on %s', (backend) => {
  let database: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let log: ReturnType<typeof memoryLogger>;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    log = memoryLogger();
    router = bcmsExtensions({ plugins: [templates], functions: [addTemplate] }, { database: database.knex, logger: log.logger, bodyLimit: '2mb' });
    app = express().use(router);
    await router.ready;
  });
  afterAll(async () => {
    await router.close();
    await database.close();
  });

  const noOutageLogged = () => {
    const messages = log.lines.map((line) => line.msg);
    expect(messages).not.toContain('bcms-extensions: database unreachable');
    expect(messages).not.toContain('bcms-extensions: unexpected error');
  };
  const templateCount = async () => Number((await database.knex('bcms_templates').count({ n: '*' }).first())?.n);

  test('repo.template.add with a 1 MB label: a 400 naming label, in the function family and the plugin family', async () => {
    const label = 'x'.repeat(1_000_000);
    const fn = await request(app).post('/api/function/add-template').send({ name: 'big', label });
    expect(fn.status).toBe(400);
    expect(fn.body).toEqual({ success: false, error: { code: 'TOO_LARGE', message: 'repo.template.add: label is longer than 200 characters (it has 1000000).' } });
    const plugin = await request(app).post('/api/plugin/templates/t').send({ name: 'big', label });
    expect(plugin.status).toBe(400);
    expect(plugin.body).toEqual({ message: 'repo.template.add: label is longer than 200 characters (it has 1000000).' });
    // A name is a label too when no label is given.
    const name = await request(app)
      .post('/api/function/add-template')
      .send({ name: 'n'.repeat(201) });
    expect(name.body.error).toEqual({ code: 'TOO_LARGE', message: 'repo.template.add: name is longer than 200 characters (it has 201).' });
    const desc = await request(app)
      .post('/api/function/add-template')
      .send({ name: 'd', desc: 'd'.repeat(5001) });
    expect(desc.body.error).toEqual({ code: 'TOO_LARGE', message: 'repo.template.add: desc is longer than 5000 characters (it has 5001).' });
    expect(await templateCount()).toBe(0);
    noOutageLogged();
  });

  test('repo.template.update: the same lengths, checked before the query', async () => {
    const made = await request(app)
      .post('/api/function/add-template')
      .send({ name: 'n'.repeat(200), label: 'l'.repeat(200), desc: 'd'.repeat(5000) });
    expect(made.status).toBe(200);
    expect(made.body.result).toMatchObject({ name: 'n'.repeat(200), label: 'l'.repeat(200), desc: 'd'.repeat(5000) });
    for (const [field, max] of [
      ['name', 200],
      ['label', 200],
      ['desc', 5000],
    ] as const) {
      const res = await request(app)
        .put('/api/plugin/templates/t')
        .send({ _id: made.body.result._id, [field]: 'x'.repeat(max + 1) });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ message: `repo.template.update: ${field} is longer than ${max} characters (it has ${max + 1}).` });
    }
    const renamed = await request(app).put('/api/plugin/templates/t').send({ _id: made.body.result._id, label: 'Short' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'n'.repeat(200), label: 'Short' });
    noOutageLogged();
  });

  test("the store: Postgres's refusals for size are 400 TOO_LARGE, not an outage; the store stays usable", async () => {
    const storeLog = memoryLogger();
    const store = new ContentStore({ knex: database.knex, description: 'test', close: async () => {} }, storeLog.logger, { migratedElsewhere: true });
    const many = Array.from({ length: 70_000 }, (_, i) => i);
    // More values than a statement takes (08P01 from both pg and PGlite).
    const tooMany = store.run((db) => db.raw(`select 1 where 1 in (${many.map(() => '?').join(',')})`, many));
    await expect(tooMany).rejects.toMatchObject({
      name: 'BcmsHttpError',
      status: 400,
      code: 'TOO_LARGE',
      message: 'The query has more values than the database takes in one statement (65,535): send fewer at a time.',
    });
    // An index row past its limit (54000): the unique index on name, written around repo's check.
    await expect(store.run((db) => db('bcms_templates').insert({ name: 'x'.repeat(1_000_000) }))).rejects.toMatchObject({
      status: 400,
      code: 'TOO_LARGE',
      message: 'A value is too large for the database: make it shorter.',
    });
    expect(storeLog.lines.map((line) => line.msg)).not.toContain('bcms-extensions: database unreachable');
    expect(await store.run((db) => db.raw('select 1 as one').then((r: { rows: { one: number }[] }) => r.rows[0]?.one))).toBe(1);
    expect(await templateCount()).toBe(1);
  });
});

describe('isUnreachable', () => {
  test.each([
    ['08P01', 'bind message has 4464 parameter formats but 0 parameters'],
    ['54000', 'index row size 3016 exceeds btree version 4 maximum 2704 for index "bcms_templates_name_unique"'],
    ['54001', 'stack depth limit exceeded'],
    ['22001', 'value too long for type character varying(5)'],
  ])('%s (%s) is the server answering, not an outage', (code, message) => {
    expect(isUnreachable(Object.assign(new Error(message), { code }))).toBe(false);
  });

  test('a lost connection still is one', () => {
    expect(isUnreachable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isUnreachable(Object.assign(new Error('the database system is shutting down'), { code: '57P03' }))).toBe(true);
    expect(isUnreachable(Object.assign(new Error('connection failure'), { code: '08006' }))).toBe(true);
  });
});

import { randomBytes } from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, BCMSRepo, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createDocumentRepository, type BcmsExtensionsRouter } from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// Filters and values too large for the database, through plugin repositories and BCMSRepo over
// real HTTP: a 400 that says what is too large, never a 503 or a 500, and no outage in the log.

interface Tagged {
  _id: string;
  createdAt: number;
  updatedAt: number;
  tag: string;
  a?: unknown;
}

/** The filter a request names, run by a plugin handler that catches nothing. */
const FILTERS: Record<string, () => Record<string, unknown>> = {
  // 70,000 items: each a condition, past the cap of 1,000.
  in70k: () => ({ tag: { $in: Array.from({ length: 70_000 }, (_, i) => `t${i}`) } }),
  nin70k: () => ({ tag: { $nin: Array.from({ length: 70_000 }, (_, i) => `t${i}`) } }),
  // 600 + 600 items in two lists: the cap counts the whole filter.
  twoLists: () => ({ $or: [{ tag: { $in: Array.from({ length: 600 }, (_, i) => `a${i}`) } }, { tag: { $in: Array.from({ length: 600 }, (_, i) => `b${i}`) } }] }),
  // Under the cap (900 conditions), but a path of 32 segments with an index in it binds 98 values
  // per item: 88,200 values, past the 65,535 Postgres takes in one statement. The database refuses it.
  deepPath: () => ({ [['a', '0', ...Array.from({ length: 30 }, (_, i) => `s${i}`)].join('.')]: { $in: Array.from({ length: 900 }, (_, i) => i) } }),
  three: () => ({ tag: { $in: ['red', 'blue', 'nothing'] } }),
  notRed: () => ({ tag: { $nin: ['red'] } }),
};

describe.each(backends())('too large for the database, on %s', (backend) => {
  let database: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let log: ReturnType<typeof memoryLogger>;
  const tagged = createDocumentRepository<Tagged>({ name: 'Tagged', collection: `sizes_${backend}` });

  const plugin = createBcmsPlugin({
    name: 'sizes',
    controllers: [
      createController({
        name: 'Find',
        path: '/find',
        methods: () => ({
          find: createControllerMethod({
            path: '/:filter',
            type: 'get',
            handler: async ({ request: req }) => ({ tags: (await tagged.findAllBy(FILTERS[req.params.filter as string]!() as never)).map((doc) => doc.tag) }),
          }),
          count: createControllerMethod({
            path: '/:filter/count',
            type: 'get',
            handler: async ({ request: req }) => ({ count: await tagged.count(FILTERS[req.params.filter as string]!() as never) }),
          }),
        }),
      }),
    ],
  });
  const addTemplate = createBcmsFunction(async () => ({
    config: { name: 'add-template', public: true },
    handler: async ({ request: req }) => BCMSRepo.template.add({ name: req.body.name as string }),
  }));

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    log = memoryLogger();
    router = bcmsExtensions({ plugins: [plugin], functions: [addTemplate] }, { database: database.knex, logger: log.logger });
    app = express().use(router);
    await router.ready;
    await tagged.addMany([{ tag: 'red' }, { tag: 'blue' }, { tag: 'green' }]);
  });
  afterAll(async () => {
    await router.close();
    await database.close();
  });

  /** Neither an outage nor an unexpected error was logged. */
  const noOutageLogged = () => {
    const messages = log.lines.map((line) => line.msg);
    expect(messages).not.toContain('bcms-extensions: database unreachable');
    expect(messages).not.toContain('bcms-extensions: unexpected error');
  };

  test.each(['in70k', 'nin70k', 'twoLists'])('a filter whose lists hold more than 1,000 items (%s) is a 400 naming the cap, before any query', async (filter) => {
    for (const path of [`/api/plugin/sizes/find/${filter}`, `/api/plugin/sizes/find/${filter}/count`]) {
      const res = await request(app).get(path);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.body).toEqual({
        message: expect.stringMatching(/: the filter has more than 1000 conditions \(the most a filter may have; each item of a \$in or \$nin list counts as one\)/),
      });
    }
    noOutageLogged();
  });

  test('the cap is an error the repository throws before its query: a BcmsHttpError 400 (TOO_LARGE)', async () => {
    await expect(tagged.findAllBy(FILTERS.in70k!() as never)).rejects.toMatchObject({ name: 'BcmsHttpError', status: 400, code: 'TOO_LARGE' });
    await expect(tagged.deleteMany(FILTERS.nin70k!() as never)).rejects.toMatchObject({ status: 400, code: 'TOO_LARGE' });
    expect(await tagged.count()).toBe(3); // nothing was deleted
  });

  test('a filter under the cap that the database refuses for its size (more than 65,535 values) is a 400, never a 503', async () => {
    const res = await request(app).get('/api/plugin/sizes/find/deepPath');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'The query has more values than the database takes in one statement (65,535): send fewer at a time.' });
    noOutageLogged();
    // The database was never taken for gone: the next request is answered as before.
    expect((await request(app).get('/api/plugin/sizes/find/three')).body).toEqual({ tags: ['red', 'blue'] });
  });

  test('a value the database refuses for its size (a unique name past its index row limit) is a 400 in the function family, naming the field', async () => {
    // Random hex, which Postgres cannot compress into the index's 2,704 bytes.
    const res = await request(app)
      .post('/api/function/add-template')
      .send({ name: randomBytes(1500).toString('hex') });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'TOO_LARGE', message: 'Field "name" is too large for the database: make it shorter.' } });
    noOutageLogged();
    expect(await BCMSRepo.template.count()).toBe(0);
  });

  test('filters with lists under the cap are answered as before', async () => {
    expect((await request(app).get('/api/plugin/sizes/find/three')).body).toEqual({ tags: ['red', 'blue'] });
    expect((await request(app).get('/api/plugin/sizes/find/notRed/count')).body).toEqual({ count: 2 });
    const added = await request(app).post('/api/function/add-template').send({ name: 'blog' });
    expect(added.status).toBe(200);
    expect(added.body.result).toMatchObject({ name: 'blog', label: 'blog' });
    noOutageLogged();
  });
});

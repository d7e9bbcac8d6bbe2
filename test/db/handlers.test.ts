import request from 'supertest';
import express from 'express';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type BcmsFunctionModule } from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// Loaded at run time: the fixture is type-checked on its own, as a user's project is (npm run typecheck).
const getAllBlogsTitles = (require('../fixtures/functions/get-all-blogs-titles') as { default: BcmsFunctionModule }).default;

const BLOG_TEMPLATE_ID = '6f1c0b7b-a5f9-4d5f-8a4e-7c52a1b2c3d4'; // the id the fixture hard-codes, as the docs do

const stats = createBcmsPlugin({
  name: 'stats',
  controllers: [
    createController({
      name: 'Counts',
      path: '/counts',
      methods: () => ({
        byTemplate: createControllerMethod({
          path: '/',
          type: 'get',
          handler: async ({ repo }) => {
            const templates = await repo.template.findAll();
            return { counts: await Promise.all(templates.map(async (t) => ({ name: t.name, entries: await repo.entry.countByTemplateId(t._id) }))) };
          },
        }),
        entry: createControllerMethod({
          path: '/entry/:id',
          type: 'get',
          handler: async ({ repo, request, errorHandler }) => {
            const entry = await repo.entry.findById(request.params.id as string);
            if (entry === null) throw errorHandler.occurred(404, 'No such entry.');
            return entry;
          },
        }),
      }),
    }),
  ],
});

const store = createBcmsFunction(async () => ({
  config: { name: 'store-submission', public: true },
  handler: async ({ repo, request }) => {
    const template = await repo.template.findByName('submissions');
    const entry = await repo.entry.add({ templateId: template!._id, meta: [{ lng: 'en', props: [{ id: 'email', data: [request.body.email] }] }] });
    return { stored: entry._id };
  },
}));

describe.each(backends())('handlers reach the database on %s', (backend) => {
  let database: TestDatabase;
  let app: express.Express;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    const router = bcmsExtensions({ plugins: [stats], functions: [getAllBlogsTitles, store] }, { database: database.knex, logger: memoryLogger().logger });
    app = express().use(router);
    await router.ready;
    expect(router.db).toBe(database.knex);
    await database.knex('bcms_templates').insert({ id: BLOG_TEMPLATE_ID, name: 'blog', label: 'Blog' });
    await database.knex('bcms_templates').insert({ name: 'submissions', label: 'Submissions' });
    for (const title of ['Hello world', 'Second post']) {
      await database.knex('bcms_entries').insert({
        template_id: BLOG_TEMPLATE_ID,
        meta: JSON.stringify([
          {
            lng: 'en',
            props: [
              { id: 'title', data: [title] },
              { id: 'slug', data: [title.toLowerCase()] },
            ],
          },
        ]),
      });
    }
  });
  afterAll(() => database.close());

  test('the BCMS documentation example, called over HTTP: every blog title', async () => {
    const res = await request(app).post('/api/function/get-all-blogs-titles');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      result: [
        { _id: expect.stringMatching(/^[0-9a-f-]{36}$/), title: 'Hello world' },
        { _id: expect.stringMatching(/^[0-9a-f-]{36}$/), title: 'Second post' },
      ],
    });
  });

  test('a function stores an entry through repo; a plugin counts and finds it', async () => {
    const stored = await request(app).post('/api/function/store-submission').send({ email: 'ada@example.com' });
    expect(stored.status).toBe(200);
    const counts = await request(app).get('/api/plugin/stats/counts');
    expect(counts.body.counts).toEqual(
      expect.arrayContaining([
        { name: 'blog', entries: 2 },
        { name: 'submissions', entries: 1 },
      ]),
    );
    const entry = await request(app).get(`/api/plugin/stats/counts/entry/${stored.body.result.stored}`);
    expect(entry.body.meta[0].props[0].data[0]).toBe('ada@example.com');
  });

  test.each(['not-an-id', "1' or '1'='1", '00000000-0000-4000-8000-000000000000'])('a bad id over HTTP (%s) is a 404 from the handler, never a 500', async (id) => {
    const res = await request(app).get(`/api/plugin/stats/counts/entry/${encodeURIComponent(id)}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'No such entry.' });
  });
});

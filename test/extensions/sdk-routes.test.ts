import request from 'supertest';
import { createBcmsPlugin, createController, createControllerMethod } from '../../lib';
import { createBcmsContentRepo, type BCMSContentRepo } from '../../lib/db/content';
import { ContentStore } from '../../lib/db/store';
import { buildApp, memoryLogger, role, signToken, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

// The routes `window.bcms.sdk` calls (`/api/extensions/...`): real HTTP, real tokens, on each backend.

const OBJECT_ID = /^[0-9a-f]{24}$/;
const CID = /^[0-9a-f]+$/;
const MISSING = '64b7c0ffee0000000000abcd';

const bearer = (token: string) => `Bearer ${token}`;
/** Every permission, under a role name the package does not single out; its own user and props. */
const editorToken = signToken([role('EDITOR', 'READ', 'WRITE', 'DELETE')], { payload: { userId: 'editor-7', props: { personal: { firstName: 'Ada' } } } });
const editor = bearer(editorToken);
const readOnly = bearer(signToken([role('GUEST', 'READ')]));
const writeOnly = bearer(signToken([role('USER', 'WRITE')]));
const noPermission = bearer(signToken([role('SUPPORT')], { payload: { userId: 'support-1' } }));

/** The content repository the SDK routes write through (and BCMSRepo reads through), on the test database. */
let content: BCMSContentRepo;

/** What a plugin handler sees through its context's `repo` and through the content repository, for one template and one entry. */
const probe = createBcmsPlugin({
  name: 'probe',
  controllers: [
    createController({
      name: 'Probe',
      path: '/seen',
      methods: () => ({
        template: createControllerMethod({
          path: '/template/:id',
          type: 'get',
          handler: async ({ repo, request: req }) => ({
            repo: await repo.template.findById(req.params.id as string),
            bcmsRepo: await content.template.findById(req.params.id as string),
          }),
        }),
        entry: createControllerMethod({
          path: '/entry/:id',
          type: 'get',
          handler: async ({ repo, request: req }) => ({
            repo: await repo.entry.findById(req.params.id as string),
            bcmsRepo: await content.entry.findById(req.params.id as string),
          }),
        }),
      }),
    }),
  ],
  policy: () => [{ name: 'Can export', type: 'checkbox' }],
});
const asyncPolicy = createBcmsPlugin({ name: 'async-policy', policy: async () => [{ name: 'Regions', type: 'selectArray', options: ['eu', 'us'], default: ['eu'] }] });
const throwingPolicy = createBcmsPlugin({
  name: 'throwing-policy',
  policy: () => {
    throw new Error('policy store is down');
  },
});
const notAnArrayPolicy = createBcmsPlugin({ name: 'odd-policy', policy: (() => ({ name: 'x' })) as never });
const noPolicy = createBcmsPlugin({ name: 'no-policy' });

describe.each(backends())('the SDK routes under /api/extensions on %s', (backend) => {
  let database: TestDatabase;
  let t: TestApp;
  const api = (path: string) => `/api/extensions${path}`;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    content = createBcmsContentRepo(new ContentStore({ knex: database.knex, description: 'test', close: async () => {} }, memoryLogger().logger, { migratedElsewhere: true }));
    t = await buildApp({ plugins: [probe, asyncPolicy, throwingPolicy, notAnArrayPolicy, noPolicy] }, { database: database.knex });
  });
  afterAll(async () => {
    await t.router.close();
    await database.close();
  });

  const createTemplate = async (body: Record<string, unknown>) => {
    const res = await request(t.app).post(api('/templates')).set('Authorization', editor).send(body);
    expect(res.status).toBe(200);
    return res.body as { _id: string; name: string; label: string };
  };
  const createEntry = async (templateId: string, body: Record<string, unknown>) => {
    const res = await request(t.app)
      .post(api(`/templates/${templateId}/entries`))
      .set('Authorization', editor)
      .send(body);
    expect(res.status).toBe(200);
    return res.body as { _id: string };
  };

  describe('templates', () => {
    test('POST makes the template in BCMS shape, named from its label as BCMS names it, by the token user; repo and the content repository read it', async () => {
      const res = await request(t.app)
        .post(api('/templates'))
        .set('Authorization', editor)
        .send({ label: 'Blog posts - 2024', desc: 'Posts', props: [{ id: 'p1', type: 'STRING' }] });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.body).toEqual({
        _id: expect.stringMatching(OBJECT_ID),
        cid: expect.stringMatching(CID),
        name: 'blog_posts___2024',
        label: 'Blog posts - 2024',
        desc: 'Posts',
        userId: 'editor-7',
        singleEntry: false,
        props: [{ id: 'p1', type: 'STRING' }],
        createdAt: expect.any(Number),
        updatedAt: expect.any(Number),
      });
      const seen = await request(t.app).get(`/api/plugin/probe/seen/template/${res.body._id}`);
      expect(seen.body.bcmsRepo).toEqual(res.body);
      const { cid: _cid, userId: _userId, ...repoShape } = res.body;
      expect(seen.body.repo).toEqual(repoShape);
      expect(await content.template.methods.findByName('blog_posts___2024')).toEqual(res.body);
    });

    test('POST with a name and singleEntry keeps them; a taken name, or a label that slugs to one, is a 400 that says so', async () => {
      const given = await createTemplate({ label: 'Home', name: 'home_page', singleEntry: true });
      expect(given).toMatchObject({ name: 'home_page', label: 'Home', singleEntry: true, desc: '', props: [] });
      const taken = await request(t.app).post(api('/templates')).set('Authorization', editor).send({ label: 'Other', name: 'home_page' });
      expect(taken.status).toBe(400);
      expect(taken.body).toEqual({ message: 'A template named "home_page" exists: give another name or label.' });
      await createTemplate({ label: 'Menu' });
      const slugTaken = await request(t.app).post(api('/templates')).set('Authorization', editor).send({ label: 'MENU' });
      expect(slugTaken.status).toBe(400);
      expect(slugTaken.body).toEqual({ message: 'A template named "menu" exists: give another name or label.' });
    });

    test('POST with a bad body: 400 naming the field', async () => {
      const cases: [unknown, string][] = [
        [{}, 'body.label is required.'],
        [{ label: 7 }, 'body.label must be a string, got a number.'],
        [{ label: 'A', singleEntry: 'yes' }, 'body.singleEntry must be a boolean, got a string.'],
        [{ label: 'A', props: {} }, 'body.props must be an array, got an object.'],
        [{ label: 'A', props: ['p'] }, 'body.props[0] must be an object, got a string.'],
        [{ label: 'A', desc: null }, 'body.desc must be a string, got null.'],
        [[{ label: 'A' }], 'body must be an object, got an array.'],
        [{ label: 'A', name: '' }, 'body.name must not be empty: leave it out to have one made from the label.'],
        [{ label: '!!!' }, 'body.label "!!!" makes no template name (lower-case letters, digits and "_"): give a label with a letter or a digit, or a name.'],
        [{ label: 'Nul\u0000' }, 'body.label contains a NUL character, which Postgres cannot store'],
      ];
      for (const [body, message] of cases) {
        const res = await request(t.app)
          .post(api('/templates'))
          .set('Authorization', editor)
          .send(body as object);
        expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { message } });
      }
      const notJson = await request(t.app).post(api('/templates')).set('Authorization', editor).set('Content-Type', 'application/json').send('{"label":');
      expect(notJson.status).toBe(400);
    });

    test('GET one, all, count and many; unknown or malformed ids: 404, or left out of many', async () => {
      const a = await createTemplate({ label: 'Count A' });
      const b = await createTemplate({ label: 'Count B' });
      const all = (await request(t.app).get(api('/templates')).set('Authorization', readOnly)).body.templates as { _id: string }[];
      expect(all.map((x) => x._id)).toEqual(expect.arrayContaining([a._id, b._id]));
      expect(all.findIndex((x) => x._id === a._id)).toBeLessThan(all.findIndex((x) => x._id === b._id));
      const count = await request(t.app).get(api('/templates/count')).set('Authorization', readOnly);
      expect(count.body).toEqual({ count: all.length });
      expect(
        (
          await request(t.app)
            .get(api(`/templates/${a._id}`))
            .set('Authorization', readOnly)
        ).body,
      ).toEqual(all.find((x) => x._id === a._id));

      const many = await request(t.app)
        .get(api(`/templates/many?ids=${b._id},${MISSING},not-an-id,${a._id},${b._id}`))
        .set('Authorization', readOnly);
      expect(many.status).toBe(200);
      expect(many.body.templates.map((x: { _id: string }) => x._id)).toEqual([b._id, a._id]);
      expect((await request(t.app).get(api('/templates/many?ids=')).set('Authorization', readOnly)).body).toEqual({ templates: [] });
      const noIds = await request(t.app).get(api('/templates/many')).set('Authorization', readOnly);
      expect(noIds.status).toBe(400);
      expect(noIds.body).toEqual({ message: 'Query ids is required: the template ids, separated by commas (?ids=a,b).' });

      for (const id of [MISSING, 'not-an-id', 'x'.repeat(300), '%00', encodeURIComponent("'; drop table bcms_templates; --")]) {
        const res = await request(t.app)
          .get(api(`/templates/${id}`))
          .set('Authorization', readOnly);
        expect({ id, status: res.status, body: res.body }).toEqual({ id, status: 404, body: { message: 'Template not found.' } });
      }
    });

    test('PUT changes the given fields; a new label renames it as BCMS does, unless a name is given; the content repository reads the change', async () => {
      const created = await createTemplate({ label: 'Recipes' });
      const res = await request(t.app).put(api('/templates')).set('Authorization', editor).send({ _id: created._id, label: 'Family recipes', desc: 'Ours' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ _id: created._id, name: 'family_recipes', label: 'Family recipes', desc: 'Ours', userId: 'editor-7' });
      expect(res.body.updatedAt).toBeGreaterThanOrEqual(res.body.createdAt);
      const named = await request(t.app)
        .put(api('/templates'))
        .set('Authorization', editor)
        .send({ _id: created._id, label: 'Recipes!', name: 'kitchen', singleEntry: true, props: [{ id: 'x' }] });
      expect(named.body).toMatchObject({ name: 'kitchen', label: 'Recipes!', singleEntry: true, props: [{ id: 'x' }], desc: 'Ours' });
      expect(await content.template.findById(created._id)).toEqual(named.body);
      // Its own name again is no clash.
      expect((await request(t.app).put(api('/templates')).set('Authorization', editor).send({ _id: created._id, name: 'kitchen' })).status).toBe(200);
    });

    test('PUT: unknown or malformed _id 404; a taken name 400; a bad body 400 naming the field', async () => {
      const created = await createTemplate({ label: 'Put target' });
      await createTemplate({ label: 'Put other' });
      for (const _id of [MISSING, 'nope', 'x'.repeat(300)]) {
        const res = await request(t.app).put(api('/templates')).set('Authorization', editor).send({ _id, label: 'X' });
        expect({ _id, status: res.status, body: res.body }).toEqual({ _id, status: 404, body: { message: 'Template not found.' } });
      }
      const taken = await request(t.app).put(api('/templates')).set('Authorization', editor).send({ _id: created._id, label: 'Put other' });
      expect(taken.status).toBe(400);
      expect(taken.body).toEqual({ message: 'A template named "put_other" exists: give another name or label.' });
      const cases: [unknown, string][] = [
        [{ label: 'X' }, 'body._id is required.'],
        [{ _id: 5 }, 'body._id must be a string, got a number.'],
        [{ _id: created._id, name: ['n'] }, 'body.name must be a string, got an array.'],
        [{ _id: created._id, name: '' }, 'body.name must not be empty: leave it out to have one made from the label.'],
      ];
      for (const [body, message] of cases) {
        const res = await request(t.app)
          .put(api('/templates'))
          .set('Authorization', editor)
          .send(body as object);
        expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { message } });
      }
    });

    test('DELETE answers true and takes its entries with it; then 404', async () => {
      const doomed = await createTemplate({ label: 'Doomed' });
      const entry = await createEntry(doomed._id, { meta: [{ lng: 'en', props: [] }] });
      const res = await request(t.app)
        .delete(api(`/templates/${doomed._id}`))
        .set('Authorization', editor);
      expect(res.status).toBe(200);
      expect(res.body).toBe(true);
      expect(await content.template.findById(doomed._id)).toBeNull();
      expect(await content.entry.findById(entry._id)).toBeNull();
      for (const id of [doomed._id, 'not-an-id']) {
        const again = await request(t.app)
          .delete(api(`/templates/${id}`))
          .set('Authorization', editor);
        expect({ status: again.status, body: again.body }).toEqual({ status: 404, body: { message: 'Template not found.' } });
      }
    });
  });

  describe('entries', () => {
    let template: { _id: string };
    let other: { _id: string };
    const meta = [
      {
        lng: 'en',
        props: [
          { id: 'title', data: ['First'] },
          { id: 'slug', data: ['first'] },
        ],
      },
    ];
    beforeAll(async () => {
      template = await createTemplate({ label: 'Entries home' });
      other = await createTemplate({ label: 'Entries elsewhere' });
    });

    test('POST makes the entry in BCMS shape, by the token user; repo and the content repository read it', async () => {
      const res = await request(t.app)
        .post(api(`/templates/${template._id}/entries`))
        .set('Authorization', editor)
        .send({ meta, content: [{ lng: 'en', nodes: [], plainText: '' }] });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        _id: expect.stringMatching(OBJECT_ID),
        cid: expect.stringMatching(CID),
        templateId: template._id,
        userId: 'editor-7',
        status: '',
        meta,
        content: [{ lng: 'en', nodes: [], plainText: '' }],
        createdAt: expect.any(Number),
        updatedAt: expect.any(Number),
      });
      const seen = await request(t.app).get(`/api/plugin/probe/seen/entry/${res.body._id}`);
      expect(seen.body.bcmsRepo).toEqual(res.body);
      const { cid: _cid, ...repoShape } = res.body;
      expect(seen.body.repo).toEqual(repoShape);
      expect(await content.entry.methods.findByTemplateIdAndRef(template._id, 'first')).toEqual(res.body);
    });

    test('GET all (oldest first), lite (no content), count and one', async () => {
      const fresh = await createTemplate({ label: 'Entries listed' });
      const first = await createEntry(fresh._id, { meta, status: 'draft', content: [{ lng: 'en', nodes: [{ type: 'paragraph' }] }] });
      const second = await createEntry(fresh._id, { meta: [{ lng: 'en', props: [] }] });
      const all = await request(t.app)
        .get(api(`/templates/${fresh._id}/entries`))
        .set('Authorization', readOnly);
      expect(all.status).toBe(200);
      expect(all.body).toEqual({ entries: [first, second] });
      const lite = await request(t.app)
        .get(api(`/templates/${fresh._id}/entries/lite`))
        .set('Authorization', readOnly);
      const { content: _content, ...firstLite } = first as { content?: unknown };
      expect(lite.body.entries[0]).toEqual(firstLite);
      expect(lite.body.entries.map((e: object) => 'content' in e)).toEqual([false, false]);
      expect(
        (
          await request(t.app)
            .get(api(`/templates/${fresh._id}/entries/count`))
            .set('Authorization', readOnly)
        ).body,
      ).toEqual({ count: 2 });
      expect(
        (
          await request(t.app)
            .get(api(`/templates/${fresh._id}/entries/${second._id}`))
            .set('Authorization', readOnly)
        ).body,
      ).toEqual(second);
    });

    test("a template may be named by its _id, its cid or its name, as BCMS's routes take it", async () => {
      const byRef = (await request(t.app).post(api('/templates')).set('Authorization', editor).send({ label: 'By ref' })).body as { _id: string; cid: string; name: string };
      const entry = await createEntry(byRef._id, { meta });
      for (const ref of [byRef._id, byRef.cid, byRef.name]) {
        expect(
          (
            await request(t.app)
              .get(api(`/templates/${ref}`))
              .set('Authorization', readOnly)
          ).body,
        ).toMatchObject({ _id: byRef._id });
        expect(
          (
            await request(t.app)
              .get(api(`/templates/${ref}/entries`))
              .set('Authorization', readOnly)
          ).body,
        ).toEqual({ entries: [entry] });
        expect(
          (
            await request(t.app)
              .get(api(`/templates/${ref}/entries/count`))
              .set('Authorization', readOnly)
          ).body,
        ).toEqual({ count: 1 });
        expect(
          (
            await request(t.app)
              .get(api(`/templates/${ref}/entries/${entry._id}`))
              .set('Authorization', readOnly)
          ).body,
        ).toEqual(entry);
      }
      const viaName = await request(t.app)
        .post(api(`/templates/${byRef.name}/entries`))
        .set('Authorization', editor)
        .send({ meta });
      expect(viaName.body).toMatchObject({ templateId: byRef._id });
      const updated = await request(t.app)
        .put(api(`/templates/${byRef.cid}/entries`))
        .set('Authorization', editor)
        .send({ _id: entry._id, templateId: byRef._id, status: 'ok' });
      expect(updated.body).toMatchObject({ _id: entry._id, status: 'ok' });
      expect(
        (
          await request(t.app)
            .delete(api(`/templates/${byRef.cid}/entries/${viaName.body._id}`))
            .set('Authorization', editor)
        ).body,
      ).toBe(true);
      // A template's own PUT and DELETE take its _id only.
      expect((await request(t.app).put(api('/templates')).set('Authorization', editor).send({ _id: byRef.name, desc: 'x' })).status).toBe(404);
      expect(
        (
          await request(t.app)
            .delete(api(`/templates/${byRef.cid}`))
            .set('Authorization', editor)
        ).status,
      ).toBe(404);
    });

    test('an unknown or malformed template, or an entry of another template: 404', async () => {
      const entry = await createEntry(template._id, { meta });
      for (const path of [`/templates/${MISSING}/entries`, `/templates/${MISSING}/entries/lite`, `/templates/${MISSING}/entries/count`, '/templates/not-an-id/entries']) {
        const res = await request(t.app).get(api(path)).set('Authorization', readOnly);
        expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: { message: 'Template not found.' } });
      }
      for (const path of [
        `/templates/${other._id}/entries/${entry._id}`,
        `/templates/${MISSING}/entries/${entry._id}`,
        `/templates/${template._id}/entries/${MISSING}`,
        `/templates/${template._id}/entries/%00`,
      ]) {
        const res = await request(t.app).get(api(path)).set('Authorization', readOnly);
        expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: { message: 'Entry not found.' } });
      }
      const post = await request(t.app)
        .post(api(`/templates/${MISSING}/entries`))
        .set('Authorization', editor)
        .send({ meta });
      expect(post.status).toBe(404);
      expect(post.body).toEqual({ message: 'Template not found.' });
    });

    test('POST with a bad body: 400 naming the field', async () => {
      const cases: [unknown, string][] = [
        [{}, 'body.meta is required.'],
        [{ meta: {} }, 'body.meta must be an array, got an object.'],
        [{ meta: [{ props: [] }] }, 'body.meta[0].lng is required.'],
        [{ meta: [{ lng: 'en', props: [{ data: [] }] }] }, 'body.meta[0].props[0].id is required.'],
        [
          {
            meta: [
              {
                lng: 'en',
                props: [
                  { id: 'a', data: [] },
                  { id: 'b', data: 'x' },
                ],
              },
            ],
          },
          'body.meta[0].props[1].data must be an array, got a string.',
        ],
        [{ meta: [{ lng: 'en', props: [{ id: 'a' }] }] }, 'body.meta[0].props[0].data must be an array, got nothing.'],
        [{ meta, status: 3 }, 'body.status must be a string, got a number.'],
        [{ meta, content: 'text' }, 'body.content must be an array, got a string.'],
        [{ meta: [{ lng: 'en', props: [{ id: 'a', data: ['\u0000'] }] }] }, 'body.meta contains a NUL character, which Postgres cannot store'],
      ];
      for (const [body, message] of cases) {
        const res = await request(t.app)
          .post(api(`/templates/${template._id}/entries`))
          .set('Authorization', editor)
          .send(body as object);
        expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { message } });
      }
    });

    test('PUT changes the given fields (BCMS sends templateId too); the content repository reads the change', async () => {
      const entry = await createEntry(template._id, { meta, status: 'draft' });
      const changedMeta = [{ lng: 'en', props: [{ id: 'title', data: ['Changed'] }] }];
      const res = await request(t.app)
        .put(api(`/templates/${template._id}/entries`))
        .set('Authorization', editor)
        .send({ _id: entry._id, templateId: template._id, status: 'published', meta: changedMeta });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ _id: entry._id, templateId: template._id, status: 'published', meta: changedMeta, content: [], userId: 'editor-7' });
      expect(await content.entry.findById(entry._id)).toEqual(res.body);
      const contentOnly = await request(t.app)
        .put(api(`/templates/${template._id}/entries`))
        .set('Authorization', editor)
        .send({ _id: entry._id, content: [{ lng: 'en', nodes: [] }] });
      expect(contentOnly.body).toMatchObject({ status: 'published', meta: changedMeta, content: [{ lng: 'en', nodes: [] }] });
    });

    test('PUT: unknown template or entry, or an entry of another template: 404; a bad body or another templateId: 400', async () => {
      const entry = await createEntry(template._id, { meta });
      const notFound: [string, unknown, string][] = [
        [MISSING, { _id: entry._id }, 'Template not found.'],
        [other._id, { _id: entry._id }, 'Entry not found.'],
        [template._id, { _id: MISSING }, 'Entry not found.'],
        [template._id, { _id: 'x'.repeat(300) }, 'Entry not found.'],
      ];
      for (const [templateId, body, message] of notFound) {
        const res = await request(t.app)
          .put(api(`/templates/${templateId}/entries`))
          .set('Authorization', editor)
          .send(body as object);
        expect({ templateId, status: res.status, answer: res.body }).toEqual({ templateId, status: 404, answer: { message } });
      }
      const bad: [unknown, string][] = [
        [{ meta }, 'body._id is required.'],
        [{ _id: entry._id, meta: [{ lng: 1, props: [] }] }, 'body.meta[0].lng must be a string, got a number.'],
        [{ _id: entry._id, templateId: other._id }, `body.templateId "${other._id}" is not the template of the path ("${template._id}"): an entry stays in its template.`],
      ];
      for (const [body, message] of bad) {
        const res = await request(t.app)
          .put(api(`/templates/${template._id}/entries`))
          .set('Authorization', editor)
          .send(body as object);
        expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { message } });
      }
      expect(await content.entry.findById(entry._id)).toMatchObject({ templateId: template._id, meta });
    });

    test('DELETE answers true; then, or under another template, 404', async () => {
      const entry = await createEntry(template._id, { meta });
      const elsewhere = await request(t.app)
        .delete(api(`/templates/${other._id}/entries/${entry._id}`))
        .set('Authorization', editor);
      expect(elsewhere.status).toBe(404);
      expect(await content.entry.findById(entry._id)).not.toBeNull();
      const res = await request(t.app)
        .delete(api(`/templates/${template._id}/entries/${entry._id}`))
        .set('Authorization', editor);
      expect(res.status).toBe(200);
      expect(res.body).toBe(true);
      expect(await content.entry.findById(entry._id)).toBeNull();
      const again = await request(t.app)
        .delete(api(`/templates/${template._id}/entries/${entry._id}`))
        .set('Authorization', editor);
      expect({ status: again.status, body: again.body }).toEqual({ status: 404, body: { message: 'Entry not found.' } });
    });
  });

  describe('who may call what', () => {
    let template: { _id: string };
    let entry: { _id: string };
    beforeAll(async () => {
      template = await createTemplate({ label: 'Guarded' });
      entry = await createEntry(template._id, { meta: [{ lng: 'en', props: [] }] });
    });
    const routes = (): { method: 'get' | 'post' | 'put' | 'delete'; path: string; body?: object; needs: 'READ' | 'WRITE' | 'DELETE' }[] => [
      { method: 'get', path: '/templates', needs: 'READ' },
      { method: 'get', path: '/templates/count', needs: 'READ' },
      { method: 'get', path: `/templates/many?ids=${template._id}`, needs: 'READ' },
      { method: 'get', path: `/templates/${template._id}`, needs: 'READ' },
      { method: 'get', path: `/templates/${template._id}/entries`, needs: 'READ' },
      { method: 'get', path: `/templates/${template._id}/entries/lite`, needs: 'READ' },
      { method: 'get', path: `/templates/${template._id}/entries/count`, needs: 'READ' },
      { method: 'get', path: `/templates/${template._id}/entries/${entry._id}`, needs: 'READ' },
      { method: 'get', path: '/plugins', needs: 'READ' },
      { method: 'post', path: '/templates', body: { label: 'Never made' }, needs: 'WRITE' },
      { method: 'put', path: '/templates', body: { _id: template._id, label: 'Never renamed' }, needs: 'WRITE' },
      { method: 'post', path: `/templates/${template._id}/entries`, body: { meta: [] }, needs: 'WRITE' },
      { method: 'put', path: `/templates/${template._id}/entries`, body: { _id: entry._id, status: 'never' }, needs: 'WRITE' },
      { method: 'delete', path: `/templates/${template._id}/entries/${entry._id}`, needs: 'DELETE' },
      { method: 'delete', path: `/templates/${template._id}`, needs: 'DELETE' },
    ];

    test('no token: 401 with a Bearer challenge, on every route', async () => {
      for (const { method, path, body } of [...routes(), { method: 'get' as const, path: '/user', body: undefined }]) {
        const res = await request(t.app)[method](api(path)).send(body);
        expect({ method, path, status: res.status, body: res.body, challenge: res.headers['www-authenticate'] }).toEqual({
          method,
          path,
          status: 401,
          body: { message: 'Token is `undefined`.' },
          challenge: expect.stringContaining('Bearer'),
        });
      }
      const forged = await request(t.app)
        .get(api('/user'))
        .set('Authorization', bearer(signToken([role('ADMIN', 'READ')], { secret: 'another-secret-of-enough-length' })));
      expect(forged.status).toBe(401);
    });

    test('a role without the permission: 403; READ cannot write or delete, WRITE cannot read; nothing changed', async () => {
      const tokens = { READ: readOnly, WRITE: writeOnly, DELETE: bearer(signToken([role('MANAGER', 'DELETE')])) };
      for (const { method, path, body, needs } of routes()) {
        for (const [holds, token] of Object.entries(tokens)) {
          if (holds === needs) continue;
          const res = await request(t.app)[method](api(path)).set('Authorization', token).send(body);
          expect({ method, path, holds, status: res.status, body: res.body }).toEqual({ method, path, holds, status: 403, body: { message: 'Token is not authorized for this action.' } });
        }
      }
      expect(await content.template.findById(template._id)).toMatchObject({ label: 'Guarded' });
      expect(await content.entry.findById(entry._id)).toMatchObject({ status: '' });
      expect(await content.template.methods.findByName('never_made')).toBeNull();
    });

    test('the permission under any role name is enough', async () => {
      const viaGuest = await request(t.app)
        .post(api('/templates'))
        .set('Authorization', bearer(signToken([role('GUEST', 'WRITE')], { payload: { userId: 'guest-2' } })))
        .send({ label: 'By a guest' });
      expect(viaGuest.status).toBe(200);
      expect(viaGuest.body).toMatchObject({ name: 'by_a_guest', userId: 'guest-2' });
    });
  });

  describe('the signed-in user and the plugins', () => {
    test("GET /user: the token user in BCMS's BCMSUser names, for a token whose roles hold no permission too", async () => {
      const res = await request(t.app).get(api('/user')).set('Authorization', editor);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        _id: 'editor-7',
        username: 'editor-7',
        email: '',
        roles: [{ name: 'EDITOR', permissions: [{ name: 'READ' }, { name: 'WRITE' }, { name: 'DELETE' }] }],
        // BCMS's shape, the token's props over it: a BCMS UI reads customPool.policy.plugins without checking.
        customPool: {
          personal: { firstName: 'Ada', lastName: '', avatarUri: '' },
          policy: { media: { get: false, post: false, put: false, delete: false }, templates: [], plugins: [] },
        },
      });
      const bare = await request(t.app).get(api('/user')).set('Authorization', noPermission);
      expect(bare.status).toBe(200);
      expect(bare.body).toMatchObject({ _id: 'support-1', username: 'support-1', email: '', roles: [{ name: 'SUPPORT', permissions: [] }] });
      expect(bare.body.customPool.policy.plugins).toEqual([]);
      // A host that puts the name and email in the token's props has them answered.
      const named = bearer(signToken([role('USER', 'READ')], { payload: { userId: 'u-9', props: { username: 'grace', email: 'grace@example.com' } } }));
      expect((await request(t.app).get(api('/user')).set('Authorization', named)).body).toMatchObject({ _id: 'u-9', username: 'grace', email: 'grace@example.com' });
    });

    test('GET /plugins: each with the policies its policy() resolves to; one that throws or gives no array lists none, logged, never a 500', async () => {
      const res = await request(t.app).get(api('/plugins')).set('Authorization', readOnly);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        plugins: [
          { name: 'probe', label: 'Probe', uiUrl: null, policies: [{ name: 'Can export', type: 'checkbox' }] },
          { name: 'async-policy', label: 'Async policy', uiUrl: null, policies: [{ name: 'Regions', type: 'selectArray', options: ['eu', 'us'], default: ['eu'] }] },
          { name: 'throwing-policy', label: 'Throwing policy', uiUrl: null, policies: [] },
          { name: 'odd-policy', label: 'Odd policy', uiUrl: null, policies: [] },
          { name: 'no-policy', label: 'No policy', uiUrl: null, policies: [] },
        ],
      });
      const warnings = t.log.lines.filter((line) => line.level === 40 && line.plugin !== undefined);
      expect(warnings).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            plugin: 'throwing-policy',
            msg: 'bcms-extensions: plugin "throwing-policy": policy() threw; listed with no policies',
            err: expect.objectContaining({ message: 'policy store is down' }),
          }),
          expect.objectContaining({ plugin: 'odd-policy', msg: 'bcms-extensions: plugin "odd-policy": policy() resolved to something other than an array; listed with no policies' }),
        ]),
      );
      // The reason stays in the log.
      expect(res.text).not.toContain('policy store is down');
    });
  });
});

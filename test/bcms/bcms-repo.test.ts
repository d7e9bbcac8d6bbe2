import express from 'express';
import request from 'supertest';
import {
  bcmsExtensions,
  BCMSRepo,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  migrate,
  MIGRATIONS_DIRECTORY,
  MIGRATIONS_TABLE,
  type BcmsExtensionsRouter,
  type BCMSEntry,
} from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

const OBJECT_ID = /^[0-9a-f]{24}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MIGRATIONS = { directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const columnTypes = async (database: TestDatabase, table: string): Promise<Record<string, string>> => {
  const columns = await database.knex('information_schema.columns').select('column_name', 'data_type').where({ table_name: table }).whereRaw('table_schema = current_schema()');
  return Object.fromEntries(columns.map((c: { column_name: string; data_type: string }) => [c.column_name, c.data_type]));
};

describe.each(backends())('the text-id migration on %s, over rows with UUIDs', (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    await migrate(database.knex);
    // Back to uuid ids, as a database of the last release has them (later migrations stay: they touch other tables).
    await database.knex.migrate.down({ ...MIGRATIONS, name: '20261123020000_text_ids.js' });
  });
  afterAll(() => database.close());

  test('ids and template_id become text; rows keep their ids, gain cids; the foreign key and the index stay', async () => {
    const knex = database.knex;
    expect(await columnTypes(database, 'bcms_entries')).toMatchObject({ id: 'uuid', template_id: 'uuid' });
    const [blog] = await knex('bcms_templates')
      .insert([{ name: 'blog' }, { name: 'news' }])
      .returning(['id']);
    const [first, second] = await knex('bcms_entries')
      .insert([{ template_id: blog.id }, { template_id: blog.id, status: 'draft' }])
      .returning(['id']);
    expect(blog.id).toMatch(UUID);

    expect(await migrate(knex)).toEqual(['20261123020000_text_ids.js']);

    expect(await columnTypes(database, 'bcms_entries')).toMatchObject({ id: 'text', template_id: 'text', cid: 'text' });
    expect(await columnTypes(database, 'bcms_templates')).toMatchObject({ id: 'text', cid: 'text', user_id: 'text' });
    const templates = await knex('bcms_templates').select('id', 'cid', 'seq').orderBy('seq');
    expect(templates.map((t: { id: string }) => t.id)).toContain(blog.id);
    for (const t of templates as { cid: string; seq: string | number }[]) expect(t.cid).toBe(Number(t.seq).toString(16));
    const entries = await knex('bcms_entries').select('id', 'cid', 'template_id').orderBy('seq');
    expect(entries).toEqual([
      { id: first.id, cid: expect.stringMatching(/^[0-9a-f]+$/), template_id: blog.id },
      { id: second.id, cid: expect.stringMatching(/^[0-9a-f]+$/), template_id: blog.id },
    ]);
    expect(entries[0].cid).not.toBe(entries[1].cid);

    const indexes = await knex.raw("select indexdef from pg_indexes where tablename = 'bcms_entries' and schemaname = current_schema()");
    expect(indexes.rows.map((r: { indexdef: string }) => r.indexdef).join('\n')).toMatch(/\(template_id, created_at, seq\)/);
    const fks = await knex.raw("select confdeltype from pg_constraint where contype = 'f' and conrelid = 'bcms_entries'::regclass");
    expect(fks.rows).toEqual([{ confdeltype: 'c' }]);

    // New rows: a UUID made by the database when none is given, the next cid of their table.
    const [added] = await knex('bcms_entries').insert({ template_id: blog.id }).returning(['id', 'cid']);
    expect(added.id).toMatch(UUID);
    expect(parseInt(added.cid, 16)).toBeGreaterThan(Math.max(...entries.map((e: { cid: string }) => parseInt(e.cid, 16))));
    // The foreign key still holds, and still cascades.
    await expect(knex('bcms_entries').insert({ template_id: '000000000000000000000000' })).rejects.toMatchObject({ code: '23503' });
    await knex('bcms_templates').where('id', blog.id).delete();
    expect(Number((await knex('bcms_entries').count({ n: '*' }).first())?.n)).toBe(0);
  });
});

describe.each(backends())('BCMSRepo as BCMS has it, on %s', (backend) => {
  let database: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;

  const plugin = createBcmsPlugin({
    name: 'content',
    controllers: [
      createController({
        name: 'Entries',
        path: '/entries',
        methods: () => ({
          // The handler context's repository and BCMSRepo, side by side, for BCMS's ids.
          fromContext: createControllerMethod({
            path: '/context/:id',
            type: 'get',
            handler: async ({ repo, request, errorHandler }) => {
              const entry = await repo.entry.findById(request.params.id as string);
              if (entry === null) throw errorHandler.occurred(404, 'No such entry.');
              return entry;
            },
          }),
          fromBcmsRepo: createControllerMethod({
            path: '/:templateId/:id',
            type: 'get',
            handler: async ({ request, errorHandler }) => {
              const entry = await BCMSRepo.entry.methods.findByTemplateIdAndId(request.params.templateId as string, request.params.id as string);
              if (entry === null) throw errorHandler.occurred(404, 'No such entry.');
              return entry;
            },
          }),
        }),
      }),
    ],
  });

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    router = bcmsExtensions({ plugins: [plugin] }, { database: database.knex, logger: memoryLogger().logger });
    app = express().use(router);
    await router.ready;
  });
  afterAll(async () => {
    await router.close();
    await database.close();
  });

  test('templates: add makes a 24-hex id and a cid, keeps a given id; the base methods at the top level', async () => {
    const blog = await BCMSRepo.template.add({ name: 'blog', label: 'Blog', props: [{ type: 'STRING' }] });
    expect(blog).toEqual({
      _id: expect.stringMatching(OBJECT_ID),
      cid: expect.stringMatching(/^[0-9a-f]+$/),
      name: 'blog',
      label: 'Blog',
      desc: '',
      userId: '',
      singleEntry: false,
      props: [{ type: 'STRING' }],
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    const given = await BCMSRepo.template.add({ _id: '63bc0b7ba5f9d5f5ea4e7c52', name: 'pages', userId: 'u1', cid: 'a0' });
    expect(given).toMatchObject({ _id: '63bc0b7ba5f9d5f5ea4e7c52', cid: 'a0', userId: 'u1', label: 'pages' });
    await expect(BCMSRepo.template.add({ _id: '63bc0b7ba5f9d5f5ea4e7c52', name: 'other' })).rejects.toThrow('BCMSRepo.template.add: a template with _id "63bc0b7ba5f9d5f5ea4e7c52" exists: use update');
    await expect(BCMSRepo.template.add({ name: 'blog' })).rejects.toThrow('BCMSRepo.template.add: a template named "blog" exists');
    await expect(BCMSRepo.template.add({ _id: 'my-id', name: 'x' })).rejects.toThrow(
      new TypeError('BCMSRepo.template.add: _id "my-id" is not an id (24 to 64 hex characters, as BCMS makes them, or a UUID)'),
    );
    await expect(BCMSRepo.template.add({ name: '' })).rejects.toThrow(TypeError);

    expect((await BCMSRepo.template.findAll()).map((t) => t.name)).toEqual(['blog', 'pages']);
    expect(await BCMSRepo.template.findById(given._id)).toEqual(given);
    expect((await BCMSRepo.template.findAllById([given._id, 'nothing', blog._id])).map((t) => t.name)).toEqual(['pages', 'blog']);
    expect((await BCMSRepo.template.findBy((t) => t.userId === 'u1'))?._id).toBe(given._id);
    expect((await BCMSRepo.template.findAllBy((t) => t.props.length > 0)).map((t) => t.name)).toEqual(['blog']);
    expect(await BCMSRepo.template.count()).toBe(2);
    await expect(BCMSRepo.template.findBy({ name: 'blog' } as never)).rejects.toThrow(new TypeError('BCMSRepo.template.findBy: takes a predicate function (entity) => boolean, got an object'));

    await pause(5);
    const updated = await BCMSRepo.template.update({ ...blog, desc: 'Posts', singleEntry: true });
    expect(updated).toEqual({ ...blog, desc: 'Posts', singleEntry: true, updatedAt: expect.any(Number) });
    expect(updated.updatedAt).toBeGreaterThan(blog.updatedAt);
    await expect(BCMSRepo.template.update({ _id: 'ffffffffffffffffffffffff', label: 'x' })).rejects.toThrow('BCMSRepo.template.update: there is no row with _id "ffffffffffffffffffffffff": use add');
  });

  test('template methods: by ref, name, cid; by prop pointers', async () => {
    const widgetId = 'aaaaaaaaaaaaaaaaaaaaaaaa';
    const t = await BCMSRepo.template.add({
      name: 'rich',
      props: [
        { type: 'GROUP_POINTER', defaultData: { _id: 'g1' } },
        { type: 'ENTRY_POINTER', defaultData: [{ templateId: 't9', entryIds: [] }] },
        { type: 'TAG', defaultData: ['tag1'] },
        { type: 'MEDIA', defaultData: ['m1'] },
        { type: 'WIDGET', defaultData: { _id: widgetId } },
      ],
    });
    const m = BCMSRepo.template.methods;
    for (const ref of [t._id, t.cid, 'rich']) expect((await m.findByRef(ref))?._id).toBe(t._id);
    expect((await m.findByName('rich'))?._id).toBe(t._id);
    expect((await m.findByCid(t.cid))?._id).toBe(t._id);
    expect((await m.findAllByCid([t.cid, 'zzz'])).map((x) => x._id)).toEqual([t._id]);
    expect((await m.findAllByPropGroupPointer('g1')).map((x) => x.name)).toEqual(['rich']);
    expect((await m.findAllByPropEntryPointer('t9')).map((x) => x.name)).toEqual(['rich']);
    expect((await m.findAllByPropTag('tag1')).map((x) => x.name)).toEqual(['rich']);
    expect((await m.findAllByPropMedia('m1')).map((x) => x.name)).toEqual(['rich']);
    expect((await m.findAllByPropWidget(widgetId)).map((x) => x.name)).toEqual(['rich']);
    expect(await m.findAllByPropTag('g1')).toEqual([]);
    expect(await m.findByRef("' or 1=1 --")).toBeNull();
    expect(await m.findByName('nothing')).toBeNull();
  });

  test("entries: the base methods and BCMS's methods, with 24-hex ids", async () => {
    const news = await BCMSRepo.template.add({ name: 'news' });
    const other = await BCMSRepo.template.add({ name: 'other' });
    const meta = (title: string) => [
      {
        lng: 'en',
        props: [
          { id: 'title', data: [title] },
          { id: 'slug', data: [title.toLowerCase()] },
        ],
      },
    ];
    const a = await BCMSRepo.entry.add({ templateId: news._id, userId: 'u1', status: 'draft', meta: meta('First') });
    expect(a).toEqual({
      _id: expect.stringMatching(OBJECT_ID),
      cid: expect.stringMatching(/^[0-9a-f]+$/),
      templateId: news._id,
      userId: 'u1',
      status: 'draft',
      meta: meta('First'),
      content: [],
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    // As BCMS: the object given gets its id, cid and times.
    const given = { templateId: news._id, status: 'draft' } as Partial<BCMSEntry> & { templateId: string };
    const written = await BCMSRepo.entry.add(given);
    expect(given).toMatchObject({ _id: written._id, cid: written.cid, createdAt: written.createdAt, updatedAt: written.updatedAt });
    expect(await BCMSRepo.entry.deleteById(written._id)).toBe(true);
    const b = await BCMSRepo.entry.methods.add({
      _id: '64aaaaaaaaaaaaaaaaaaaaaa',
      templateId: news._id,
      status: 'published',
      meta: meta('Second'),
      content: [{ lng: 'en', nodes: [{ type: 'widget', attrs: { _id: 'w1' } }] }],
    });
    expect(b._id).toBe('64aaaaaaaaaaaaaaaaaaaaaa');
    const [c] = await BCMSRepo.entry.addMany([{ templateId: other._id, status: 'draft' }]);
    await expect(BCMSRepo.entry.add({ templateId: 'ffffffffffffffffffffffff' })).rejects.toThrow('BCMSRepo.entry.add: no template with id "ffffffffffffffffffffffff"');
    await expect(BCMSRepo.entry.add({ templateId: 'nope' })).rejects.toThrow(new TypeError('BCMSRepo.entry.add: templateId "nope" is not a template id'));
    await expect(BCMSRepo.entry.add({ _id: b._id, templateId: news._id })).rejects.toThrow(`BCMSRepo.entry.add: an entry with _id "${b._id}" exists: use update`);

    const m = BCMSRepo.entry.methods;
    expect((await m.findAllByTemplateId(news._id)).map((e) => e._id)).toEqual([a._id, b._id]);
    expect(await m.countByTemplateId(news._id)).toBe(2);
    expect((await m.findByTemplateIdAndId(news._id, b._id))?._id).toBe(b._id);
    expect(await m.findByTemplateIdAndId(other._id, b._id)).toBeNull();
    expect((await m.findByTemplateIdAndCid(news._id, a.cid))?._id).toBe(a._id);
    for (const ref of [a._id, a.cid, 'first']) expect((await m.findByTemplateIdAndRef(news._id, ref))?._id).toBe(a._id);
    expect(await m.findByTemplateIdAndRef(other._id, 'first')).toBeNull();
    expect((await m.findAllByStatus('draft')).map((e) => e._id)).toEqual([a._id, c!._id]);
    expect((await m.findAllByWidgetId('w1')).map((e) => e._id)).toEqual([b._id]);
    await m.clearAllStatuses('draft');
    expect(await m.findAllByStatus('draft')).toEqual([]);
    expect((await BCMSRepo.entry.findById(a._id))?.status).toBe('');

    expect(await BCMSRepo.entry.count()).toBe(3);
    expect((await BCMSRepo.entry.findAllBy((e) => e.status === 'published')).map((e) => e._id)).toEqual([b._id]);
    const updated = await BCMSRepo.entry.update({ ...(b as BCMSEntry), status: 'archived' });
    expect(updated).toMatchObject({ _id: b._id, cid: b.cid, status: 'archived', meta: b.meta });
    await expect(BCMSRepo.entry.update({ _id: '000000000000000000000000', status: 'x' })).rejects.toThrow(/there is no row with _id "000000000000000000000000"/);
    expect(
      (
        await BCMSRepo.entry.updateMany(
          (e) => e.templateId === news._id,
          (e) => ({ ...e, userId: 'u2' }),
        )
      ).map((e) => e.userId),
    ).toEqual(['u2', 'u2']);
    expect((await BCMSRepo.entry.updateMany([{ _id: a._id, status: 'done' }])).map((e) => e.status)).toEqual(['done']);

    expect(await BCMSRepo.entry.deleteOne((e) => e._id === c!._id)).toBe(true);
    expect(await BCMSRepo.entry.deleteOne(() => false)).toBe(false);
    expect(await BCMSRepo.entry.deleteAllById([a._id])).toBe(true);
    expect(await BCMSRepo.entry.deleteById(a._id)).toBe(false);
    const d = await BCMSRepo.entry.add({ templateId: other._id });
    expect(await BCMSRepo.entry.deleteMany((e) => e._id === d._id)).toBe(true);
    await m.deleteAllByTemplateId(news._id);
    expect(await m.countByTemplateId(news._id)).toBe(0);
  });

  test('unknown and malformed ids find nothing, never a database error', async () => {
    for (const id of ['ffffffffffffffffffffffff', 'not-an-id', "' or 1=1; drop table bcms_entries; --", '%', 'a\u0000b', '\ud800', 42, undefined, { $ne: null }]) {
      const anyId = id as string;
      expect(await BCMSRepo.entry.findById(anyId)).toBeNull();
      expect(await BCMSRepo.template.findById(anyId)).toBeNull();
      expect(await BCMSRepo.entry.methods.findAllByTemplateId(anyId)).toEqual([]);
      expect(await BCMSRepo.entry.methods.countByTemplateId(anyId)).toBe(0);
      expect(await BCMSRepo.entry.deleteById(anyId)).toBe(false);
      expect(await BCMSRepo.template.methods.findByCid(anyId)).toBeNull();
    }
    const many = Array.from({ length: 70_000 }, (_, i) => i.toString(16).padStart(24, '0'));
    expect(await BCMSRepo.template.findAllById(many)).toEqual([]);
    expect(await BCMSRepo.entry.deleteAllById(many)).toBe(false);
    expect(await BCMSRepo.template.methods.findAllByCid(many)).toEqual([]);
    expect(await database.knex.schema.hasTable('bcms_entries')).toBe(true);
  });

  test("over HTTP: a 24-hex entry is found by the handler context's repo and by BCMSRepo; UUIDs still work", async () => {
    const template = await BCMSRepo.template.add({ _id: '650000000000000000000001', name: 'http' });
    const entry = await BCMSRepo.entry.add({ _id: '650000000000000000000002', templateId: template._id, meta: [] });
    const viaContext = await request(app).get(`/api/plugin/content/entries/context/${entry._id}`);
    expect(viaContext.status).toBe(200);
    expect(viaContext.body).toMatchObject({ _id: entry._id, templateId: template._id });
    const viaBcmsRepo = await request(app).get(`/api/plugin/content/entries/${template._id}/${entry._id}`);
    expect(viaBcmsRepo.status).toBe(200);
    expect(viaBcmsRepo.body).toEqual(entry);
    expect((await request(app).get(`/api/plugin/content/entries/context/ffffffffffffffffffffffff`)).status).toBe(404);
    expect((await request(app).get(`/api/plugin/content/entries/${template._id}/not-an-id`)).status).toBe(404);
    // A row made without an id (the handler context's add) has a UUID, and BCMSRepo finds it by it.
    const [legacy] = await database.knex('bcms_entries').insert({ template_id: template._id }).returning(['id']);
    expect(legacy.id).toMatch(UUID);
    expect((await BCMSRepo.entry.findById(legacy.id))?.templateId).toBe(template._id);
    expect((await request(app).get(`/api/plugin/content/entries/${template._id}/${legacy.id}`)).body._id).toBe(legacy.id);
  });
});

describe('BCMSRepo', () => {
  test('used before any router was built, it says what to do', () => {
    jest.isolateModules(() => {
      const fresh = require('../../lib') as typeof import('../../lib');
      expect(() => fresh.BCMSRepo.entry.methods.findAllByTemplateId('x')).toThrow(
        'BCMSRepo was used before any router was built: call bcmsExtensions(...) first, or use `repo` from the handler context',
      );
    });
  });
});

import { createRepository, type BcmsRepo } from '../../lib/db/repository';
import { ContentStore } from '../../lib/db/store';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

describe.each(backends())('repository on %s', (backend) => {
  let database: TestDatabase;
  let repo: BcmsRepo;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    const store = new ContentStore({ knex: database.knex, description: backend, close: async () => {} }, memoryLogger().logger);
    repo = createRepository(store);
  });
  afterAll(() => database.close());

  test('templates: add, find by id and name, update, list, in BCMS shape', async () => {
    const blog = await repo.template.add({ name: 'blog', label: 'Blog', props: [{ name: 'title', type: 'STRING' }] });
    expect(blog).toEqual({
      _id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'blog',
      label: 'Blog',
      desc: '',
      singleEntry: false,
      props: [{ name: 'title', type: 'STRING' }],
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    expect(Math.abs(blog.createdAt - Date.now())).toBeLessThan(60_000);
    expect(await repo.template.findById(blog._id)).toEqual(blog);
    expect(await repo.template.findByName('blog')).toEqual(blog);
    const updated = await repo.template.update({ _id: blog._id, desc: 'Posts', singleEntry: true });
    expect(updated).toMatchObject({ _id: blog._id, desc: 'Posts', singleEntry: true, label: 'Blog' });
    expect(updated!.updatedAt).toBeGreaterThanOrEqual(blog.updatedAt);
    expect((await repo.template.findAll()).map((t) => t.name)).toContain('blog');
    await expect(repo.template.add({ name: 'blog' })).rejects.toThrow('repo.template.add: a template named "blog" exists');
  });

  test('entries: add, find, count, update, delete; meta[0].props[0].data[0] is the first value', async () => {
    const template = await repo.template.add({ name: 'news' });
    const meta = [{ lng: 'en', props: [{ id: 'title', data: ['First news'] }] }];
    const entry = await repo.entry.add({ templateId: template._id, userId: 'u1', status: 'active', meta, content: [{ lng: 'en', nodes: [] }] });
    expect(entry).toEqual({
      _id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      templateId: template._id,
      userId: 'u1',
      status: 'active',
      meta,
      content: [{ lng: 'en', nodes: [] }],
      createdAt: expect.any(Number),
      updatedAt: expect.any(Number),
    });
    expect(entry.meta[0]!.props[0]!.data[0]).toBe('First news');
    expect(await repo.entry.findById(entry._id)).toEqual(entry);
    expect(await repo.entry.countByTemplateId(template._id)).toBe(1);
    const changed = await repo.entry.update({ _id: entry._id, status: 'draft' });
    expect(changed).toMatchObject({ _id: entry._id, status: 'draft', meta });
    expect(await repo.entry.deleteById(entry._id)).toBe(true);
    expect(await repo.entry.deleteById(entry._id)).toBe(false);
    expect(await repo.entry.findById(entry._id)).toBeNull();
    expect(await repo.entry.countByTemplateId(template._id)).toBe(0);
  });

  test('findAllByTemplateId: only that template, oldest first, in the order they were added', async () => {
    const a = await repo.template.add({ name: 'ordered' });
    const b = await repo.template.add({ name: 'other' });
    const added = [];
    for (let i = 0; i < 5; i++) added.push(await repo.entry.add({ templateId: a._id, meta: [{ lng: 'en', props: [{ id: 't', data: [`#${i}`] }] }] }));
    await repo.entry.add({ templateId: b._id });
    const found = await repo.entry.findAllByTemplateId(a._id);
    expect(found.map((e) => e._id)).toEqual(added.map((e) => e._id));
    expect(found.map((e) => e.meta[0]!.props[0]!.data[0])).toEqual(['#0', '#1', '#2', '#3', '#4']);
    expect(await repo.entry.countByTemplateId(a._id)).toBe(5);
  });

  test('deleting a template deletes its entries, as BCMS does', async () => {
    const template = await repo.template.add({ name: 'doomed' });
    const entry = await repo.entry.add({ templateId: template._id });
    expect(await repo.template.deleteById(template._id)).toBe(true);
    expect(await repo.entry.findById(entry._id)).toBeNull();
    expect(await repo.template.findById(template._id)).toBeNull();
  });

  const BAD_IDS: [string, unknown][] = [
    ['unknown', '00000000-0000-4000-8000-000000000000'],
    ['malformed', 'not-an-id'],
    ['a BCMS ObjectId', '63bc0b7ba5f9d5f5ea4e7c52'],
    ['not a string (number)', 42],
    ['not a string (object)', { $ne: null }],
    ['undefined', undefined],
    ['SQL metacharacters', "' or 1=1; drop table bcms_entries; --"],
    ['a LIKE pattern', '%'],
  ];

  test.each(BAD_IDS)('an id that is %s finds nothing, never a database error', async (_name, id) => {
    const anyId = id as string;
    await expect(repo.entry.findAllByTemplateId(anyId)).resolves.toEqual([]);
    await expect(repo.entry.findById(anyId)).resolves.toBeNull();
    await expect(repo.entry.countByTemplateId(anyId)).resolves.toBe(0);
    await expect(repo.entry.update({ _id: anyId, status: 'x' })).resolves.toBeNull();
    await expect(repo.entry.deleteById(anyId)).resolves.toBe(false);
    await expect(repo.template.findById(anyId)).resolves.toBeNull();
    await expect(repo.template.findByName(anyId)).resolves.toBeNull();
    await expect(repo.template.update({ _id: anyId, label: 'x' })).resolves.toBeNull();
    await expect(repo.template.deleteById(anyId)).resolves.toBe(false);
  });

  test('the tables survive the metacharacters above', async () => {
    expect(await database.knex.schema.hasTable('bcms_entries')).toBe(true);
  });

  test('what Postgres cannot store, or that would break the BCMS shape, is refused with a clear error', async () => {
    const template = await repo.template.add({ name: 'strict' });
    const entry = await repo.entry.add({ templateId: template._id });
    await expect(repo.entry.update({ _id: entry._id, meta: null as never })).rejects.toThrow('repo.entry.update: meta must be an array');
    await expect(repo.entry.update({ _id: entry._id, meta: 'oops' as never })).rejects.toThrow('repo.entry.update: meta must be an array');
    await expect(repo.entry.update({ _id: entry._id, userId: null as never })).rejects.toThrow('repo.entry.update: userId must be a string');
    await expect(repo.entry.add({ templateId: template._id, meta: [{ lng: 'en', props: [{ id: 't', data: ['a\u0000b'] }] }] })).rejects.toThrow('repo.entry.add: meta contains a NUL character');
    await expect(repo.template.update({ _id: template._id, name: '' })).rejects.toThrow('repo.template.update: name must be a non-empty string');
    await repo.template.add({ name: 'taken' });
    await expect(repo.template.update({ _id: template._id, name: 'taken' })).rejects.toThrow('repo.template.update: a template named "taken" exists');
    await expect(repo.template.findByName('a\u0000b')).resolves.toBeNull();
    expect(await repo.entry.findById(entry._id)).toMatchObject({ meta: [], userId: '' }); // nothing was half-written
  });

  test('adding an entry to a template that is not there says so', async () => {
    await expect(repo.entry.add({ templateId: '00000000-0000-4000-8000-000000000000' })).rejects.toThrow('repo.entry.add: no template with id "00000000-0000-4000-8000-000000000000"');
    await expect(repo.entry.add({ templateId: 'nope' })).rejects.toThrow('repo.entry.add: templateId "nope" is not a template id');
  });
});

import express from 'express';
import knexFactory, { type Knex } from 'knex';
import request from 'supertest';
import {
  bcmsExtensions,
  BCMSConfig,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createDocumentRepository,
  createFSDBRepository,
  createMongoDBCachedRepository,
  FSDBEntitySchema,
  MAX_DOCUMENT_BYTES,
  objectSchemaToMongoDBSchema,
  type BcmsExtensionsRouter,
  type FSDBEntity,
  type FSDBRepository,
  type FSDBRepositoryConfig,
  type MongoDBCachedRepository,
  type MongoDBInterface,
} from '../../lib';
import type { ObjectSchema } from '../../lib/schema/object-schema';
import { renderFilter } from '../../lib/bcms/db/document-filter';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, serverSchema, type TestDatabase } from '../support/database';

interface Todo extends FSDBEntity {
  description: string;
  done: boolean;
  priority?: number;
  tags?: string[];
  author?: { name: string };
  note?: string | null;
}

const TodoSchema: ObjectSchema = {
  ...FSDBEntitySchema,
  description: { __type: 'string', __required: true },
  done: { __type: 'boolean', __required: true },
  priority: { __type: 'number', __required: false },
  tags: { __type: 'array', __required: false, __child: { __type: 'string' } },
  author: { __type: 'object', __required: false, __child: { name: { __type: 'string', __required: true } } },
};

const OBJECT_ID = /^[0-9a-f]{24}$/;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface TodoMethods {
  findByDescription(description: string): Promise<Todo | null>;
  findAllByDone(done: boolean): Promise<Todo[]>;
}

// Made at module load, before any router exists, as BCMS plugins make theirs.
let collectionCounter = 0;
const fsdbTodos = (suffix: string): FSDBRepository<Todo, TodoMethods> =>
  createFSDBRepository<Todo, TodoMethods>({
    name: 'Todo',
    collection: `${BCMSConfig.database.prefix}_todo_${suffix}_${++collectionCounter}`,
    schema: TodoSchema,
    methods({ repo }) {
      return {
        async findAllByDone(done) {
          return await repo.findAllBy((e) => e.done === done);
        },
        async findByDescription(description) {
          return await repo.findBy((e) => e.description === description);
        },
      };
    },
  });

/** The MongoDB-cached form, as BCMS's plugin-starter writes its todo repository (latches and all). */
const mongoTodos = (suffix: string): MongoDBCachedRepository<Todo, TodoMethods> =>
  createMongoDBCachedRepository<Todo, TodoMethods, unknown>({
    name: 'Todo',
    collection: `${BCMSConfig.database.prefix}_todo_${suffix}_${++collectionCounter}`,
    schema: objectSchemaToMongoDBSchema(TodoSchema),
    methods({ mongoDBInterface, cacheHandler }) {
      const latches: { [name: string]: boolean } = {};
      return {
        async findAllByDone(done) {
          const latchKey = `done_${done}`;
          if (latches[latchKey]) {
            return cacheHandler.find((e) => e.done === done);
          }
          const items = await mongoDBInterface.find({ done });
          items.forEach((e) => {
            cacheHandler.set(e._id, e);
          });
          latches[latchKey] = true;
          return items;
        },
        async findByDescription(description) {
          const cacheHit = cacheHandler.findOne((e) => e.description === description);
          if (cacheHit) {
            return cacheHit;
          }
          const item = await mongoDBInterface.findOne({ description });
          if (item) {
            cacheHandler.set(item._id, item);
          }
          return item;
        },
      };
    },
  });

const newTodo = (description: string, more: Partial<Todo> = {}): Todo => ({ _id: '', createdAt: 0, updatedAt: 0, description, done: false, ...more });

describe('plugin repositories before any router', () => {
  test('made at load time; used before a router exists, they say what to do', async () => {
    await jest.isolateModulesAsync(async () => {
      const fresh = require('../../lib') as typeof import('../../lib');
      const repo = fresh.createFSDBRepository<Todo, unknown>({ name: 'Early', collection: 'early', schema: TodoSchema });
      await expect(repo.findAll()).rejects.toThrow('createFSDBRepository "Early" was used before any router was built: call bcmsExtensions(...) first');
      const mongo = fresh.createMongoDBCachedRepository<Todo, unknown, unknown>({ name: 'Early', collection: 'early', schema: fresh.objectSchemaToMongoDBSchema(TodoSchema) });
      await expect(mongo.add(newTodo('x'))).rejects.toThrow('createMongoDBCachedRepository "Early" was used before any router was built');
    });
  });

  test('wrong settings are refused at once', () => {
    expect(() => createFSDBRepository({ name: '', collection: 'c', schema: TodoSchema })).toThrow(new TypeError('createFSDBRepository: name must be a non-empty string'));
    expect(() => createFSDBRepository({ name: 'n', collection: '', schema: TodoSchema })).toThrow(TypeError);
    expect(() => createFSDBRepository({ name: 'n', collection: 'c', schema: 'nope' as never })).toThrow(/schema must be an ObjectSchema/);
    expect(() => createMongoDBCachedRepository({ name: 'n', collection: 'c', schema: 42 as never })).toThrow(
      /schema must be objectSchemaToMongoDBSchema\(...\), a mongoose Schema or an ObjectSchema, got a number/,
    );
    expect(BCMSConfig.database).toEqual({ prefix: 'bcms', fs: true });
    // Local: BCMS plugins then build their paths under process.cwd() (an isolate's folder of files.dir), never at /bcms-share.
    expect(BCMSConfig.local).toBe(true);
  });
});

describe.each(backends())('plugin repositories on %s', (backend) => {
  let database: TestDatabase;
  let router: BcmsExtensionsRouter;
  const todos = fsdbTodos(backend);
  const cached = mongoTodos(backend);

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    router = bcmsExtensions({}, { database: database.knex, logger: memoryLogger().logger });
    await router.ready;
  });
  afterAll(async () => {
    await router.close();
    await database.close();
  });

  test('the table and its indexes are migrated', async () => {
    expect(await database.knex.schema.hasTable('bcms_documents')).toBe(true);
    const indexes = await database.knex.raw("select indexname, indexdef from pg_indexes where tablename = 'bcms_documents' and schemaname = current_schema()");
    const defs = (indexes.rows as { indexname: string; indexdef: string }[]).map((r) => r.indexdef).join('\n');
    expect(defs).toMatch(/UNIQUE INDEX bcms_documents_pkey .*\(collection, id\)/);
    expect(defs).toMatch(/INDEX bcms_documents_doc ON .* USING gin \(doc jsonb_path_ops\)/);
    expect(defs).toMatch(/INDEX bcms_documents_collection_seq .*\(collection, seq\)/);
  });

  test('add fills _id (24 hex), createdAt and updatedAt; a given _id is kept; an existing one is refused', async () => {
    const before = Date.now();
    const added = await todos.add(newTodo('write tests'));
    expect(added).toEqual({ _id: expect.stringMatching(OBJECT_ID), createdAt: expect.any(Number), updatedAt: expect.any(Number), description: 'write tests', done: false });
    expect(added.createdAt).toBeGreaterThanOrEqual(before);
    expect(added.updatedAt).toBe(added.createdAt);
    expect(await todos.findById(added._id)).toEqual(added);
    // As BCMS's FSDB: the object given gets its id and times, and is what add resolves to.
    const given0 = newTodo('written back');
    const stored0 = await todos.add(given0);
    expect(stored0).toBe(given0);
    expect(await todos.findById(given0._id)).toEqual(given0);
    const frozen = Object.freeze(newTodo('frozen'));
    expect((await todos.add(frozen))._id).toMatch(OBJECT_ID);
    expect(frozen._id).toBe('');
    const missingId = await todos.add({ description: 'no id at all', done: true } as never);
    expect(missingId._id).toMatch(OBJECT_ID);
    expect(missingId._id).not.toBe(added._id);
    const given = await todos.add(newTodo('given', { _id: '63bc0b7ba5f9d5f5ea4e7c52' }));
    expect(given._id).toBe('63bc0b7ba5f9d5f5ea4e7c52');
    await expect(todos.add(newTodo('again', { _id: '63bc0b7ba5f9d5f5ea4e7c52' }))).rejects.toThrow(
      `repository "Todo" (collection "${todos.collection}").add: a document with _id "63bc0b7ba5f9d5f5ea4e7c52" exists: use update`,
    );
    expect((await todos.findById('63bc0b7ba5f9d5f5ea4e7c52'))?.description).toBe('given');
  });

  test('findAll (in the order added), findAllById (in the order asked), findById, count', async () => {
    const repo = fsdbTodos(`${backend}_find`);
    const a = await repo.add(newTodo('a'));
    const b = await repo.add(newTodo('b'));
    const c = await repo.add(newTodo('c'));
    expect((await repo.findAll()).map((t) => t.description)).toEqual(['a', 'b', 'c']);
    expect((await repo.findAllById([c._id, 'missing', a._id])).map((t) => t.description)).toEqual(['c', 'a']);
    expect(await repo.findAllById([])).toEqual([]);
    // More ids than Postgres takes bound values (65,535): still one answer, never a database error.
    const many = Array.from({ length: 70_000 }, (_, i) => i.toString(16).padStart(24, '0'));
    expect((await repo.findAllById([...many, b._id])).map((t) => t.description)).toEqual(['b']);
    expect(await repo.deleteAllById(many)).toBe(false);
    expect(await repo.findAllById(['\ud800', 'a\u0000', b._id])).toEqual([b]);
    expect(await repo.findById(b._id)).toEqual(b);
    for (const id of ['', 'missing', "' or 1=1 --", 'a\u0000b', '\udc00', 42, { $ne: null }, undefined]) {
      expect(await repo.findById(id as string)).toBeNull();
    }
    expect(await repo.count()).toBe(3);
    // Another collection's documents are not this one's.
    expect(await todos.findById(a._id)).toBeNull();
  });

  test('update replaces the document, keeps createdAt, bumps updatedAt; a missing one throws', async () => {
    const added = await todos.add(newTodo('to update', { tags: ['x'] }));
    await pause(5);
    const updated = await todos.update({ ...added, description: 'updated', done: true, tags: undefined, createdAt: 1 });
    expect(updated).toEqual({ _id: added._id, createdAt: added.createdAt, updatedAt: expect.any(Number), description: 'updated', done: true });
    expect(updated.updatedAt).toBeGreaterThan(added.updatedAt);
    expect(await todos.findById(added._id)).toEqual(updated);
    await expect(todos.update(newTodo('ghost', { _id: '000000000000000000000000' }))).rejects.toThrow(/\.update: there is no document with _id "000000000000000000000000": use add/);
    await expect(todos.update({ ...updated, done: 'yes' as never })).rejects.toThrow(
      new TypeError(`repository "Todo" (collection "${todos.collection}"): entity.done must be a boolean, got a string.`),
    );
  });

  test("update and addMany resolve to the objects given (FSDB's): a change made to one after the write is saved by writing the other (bngine's jobs)", async () => {
    const job = await todos.add(newTodo('job', { tags: ['checkout'] }));
    const internal = await todos.update(job);
    expect(internal).toBe(job);
    job.tags!.push('build');
    await todos.update(internal);
    expect((await todos.findById(job._id))?.tags).toEqual(['checkout', 'build']);
    const many = [newTodo('m1'), newTodo('m2')];
    const added = await fsdbTodos(`${backend}_given`).addMany(many);
    expect(added[0]).toBe(many[0]);
    expect(added[1]).toBe(many[1]);
    // MongoDB's front answers the stored document, a new object, as mongoose's save does.
    const plain = newTodo('mongo');
    expect(await mongoTodos(`${backend}_plain`).add(plain)).not.toBe(plain);
  });

  test('addMany adds all or none', async () => {
    const repo = fsdbTodos(`${backend}_many`);
    const added = await repo.addMany([newTodo('one'), newTodo('two')]);
    expect(added.map((t) => t.description)).toEqual(['one', 'two']);
    await expect(repo.addMany([newTodo('three'), newTodo('dup', { _id: added[0]!._id })])).rejects.toThrow(`a document with _id "${added[0]!._id}" exists`);
    await expect(repo.addMany([newTodo('four'), newTodo(5 as never)])).rejects.toThrow(/addMany\[1\]|entity\.description must be a string/);
    expect(await repo.count()).toBe(2);
  });

  test('updateMany: FSDB form (predicate or filter, update function) and MongoDB form (entities)', async () => {
    const repo = fsdbTodos(`${backend}_um`);
    const [a, b, c] = await repo.addMany([newTodo('a', { priority: 1 }), newTodo('b', { priority: 2 }), newTodo('c', { priority: 3 })]);
    const byPredicate = await repo.updateMany(
      (e) => (e.priority ?? 0) >= 2,
      (e) => ({ ...e, done: true, _id: 'ignored', createdAt: 5 }),
    );
    expect(byPredicate.map((t) => [t._id, t.done, t.createdAt])).toEqual([
      [b!._id, true, b!.createdAt],
      [c!._id, true, c!.createdAt],
    ]);
    const byFilter = await repo.updateMany({ done: false }, (e) => ({ ...e, tags: ['later'] }));
    expect(byFilter.map((t) => t._id)).toEqual([a!._id]);
    expect((await repo.findById(a!._id))?.tags).toEqual(['later']);
    const fresh = (await repo.findAllById([a!._id, b!._id])).map((t) => ({ ...t, description: t.description.toUpperCase() }));
    expect((await repo.updateMany(fresh)).map((t) => t.description)).toEqual(['A', 'B']);
    // All or none: the second names nothing, so the first is not written either.
    await expect(repo.updateMany([{ ...fresh[0]!, description: 'changed' }, newTodo('ghost', { _id: 'ffffffffffffffffffffffff' })])).rejects.toThrow(/no document/);
    expect((await repo.findById(a!._id))?.description).toBe('A');
    // A function that breaks the schema: nothing written.
    await expect(
      repo.updateMany(
        () => true,
        (e) => ({ ...e, priority: 'high' as never }),
      ),
    ).rejects.toThrow(/entity\.priority must be a number, got a string/);
    expect((await repo.findById(c!._id))?.priority).toBe(3);
  });

  test('deleteById, deleteAllById, deleteOne and deleteMany (predicate and filter)', async () => {
    const repo = fsdbTodos(`${backend}_del`);
    const list = await repo.addMany(['a', 'b', 'c', 'd', 'e', 'f'].map((d, i) => newTodo(d, { priority: i })));
    expect(await repo.deleteById(list[0]!._id)).toBe(true);
    expect(await repo.deleteById(list[0]!._id)).toBe(false);
    expect(await repo.deleteAllById([list[1]!._id, list[2]!._id])).toBe(true);
    expect(await repo.deleteAllById([list[1]!._id])).toBe(false);
    expect(await repo.deleteAllById([list[3]!._id, list[3]!._id])).toBe(true); // one id asked for twice
    await repo.add(list[3]!);
    expect(await repo.deleteOne((e) => e.description === 'd')).toBe(true);
    expect(await repo.deleteOne({ description: 'nothing' })).toBe(false);
    expect(await repo.deleteOne({ priority: { $gte: 4 } })).toBe(true); // the first of e, f
    expect((await repo.findAll()).map((t) => t.description)).toEqual(['f']);
    await repo.addMany([newTodo('g', { done: true }), newTodo('h', { done: true })]);
    expect(await repo.deleteMany((e) => e.description === 'f')).toBe(true);
    expect(await repo.count({ done: true })).toBe(2);
    expect(await repo.count((e) => e.description === 'g')).toBe(1);
    expect(await repo.deleteMany({ done: true })).toBe(true);
    expect(await repo.deleteMany({ done: true })).toBe(false);
    expect(await repo.count()).toBe(0);
  });

  describe('queries', () => {
    const repo = fsdbTodos(`${backend}_q`);
    let ids: Record<string, string>;

    beforeAll(async () => {
      const added = await repo.addMany([
        newTodo('alpha', { priority: 1, tags: ['red', 'blue'], author: { name: 'Ada' } }),
        newTodo('beta', { priority: 5, tags: ['blue'], done: true }),
        newTodo('gamma', { priority: 10, author: { name: 'Grace' }, note: null }),
        newTodo('delta', { tags: [] }),
      ]);
      ids = Object.fromEntries(added.map((t) => [t.description, t._id]));
    });

    const names = async (query: Parameters<typeof repo.findAllBy>[0]) => (await repo.findAllBy(query)).map((t) => t.description);

    test('predicates run over the documents, as FSDB runs them', async () => {
      expect(await names((e) => (e.priority ?? 0) > 3)).toEqual(['beta', 'gamma']);
      expect((await repo.findBy((e) => e.tags?.includes('blue') === true))?.description).toBe('alpha');
      expect(await repo.findBy(() => false)).toBeNull();
      // Truthy is enough, as FSDB tests it.
      expect(await names(((e: Todo) => e.tags?.length) as never)).toEqual(['alpha', 'beta']);
      expect(await repo.methods.findAllByDone(true)).toEqual([expect.objectContaining({ description: 'beta' })]);
      expect((await repo.methods.findByDescription('gamma'))?._id).toBe(ids.gamma);
    });

    test('equality: on a field, a nested field, an array item, a whole object; null; _id', async () => {
      expect(await names({ done: true })).toEqual(['beta']);
      expect(await names({ description: 'alpha', done: false })).toEqual(['alpha']);
      expect(await names({ 'author.name': 'Grace' })).toEqual(['gamma']);
      expect(await names({ tags: 'blue' })).toEqual(['alpha', 'beta']);
      expect(await names({ tags: ['blue'] })).toEqual(['beta']);
      expect(await names({ tags: [] })).toEqual(['delta']);
      expect(await names({ author: { name: 'Ada' } })).toEqual(['alpha']);
      expect(await names({ note: null })).toEqual(['alpha', 'beta', 'gamma', 'delta']); // null or missing, as MongoDB
      expect(await names({ _id: ids.beta })).toEqual(['beta']);
      expect(await names({ priority: 5 })).toEqual(['beta']);
      expect(await names({ priority: '5' as never })).toEqual([]); // types are not coerced
      expect(await names({})).toEqual(['alpha', 'beta', 'gamma', 'delta']);
      expect((await repo.findBy({ tags: 'blue' }))?.description).toBe('alpha');
    });

    test('$eq, $ne, $in, $nin', async () => {
      expect(await names({ description: { $eq: 'beta' } })).toEqual(['beta']);
      expect(await names({ priority: { $ne: 5 } })).toEqual(['alpha', 'gamma', 'delta']); // delta has no priority: matched, as MongoDB
      expect(await names({ tags: { $ne: 'blue' } })).toEqual(['gamma', 'delta']);
      expect(await names({ description: { $in: ['gamma', 'alpha', 'nobody'] } })).toEqual(['alpha', 'gamma']);
      expect(await names({ tags: { $in: ['red', 'green'] } })).toEqual(['alpha']);
      expect(await names({ description: { $in: [] } })).toEqual([]);
      expect(await names({ description: { $nin: ['alpha', 'beta'] } })).toEqual(['gamma', 'delta']);
      expect(await names({ priority: { $nin: [1, 10] } })).toEqual(['beta', 'delta']);
    });

    test('$gt, $gte, $lt, $lte: numbers numerically, strings in order, only values of the same type', async () => {
      expect(await names({ priority: { $gt: 1 } })).toEqual(['beta', 'gamma']);
      expect(await names({ priority: { $gte: 5 } })).toEqual(['beta', 'gamma']);
      expect(await names({ priority: { $lt: 5 } })).toEqual(['alpha']);
      expect(await names({ priority: { $lte: 5, $gt: 1 } })).toEqual(['beta']);
      expect(await names({ priority: { $gt: 2 } })).toEqual(['beta', 'gamma']); // 10 > 2: numeric, not text, order
      expect(await names({ description: { $gte: 'beta', $lt: 'delta' } })).toEqual(['beta']);
      expect(await names({ description: { $gt: 1 } })).toEqual([]); // a number never matches a string
    });

    test('$exists; $and, $or, $nor', async () => {
      expect(await names({ author: { $exists: true } })).toEqual(['alpha', 'gamma']);
      expect(await names({ priority: { $exists: false } })).toEqual(['delta']);
      expect(await names({ note: { $exists: true } })).toEqual(['gamma']); // a null value exists
      expect(await names({ $or: [{ done: true }, { 'author.name': 'Grace' }] })).toEqual(['beta', 'gamma']);
      expect(await names({ $and: [{ tags: 'blue' }, { priority: { $gt: 1 } }] })).toEqual(['beta']);
      expect(await names({ $nor: [{ done: true }, { priority: { $exists: false } }] })).toEqual(['alpha', 'gamma']);
    });

    test('on a large collection, a filter is served by the GIN index', async () => {
      const big = `${repo.collection}_big`;
      await database.knex.raw(
        `insert into bcms_documents (collection, id, doc)
         select ?, lpad(to_hex(n), 24, '0'), jsonb_build_object('_id', lpad(to_hex(n), 24, '0'), 'description', 'job ' || n, 'done', n % 500 = 0, 'createdAt', 0, 'updatedAt', 0)
         from generate_series(1, 5000) as n`,
        [big],
      );
      await database.knex.raw('analyze bcms_documents');
      // The condition a filter is rendered as, in the query the repository runs.
      const condition = renderFilter({ done: true }, 'test');
      const query = database.knex('bcms_documents').select('doc').where('collection', big).andWhereRaw(condition.sql, condition.bindings).toSQL().toNative();
      // A table this small is read whole at least as fast: the question is which index serves the
      // filter when one is used, the GIN index or the collection's.
      const plan = await database.knex.transaction(async (trx) => {
        await trx.raw('set local enable_seqscan = off');
        return (await trx.raw(`explain ${query.sql.replace(/\$(\d+)/g, '?')}`, query.bindings as string[])).rows as Record<string, string>[];
      });
      expect(plan.map((row) => Object.values(row)[0]).join('\n')).toMatch(/Bitmap Index Scan on bcms_documents_doc/);
      await database.knex('bcms_documents').where('collection', big).delete();
    });

    test('bad filters are a TypeError naming the problem, never a database error', async () => {
      await expect(repo.findAllBy({ priority: { $regex: '.*' } } as never)).rejects.toThrow(
        new TypeError(`repository "Todo" (collection "${repo.collection}").findAllBy: unknown operator "$regex" on field "priority" (known: $eq, $ne, $in, $nin, $gt, $gte, $lt, $lte, $exists)`),
      );
      await expect(repo.findAllBy({ $where: 'sleep(1)' } as never)).rejects.toThrow(/unknown operator "\$where"/);
      await expect(repo.findAllBy({ "desc'ription": 'x' })).rejects.toThrow(
        new TypeError(
          `repository "Todo" (collection "${repo.collection}").findAllBy: field "desc'ription" is not a field name a filter can use (letters, digits, _ and -, dot-separated; no quotes, spaces or $; not __proto__, constructor or prototype)`,
        ),
      );
      await expect(repo.findBy({ "a'); drop table bcms_documents; --": 1 })).rejects.toThrow(TypeError);
      await expect(repo.count({ 'a..b': 1 })).rejects.toThrow(TypeError);
      await expect(repo.deleteMany({ priority: { $in: 5 } } as never)).rejects.toThrow(/\$in on field "priority" takes an array, got a number/);
      await expect(repo.deleteOne({ priority: { $exists: 'yes' } } as never)).rejects.toThrow(/\$exists on field "priority" takes true or false/);
      await expect(repo.findAllBy({ priority: { $gt: { a: 1 } } } as never)).rejects.toThrow(/\$gt on field "priority" takes a string, number or boolean, got an object/);
      await expect(repo.findAllBy({ description: 'a\u0000b' })).rejects.toThrow(/contains a NUL character/);
      await expect(repo.findAllBy(42 as never)).rejects.toThrow(/a filter must be a plain object or a function, got a number/);
      await expect(repo.findAllBy({ $or: [] })).rejects.toThrow(/\$or takes a non-empty array of filters/);
      await expect(repo.updateMany({ bad: { $foo: 1 } } as never, (e) => e)).rejects.toThrow(/unknown operator "\$foo"/);
      expect(await repo.count()).toBe(4); // nothing was touched
      expect(await database.knex.schema.hasTable('bcms_documents')).toBe(true);
    });
  });

  test('documents that do not fit the schema are refused with a TypeError naming the field', async () => {
    const where = `repository "Todo" (collection "${todos.collection}")`;
    await expect(todos.add(newTodo(3 as never))).rejects.toThrow(new TypeError(`${where}: entity.description must be a string, got a number.`));
    await expect(todos.add({ description: 'no done' } as never)).rejects.toThrow(new TypeError(`${where}: entity.done is required.`));
    await expect(todos.add(newTodo('tags', { tags: ['ok', 2 as never] }))).rejects.toThrow(new TypeError(`${where}: entity.tags[1] must be a string, got a number.`));
    await expect(todos.add(newTodo('author', { author: { name: null as never } }))).rejects.toThrow(/entity\.author\.name must be a string, got null/);
    expect(await todos.findBy({ description: 'tags' })).toBeNull();
  });

  test('what cannot be stored is a TypeError: not an object, a bad _id, a 10 MB document, NUL, a cycle', async () => {
    const where = `repository "Todo" (collection "${todos.collection}").add`;
    await expect(todos.add('todo' as never)).rejects.toThrow(new TypeError(`${where}: a document must be an object, got a string`));
    await expect(todos.add(null as never)).rejects.toThrow(new TypeError(`${where}: a document must be an object, got null`));
    await expect(todos.add([] as never)).rejects.toThrow(new TypeError(`${where}: a document must be an object, got an array`));
    await expect(todos.add(newTodo('n', { _id: 42 as never }))).rejects.toThrow(new TypeError(`${where}: _id must be a non-empty string, got a number`));
    await expect(todos.add(newTodo('x'.repeat(10 * 1024 * 1024)))).rejects.toThrow(new TypeError(`${where}: the document is larger than ${MAX_DOCUMENT_BYTES / 1024 / 1024} MB as JSON`));
    await expect(todos.add(newTodo('a\u0000b'))).rejects.toThrow(new TypeError(`${where}: the document contains a NUL character, which Postgres cannot store`));
    await expect(todos.add(newTodo('half \ud800 a pair'))).rejects.toThrow(new TypeError(`${where}: the document contains half of a UTF-16 surrogate pair, which Postgres cannot store`));
    await expect(todos.findAllBy({ description: '\udc00' })).rejects.toThrow(/contains half of a UTF-16 surrogate pair/);
    // What only looks like those escapes is text, and is stored as it is.
    const lookalike = await todos.add(newTodo('a \\u0000 and a \\ud800, 😀'));
    expect((await todos.findById(lookalike._id))?.description).toBe('a \\u0000 and a \\ud800, 😀');
    expect((await todos.findBy({ description: 'a \\u0000 and a \\ud800, 😀' }))?._id).toBe(lookalike._id);
    const cyclic = newTodo('cycle') as Todo & { self?: unknown };
    cyclic.self = cyclic;
    await expect(todos.add(cyclic)).rejects.toThrow(/the document cannot be written as JSON/);
    await expect(todos.add(newTodo('big', { priority: 10n as never }))).rejects.toThrow(/cannot be written as JSON/);
    await expect(todos.findAllById('x' as never)).rejects.toThrow(TypeError);
  });

  test("the MongoDB-cached form: plugin-starter's methods, over mongoDBInterface and cacheHandler, see every write", async () => {
    const a = await cached.add(newTodo('first'));
    expect(a._id).toMatch(OBJECT_ID);
    expect(await cached.methods.findAllByDone(false)).toEqual([a]); // from the database, then latched
    const b = await cached.add(newTodo('second'));
    // The latch answers from this instance's cache, which the repository's own writes keep in step.
    expect((await cached.methods.findAllByDone(false)).map((t) => t._id)).toEqual([a._id, b._id]);
    await cached.update({ ...a, done: true });
    expect((await cached.methods.findAllByDone(false)).map((t) => t._id)).toEqual([b._id]);
    expect((await cached.methods.findAllByDone(true)).map((t) => t._id)).toEqual([a._id]);
    await cached.deleteById(b._id);
    expect(await cached.methods.findAllByDone(false)).toEqual([]);
    expect((await cached.methods.findByDescription('first'))?._id).toBe(a._id);
    expect(await cached.methods.findByDescription('nobody')).toBeNull();
    // Base methods always read the database: a row written behind the repository's back is seen.
    await database
      .knex('bcms_documents')
      .insert({ collection: cached.collection, id: 'ffffffffffffffffffffffff', doc: JSON.stringify(newTodo('behind', { _id: 'ffffffffffffffffffffffff', createdAt: 1, updatedAt: 1 })) });
    expect((await cached.findAll()).map((t) => t.description)).toEqual(['first', 'behind']);
    expect(await cached.count()).toBe(2);
  });

  test('mongoDBInterface: find with limit, skip and sort; findOne, findById, countDocuments, updateMany, deleteMany', async () => {
    let db!: MongoDBInterface<Todo>;
    let cacheName = '';
    let collection = '';
    const repo = createMongoDBCachedRepository<Todo, unknown, unknown>({
      name: 'Jobs',
      collection: `bcms_jobs_${backend}`,
      schema: objectSchemaToMongoDBSchema(TodoSchema),
      methods(data) {
        db = data.mongoDBInterface;
        cacheName = data.cacheHandler.name();
        collection = data.collection;
        return {};
      },
    });
    await repo.addMany([1, 2, 3, 4, 5].map((n) => newTodo(`job ${n}`, { priority: n % 3, done: n > 3 })));
    expect((await db.find().limit(2).skip(1)).map((t) => t.description)).toEqual(['job 2', 'job 3']);
    expect((await db.find({ done: false }).sort({ priority: -1 }).exec()).map((t) => t.description)).toEqual(['job 2', 'job 1', 'job 3']);
    expect((await db.findOne({ priority: { $gte: 2 } }))?.description).toBe('job 2');
    const first = (await db.find().limit(1))[0]!;
    expect(await db.findById(first._id)).toEqual(first);
    expect(await db.findById('nope')).toBeNull();
    expect(await db.countDocuments({ done: true })).toBe(2);
    expect(await db.countDocuments()).toBe(5);
    expect(await db.countDocuments({ priority: 0 }).exec()).toBe(1); // mongoose's exec() form
    expect(await db.exists({ description: 'job 3' })).toEqual({ _id: expect.stringMatching(OBJECT_ID) });
    expect(await db.exists({ description: 'job 9' })).toBeNull();
    expect(await db.updateOne({ description: 'job 1' }, { priority: 7 }).exec()).toEqual({ acknowledged: true, matchedCount: 1, modifiedCount: 1 });
    expect((await db.findOne({ priority: 7 }))?.description).toBe('job 1');
    expect(await db.updateOne({ description: 'job 1' }, { $unset: { priority: '' } })).toMatchObject({ matchedCount: 1 });
    expect((await db.findOne({ description: 'job 1' }))?.priority).toBeUndefined();
    await db.updateOne({ description: 'job 1' }, { $set: { priority: 1 } });
    expect(await db.updateMany({ done: true }, { $set: { description: 'finished' } })).toEqual({ acknowledged: true, matchedCount: 2, modifiedCount: 2 });
    expect(await repo.count({ description: 'finished' })).toBe(2);
    await expect(db.updateMany({ done: true }, { $set: { done: 'no' } })).rejects.toThrow(/entity\.done must be a boolean/);
    await expect(db.updateOne({}, { $inc: { priority: 1 } })).rejects.toThrow(/unknown update operator "\$inc"/);
    // Paths through a prototype, from request data, are refused: nothing reaches Object.prototype.
    for (const update of ['{"$set": {"__proto__.isAdmin": true}}', '{"$unset": {"__proto__.toString": 1}}', '{"$set": {"constructor.prototype.x": 1}}', '{"__proto__": {"x": 1}}']) {
      await expect(db.updateOne({ description: 'job 1' }, JSON.parse(update))).rejects.toThrow(TypeError);
    }
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(typeof ({} as object).toString).toBe('function');
    await expect((async () => db.find({}).sort({ description: 'constructor' as never }))()).rejects.toThrow(/sort direction/);
    await expect((async () => db.find({ '__proto__.x': 1 }))()).rejects.toThrow(TypeError);
    await expect(db.updateOne({ description: 'job 1' }, { $set: { extra: () => 1 } })).rejects.toThrow(/extra cannot be stored/);
    expect(await db.deleteMany({ done: true })).toEqual({ acknowledged: true, deletedCount: 2 });
    expect(await repo.count()).toBe(3);
    expect(() => db.find({ "bad'field": 1 })).toThrow(TypeError);
    expect(cacheName).toBe('Cache_Jobs');
    expect(collection).toBe(`bcms_jobs_${backend}`);
  });

  test("a mongoose Schema is read for its fields' types", async () => {
    // What mongoose's `new Schema({ title: { type: String, required: true }, tags: [String], meta: { views: Number } })` exposes.
    const mongooseSchema = {
      paths: {
        _id: { instance: 'ObjectId', isRequired: false },
        title: { instance: 'String', isRequired: true },
        tags: { instance: 'Array', isRequired: false, caster: { instance: 'String' } },
        'meta.views': { instance: 'Number', isRequired: false },
        __v: { instance: 'Number' },
      },
    };
    const repo = createMongoDBCachedRepository<FSDBEntity & { title: string; tags?: string[]; meta?: { views: number } }, unknown, unknown>({
      name: 'Posts',
      collection: `bcms_posts_${backend}`,
      schema: mongooseSchema,
    });
    expect((await repo.add({ title: 'ok', tags: ['a'], meta: { views: 1 } }))._id).toMatch(OBJECT_ID);
    await expect(repo.add({ tags: [] } as never)).rejects.toThrow(/entity\.title is required/);
    await expect(repo.add({ title: 'x', tags: [1 as never] })).rejects.toThrow(/entity\.tags\[0\] must be a string, got a number/);
    await expect(repo.add({ title: 'x', meta: { views: 'many' as never } })).rejects.toThrow(/entity\.meta\.views must be a number, got a string/);
  });

  test("the FSDB methods factory gets BCMS's data: name, collection, schema, repo, logger, throwError, checkSchema", async () => {
    let data!: Parameters<NonNullable<FSDBRepositoryConfig<Todo, unknown>['methods']>>[0];
    const repo = createFSDBRepository<Todo, unknown>({
      name: 'Factory',
      collection: `bcms_factory_${backend}`,
      schema: TodoSchema,
      methods(given) {
        data = given;
        return {};
      },
    });
    expect(data).toMatchObject({ name: 'Factory', collection: `bcms_factory_${backend}`, schema: TodoSchema });
    expect(data.repo).toBe(repo);
    expect(data.throwError('place', 'went wrong')).toEqual(new Error('went wrong'));
    expect(() => data.checkSchema(newTodo(1 as never))).toThrow(/entity\.description must be a string, got a number/);
    expect(() => data.checkSchema(newTodo('fits', { _id: 'x' }))).not.toThrow();
    expect(typeof data.logger.warn).toBe('function');
  });

  test('createDocumentRepository: the neutral name, with or without a schema', async () => {
    const notes = createDocumentRepository<FSDBEntity & { text: string; pinned: boolean }, { pinned(): Promise<number> }>({
      name: 'Notes',
      collection: `notes_${backend}`,
      methods: ({ repo }) => ({ pinned: () => repo.count({ pinned: true }) }),
    });
    await notes.add({ text: 'hello', pinned: true });
    await notes.add({ text: 'world', pinned: false });
    expect(await notes.methods.pinned()).toBe(1);
    expect((await notes.findBy({ text: 'world' }))?.pinned).toBe(false);
  });

  test('a plugin whose controller setup builds its repository, used by its handlers over HTTP', async () => {
    const plugin = createBcmsPlugin({
      name: 'todos',
      controllers: [
        createController({
          name: 'Todo',
          path: '/todo',
          // As BCMS plugins do: setup builds the repository (before the router has a database bound).
          async setup() {
            return {
              repo: createFSDBRepository<Todo, TodoMethods>({
                name: 'Todo',
                collection: `bcms_todo_http_${backend}`,
                schema: TodoSchema,
                methods: ({ repo: self }) => ({
                  findAllByDone: (done) => self.findAllBy((e) => e.done === done),
                  findByDescription: (description) => self.findBy((e) => e.description === description),
                }),
              }),
            };
          },
          methods({ repo }) {
            return {
              create: createControllerMethod({
                path: '/',
                type: 'post',
                handler: async ({ request, errorHandler }) => {
                  try {
                    return { item: await repo.add(newTodo(request.body.description)) };
                  } catch (error) {
                    if (error instanceof TypeError) throw errorHandler.occurred(400, error.message);
                    throw error;
                  }
                },
              }),
              list: createControllerMethod({ path: '/all', type: 'get', handler: async () => ({ items: await repo.findAll() }) }),
              byDescription: createControllerMethod({
                path: '/:description',
                type: 'get',
                handler: async ({ request, errorHandler }) => {
                  const item = await repo.methods.findByDescription(request.params.description as string);
                  if (item === null) throw errorHandler.occurred(404, 'No such todo.');
                  return { item };
                },
              }),
            };
          },
        }),
      ],
    });
    const own = bcmsExtensions({ plugins: [plugin] }, { database: database.knex, logger: memoryLogger().logger });
    const app = express().use(own);
    await own.ready;
    const created = await request(app).post('/api/plugin/todos/todo').send({ description: 'over http' });
    expect(created.status).toBe(200);
    expect(created.body.item).toMatchObject({ _id: expect.stringMatching(OBJECT_ID), description: 'over http', done: false });
    const bad = await request(app).post('/api/plugin/todos/todo').send({ description: 7 });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/entity\.description must be a string, got a number/);
    expect((await request(app).get('/api/plugin/todos/todo/all')).body.items).toEqual([created.body.item]);
    expect((await request(app).get('/api/plugin/todos/todo/over%20http')).body.item._id).toBe(created.body.item._id);
    expect((await request(app).get('/api/plugin/todos/todo/nothing')).status).toBe(404);
    await own.close();
  });
});

(process.env.DATABASE_URL ? describe : describe.skip)('two routers on one server database, each with its own pool', () => {
  let schema: Awaited<ReturnType<typeof serverSchema>>;
  const pools: Knex[] = [];
  const routers: BcmsExtensionsRouter[] = [];

  beforeAll(async () => {
    schema = await serverSchema('bcms_docs_two');
  });
  afterAll(async () => {
    for (const router of routers) await router.close();
    for (const pool of pools) await pool.destroy();
    await schema.drop();
  });

  test("each sees the other's writes: nothing is kept in a process", async () => {
    const todos = fsdbTodos('shared');
    const cachedTodos = mongoTodos('shared');
    const pool = (): Knex => {
      const knex = knexFactory({ client: 'pg', connection: schema.url, pool: { min: 0, max: 2 } });
      pools.push(knex);
      return knex;
    };
    const first = bcmsExtensions({}, { database: pool(), logger: memoryLogger().logger });
    routers.push(first);
    await first.ready;
    const written = await todos.add(newTodo('from the first'));
    const cachedWritten = await cachedTodos.add(newTodo('cached, from the first'));
    const second = bcmsExtensions({}, { database: pool(), logger: memoryLogger().logger });
    routers.push(second);
    await second.ready;
    expect(second.db).not.toBe(first.db);
    // Now bound to the second router's pool: the first's writes are there.
    expect(await todos.findById(written._id)).toEqual(written);
    expect(await todos.methods.findByDescription('from the first')).toEqual(written);
    expect(await cachedTodos.findAll()).toEqual([cachedWritten]);
    const updated = await todos.update({ ...written, done: true });
    // And what the second wrote is what the first's pool reads.
    const row = await first.db('bcms_documents').where({ collection: todos.collection, id: written._id }).first();
    expect(row.doc).toEqual(updated);
    expect(row.doc.done).toBe(true);
  });
});

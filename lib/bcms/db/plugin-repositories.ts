import type { Knex } from 'knex';
import type { ObjectPropSchema, ObjectSchema } from '../../schema/object-schema';
import { useLogger, type BcmsLogger } from '../use-logger';
import { boundStore } from '../repo';
import { isPlainObject, kind, UNSAFE_SEGMENTS } from '../../db/values';
import { pathSql, renderFilter, type DocumentFilter, type SqlFragment } from './document-filter';
import { checkRepositorySettings, createDocumentCore, type DocumentCore, type DocumentEntity, type DocumentObserver, type DocumentRepository } from './documents';

// BCMS plugins keep their own data in repositories made by purple-cheetah's FSDB and MongoDB
// modules. Here both are fronts of one repository on the router's Postgres database
// (lib/bcms/db/documents.ts): the names, arguments and `methods` factory data are BCMS's, so that a
// plugin's repository file ports by changing its imports.

/** FSDB's entity: what every document has. */
export type FSDBEntity = DocumentEntity;
/** purple-cheetah's MongoDB entity; ids are strings here (24 hex characters when we make them). */
export type MongoDBEntity = DocumentEntity;
/** The repository `createFSDBRepository` gives (FSDB's methods, and MongoDB filters besides predicates). */
export type FSDBRepository<Entity extends FSDBEntity, Methods = unknown> = DocumentRepository<Entity, Methods>;
/** The repository `createMongoDBCachedRepository` gives: the same as FSDB's, on the same table. */
export type MongoDBCachedRepository<Entity extends MongoDBEntity, Methods = unknown> = DocumentRepository<Entity, Methods>;
/** FSDB's query type: a predicate called with each document. */
export type FSDBRepositoryQuery<Entity> = (entity: Entity) => boolean;

/** The schema FSDB entities start from: `{ ...FSDBEntitySchema, description: {...} }`. */
export const FSDBEntitySchema: ObjectSchema = Object.freeze({
  _id: { __type: 'string', __required: true },
  createdAt: { __type: 'number', __required: true },
  updatedAt: { __type: 'number', __required: true },
}) as ObjectSchema;

/** The logger handed to a `methods` factory: `useLogger`'s, named after the repository. */
export type RepositoryLogger = BcmsLogger;

// ---------------------------------------------------------------------------------------------
// FSDB

/** `createFSDBRepository`'s config, as BCMS's: the collection's name, its schema, and the repository's own methods. */
export interface FSDBRepositoryConfig<Entity extends FSDBEntity, Methods> {
  name: string;
  schema: ObjectSchema;
  collection: string;
  methods?(data: {
    name: string;
    schema: ObjectSchema;
    collection: string;
    repo: FSDBRepository<Entity, unknown>;
    logger: RepositoryLogger;
    /** Logs the message and returns an Error of it, for `throw throwError(place, message)`. */
    throwError(place: string, message: unknown): Error;
    /** Throws a TypeError naming the first field that does not fit the schema. */
    checkSchema(entity: Entity): void;
  }): Methods;
}

/**
 * purple-cheetah's `createFSDBRepository`, on the router's database: a predicate query runs over
 * the collection's documents, as FSDB runs it; a MongoDB filter object runs as SQL.
 *
 * @example
 * const todos = createFSDBRepository<Todo, { findAllByDone(done: boolean): Promise<Todo[]> }>({
 *   name: 'Todo',
 *   collection: `${BCMSConfig.database.prefix}_todo`,
 *   schema: TodoSchema,
 *   methods: ({ repo }) => ({ findAllByDone: (done) => repo.findAllBy((e) => e.done === done) }),
 * });
 */
export function createFSDBRepository<Entity extends FSDBEntity, Methods = unknown>(config: FSDBRepositoryConfig<Entity, Methods>): FSDBRepository<Entity, Methods> {
  const { name, collection } = checkRepositorySettings('createFSDBRepository', config);
  const schema = checkObjectSchema('createFSDBRepository', config.schema);
  const core = createDocumentCore<Entity>({ name, collection, schema, store: () => boundStore(`createFSDBRepository "${name}"`), returnsGiven: true });
  const logger = useLogger({ name });
  return withMethods(core.repo, () =>
    config.methods?.({
      name,
      schema,
      collection,
      repo: core.repo,
      logger,
      throwError(place, message) {
        logger.error(place, message);
        return message instanceof Error ? message : new Error(typeof message === 'string' ? message : JSON.stringify(message));
      },
      checkSchema: (entity) => core.checkSchema(entity),
    }),
  );
}

/**
 * A repository of plugin-owned documents, for new code: the same repository as
 * `createFSDBRepository`'s, with an optional schema and filter objects or predicates as queries.
 *
 * @example
 * const notes = createDocumentRepository<Note>({ name: 'Notes', collection: 'my-plugin_notes', schema: NoteSchema });
 * await notes.add({ text: 'hello', pinned: false });
 * const pinned = await notes.findAllBy({ pinned: true });
 */
export function createDocumentRepository<Entity extends DocumentEntity, Methods = unknown>(config: {
  name: string;
  collection: string;
  schema?: ObjectSchema;
  methods?(data: { name: string; collection: string; repo: DocumentRepository<Entity, unknown> }): Methods;
}): DocumentRepository<Entity, Methods> {
  const { name, collection } = checkRepositorySettings('createDocumentRepository', config);
  const schema = config.schema === undefined ? undefined : checkObjectSchema('createDocumentRepository', config.schema);
  const core = createDocumentCore<Entity>({ name, collection, schema, store: () => boundStore(`createDocumentRepository "${name}"`) });
  return withMethods(core.repo, () => config.methods?.({ name, collection, repo: core.repo }));
}

/** The repository with `methods` set to what the factory returns (the factory gets the repository itself). */
function withMethods<Entity extends DocumentEntity, Methods>(repo: DocumentRepository<Entity, unknown>, factory: () => Methods | undefined): DocumentRepository<Entity, Methods> {
  const methods = factory();
  (repo as { methods: unknown }).methods = methods;
  return Object.freeze(repo) as DocumentRepository<Entity, Methods>;
}

function checkObjectSchema(factory: string, schema: unknown): ObjectSchema {
  if (!isPlainObject(schema)) throw new TypeError(`${factory}: schema must be an ObjectSchema (an object of { __type, __required } properties), got ${kind(schema)}`);
  return schema as ObjectSchema;
}

// ---------------------------------------------------------------------------------------------
// MongoDB, cached

/** What `objectSchemaToMongoDBSchema` returns: the ObjectSchema, for `createMongoDBCachedRepository`. */
export interface MongoDBSchemaOfObjectSchema {
  readonly objectSchema: ObjectSchema;
}

/** A mongoose `Schema`, as far as it is read here: its paths and their types. */
export interface MongooseSchemaLike {
  paths: Record<string, unknown>;
}

/** The schemas `createMongoDBCachedRepository` takes. */
export type MongoDBSchemaInput = MongoDBSchemaOfObjectSchema | MongooseSchemaLike | ObjectSchema;

/**
 * purple-cheetah's `objectSchemaToMongoDBSchema`: here no mongoose schema is made (mongoose stays
 * the plugin's own dependency); the ObjectSchema is kept for `createMongoDBCachedRepository`.
 */
export function objectSchemaToMongoDBSchema(schema: ObjectSchema): MongoDBSchemaOfObjectSchema {
  return Object.freeze({ objectSchema: checkObjectSchema('objectSchemaToMongoDBSchema', schema) });
}

/** purple-cheetah's mem-cache handler, as `methods` factories use it. */
export interface MemCacheHandler<Item, Methods = unknown> {
  name(): string;
  find(query: (item: Item) => boolean): Item[];
  findOne(query: (item: Item) => boolean): Item | null;
  findAll(): Item[];
  findAllById(ids: string[]): Item[];
  findById(id: string): Item | null;
  set(id: string, item: Item): void;
  remove(id: string): void;
  subscribe(handler: (type: 'add' | 'update' | 'remove', item: Item) => void | Promise<void>): () => void;
  methods: Methods;
}

/** The result of `mongoDBInterface.find(...)` and `findOne(...)`: awaitable, with mongoose's chain. */
export interface MongoDBQuery<Result> extends PromiseLike<Result> {
  limit(count: number): MongoDBQuery<Result>;
  skip(count: number): MongoDBQuery<Result>;
  /** `{ field: 1 | -1 | 'asc' | 'desc' }`, in key order. */
  sort(spec: Record<string, 1 | -1 | 'asc' | 'desc' | 'ascending' | 'descending'>): MongoDBQuery<Result>;
  /** Documents are plain objects already. */
  lean(): MongoDBQuery<Result>;
  exec(): Promise<Result>;
  catch<T = never>(onRejected?: ((reason: unknown) => T | PromiseLike<T>) | null): Promise<Result | T>;
}

/** A promise with mongoose's `exec()`, as its model calls answer: `await` it or call `exec()`. */
export type MongoDBResult<T> = Promise<T> & { exec(): Promise<T> };

function execable<T>(promise: Promise<T>): MongoDBResult<T> {
  return Object.assign(promise, { exec: () => promise });
}

/** A MongoDB update: `{ $set: {...}, $unset: {...} }`, or fields to set. */
export type MongoDBUpdate = Record<string, unknown>;

/** What `methods` factories get as `mongoDBInterface`: mongoose's model calls, run as SQL. */
export interface MongoDBInterface<Entity> {
  find(filter?: DocumentFilter<Entity>): MongoDBQuery<Entity[]>;
  findOne(filter?: DocumentFilter<Entity>): MongoDBQuery<Entity | null>;
  findById(id: string): MongoDBQuery<Entity | null>;
  countDocuments(filter?: DocumentFilter<Entity>): MongoDBResult<number>;
  exists(filter: DocumentFilter<Entity>): MongoDBResult<{ _id: string } | null>;
  create(entity: Partial<Entity>): Promise<Entity>;
  insertMany(entities: Partial<Entity>[]): Promise<Entity[]>;
  updateOne(filter: DocumentFilter<Entity>, update: MongoDBUpdate): MongoDBResult<{ acknowledged: true; matchedCount: number; modifiedCount: number }>;
  updateMany(filter: DocumentFilter<Entity>, update: MongoDBUpdate): MongoDBResult<{ acknowledged: true; matchedCount: number; modifiedCount: number }>;
  deleteOne(filter: DocumentFilter<Entity>): MongoDBResult<{ acknowledged: true; deletedCount: number }>;
  deleteMany(filter: DocumentFilter<Entity>): MongoDBResult<{ acknowledged: true; deletedCount: number }>;
}

/** `createMongoDBCachedRepository`'s config, as BCMS's: the collection's name, its schema, its methods and cache methods. */
export interface MongoDBCachedRepositoryConfig<Entity extends MongoDBEntity, Methods, CacheMethods> {
  name: string;
  /** `objectSchemaToMongoDBSchema(schema)`, a mongoose Schema (read for its paths' types), or an ObjectSchema. */
  schema: MongoDBSchemaInput;
  collection: string;
  cacheMethods?(data: { cache: Record<string, Entity>; self: MemCacheHandler<Entity, unknown> }): CacheMethods;
  methods?(data: {
    cacheHandler: MemCacheHandler<Entity, CacheMethods>;
    name: string;
    schema: MongoDBSchemaInput;
    collection: string;
    repo: MongoDBCachedRepository<Entity, unknown>;
    mongoDBInterface: MongoDBInterface<Entity>;
    logger: RepositoryLogger;
  }): Methods;
}

/**
 * purple-cheetah's `createMongoDBCachedRepository`, on the router's database. The base methods
 * always read the database (nothing can go stale between instances). `cacheHandler` is this
 * process's cache, as in BCMS: the base methods keep it in step with what they read and write, so
 * that a `methods` factory's own cache reads see this instance's writes; another instance's writes
 * reach it only through the database. That is why `BCMSConfig.database.fs` is `true`: ported
 * plugins take their FSDB branch, whose queries all go to the database.
 */
export function createMongoDBCachedRepository<Entity extends MongoDBEntity, Methods = unknown, CacheMethods = unknown>(
  config: MongoDBCachedRepositoryConfig<Entity, Methods, CacheMethods>,
): MongoDBCachedRepository<Entity, Methods> {
  const { name, collection } = checkRepositorySettings('createMongoDBCachedRepository', config);
  const schema = mongoSchemaToObjectSchema(config.schema, 'createMongoDBCachedRepository: schema');
  const cacheHandler = createMemCacheHandler<Entity, CacheMethods>(`Cache_${name}`, config.cacheMethods);
  const observer: DocumentObserver<Entity> = {
    seen: (entities) => {
      for (const entity of entities) cacheHandler.set(entity._id, entity);
    },
    removed: (ids) => {
      for (const id of ids) cacheHandler.remove(id);
    },
  };
  const core = createDocumentCore<Entity>({ name, collection, schema, observer, store: () => boundStore(`createMongoDBCachedRepository "${name}"`) });
  const mongoDBInterface = createMongoDBInterface(core, observer);
  const logger = useLogger({ name });
  return withMethods(core.repo, () => config.methods?.({ cacheHandler, name, schema: config.schema, collection, repo: core.repo, mongoDBInterface, logger }));
}

function createMemCacheHandler<Item, Methods>(handlerName: string, methods: MongoDBCachedRepositoryConfig<Item & MongoDBEntity, unknown, Methods>['cacheMethods']): MemCacheHandler<Item, Methods> {
  const items = new Map<string, Item>();
  const subscribers = new Set<(type: 'add' | 'update' | 'remove', item: Item) => void | Promise<void>>();
  const emit = (type: 'add' | 'update' | 'remove', item: Item): void => {
    for (const subscriber of subscribers) void Promise.resolve(subscriber(type, item)).catch(() => {});
  };
  const handler: MemCacheHandler<Item, Methods> = {
    name: () => handlerName,
    find: (query) => [...items.values()].filter((item) => query(item)),
    findOne: (query) => {
      for (const item of items.values()) if (query(item)) return item;
      return null;
    },
    findAll: () => [...items.values()],
    findAllById: (ids) => ids.flatMap((id) => (items.has(id) ? [items.get(id) as Item] : [])),
    findById: (id) => items.get(id) ?? null,
    set(id, item) {
      const type = items.has(`${id}`) ? 'update' : 'add';
      items.set(`${id}`, item);
      emit(type, item);
    },
    remove(id) {
      const item = items.get(`${id}`);
      if (item === undefined) return;
      items.delete(`${id}`);
      emit('remove', item);
    },
    subscribe(subscriber) {
      subscribers.add(subscriber);
      return () => void subscribers.delete(subscriber);
    },
    methods: undefined as Methods,
  };
  if (methods !== undefined) {
    const cache = new Proxy({} as Record<string, Item & MongoDBEntity>, {
      get: (_, key) => (typeof key === 'string' ? items.get(key) : undefined),
      ownKeys: () => [...items.keys()],
      getOwnPropertyDescriptor: (_, key) => (typeof key === 'string' && items.has(key) ? { enumerable: true, configurable: true, value: items.get(key) } : undefined),
    });
    handler.methods = methods({ cache, self: handler as unknown as MemCacheHandler<Item & MongoDBEntity, unknown> });
  }
  return handler;
}

const ORDER: Record<string, 'asc' | 'desc'> = { '1': 'asc', '-1': 'desc', asc: 'asc', ascending: 'asc', desc: 'desc', descending: 'desc' };
/** A dotted path of names (no array indexes) that sorts and updates may name. */
const FIELD_PATH = /^[A-Za-z_][A-Za-z0-9_-]{0,99}(?:\.[A-Za-z_][A-Za-z0-9_-]{0,99})*$/;

/** `'author.name'` → `['author', 'name']`; undefined for a path sorts and updates refuse (`__proto__.x` would reach Object.prototype). */
function fieldPath(path: string): string[] | undefined {
  const segments = path.split('.');
  return FIELD_PATH.test(path) && !segments.some((segment) => UNSAFE_SEGMENTS.has(segment)) ? segments : undefined;
}

function renderSort(spec: unknown, where: string): SqlFragment {
  if (!isPlainObject(spec)) throw new TypeError(`${where}: sort takes an object { field: 1 | -1 }, got ${kind(spec)}`);
  const parts: string[] = [];
  const bindings: string[] = [];
  for (const [field, direction] of Object.entries(spec)) {
    const path = fieldPath(field);
    if (path === undefined) throw new TypeError(`${where}: cannot sort on field ${JSON.stringify(field)}`);
    // Own keys only: `constructor` or `toString` must not find Object.prototype's.
    const order = Object.hasOwn(ORDER, String(direction)) ? ORDER[String(direction)] : undefined;
    if (order === undefined) throw new TypeError(`${where}: sort direction for ${JSON.stringify(field)} must be 1, -1, 'asc' or 'desc'`);
    parts.push(`${pathSql(path)} ${order}`);
    bindings.push(...path);
  }
  return { sql: parts.length === 0 ? 'true' : parts.join(', '), bindings };
}

function createQuery<Result>(core: DocumentCore<DocumentEntity>, filter: unknown, where: string, shape: (rows: DocumentEntity[]) => Result, one: boolean): MongoDBQuery<Result> {
  const state: { limit?: number; skip?: number; sort?: SqlFragment } = one ? { limit: 1 } : {};
  let running: Promise<Result> | undefined;
  const count = (value: unknown, what: string): number => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new TypeError(`${where}: ${what} takes a whole number >= 0, got ${kind(value)}`);
    return value;
  };
  const exec = (): Promise<Result> => {
    running ??= core.select(filter ?? {}, { ...state, where }).then(shape);
    return running;
  };
  const query: MongoDBQuery<Result> = {
    limit(value) {
      // mongoose: limit(0) means no limit.
      const n = count(value, 'limit');
      if (!one) state.limit = n === 0 ? undefined : n;
      return query;
    },
    skip(value) {
      state.skip = count(value, 'skip');
      return query;
    },
    sort(spec) {
      state.sort = renderSort(spec, where);
      return query;
    },
    lean: () => query,
    exec,
    // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose, as mongoose's Query is: `await Model.find()` runs it
    then: (onFulfilled, onRejected) => exec().then(onFulfilled, onRejected),
    catch: (onRejected) => exec().catch(onRejected),
  };
  // The filter is checked now, where its author called find: a TypeError, not a rejection later.
  renderFilter(filter ?? {}, where);
  return query;
}

function createMongoDBInterface<Entity extends MongoDBEntity>(core: DocumentCore<Entity>, observer: DocumentObserver<Entity>): MongoDBInterface<Entity> {
  const where = `${core.where}.mongoDBInterface`;
  const anyCore = core as unknown as DocumentCore<DocumentEntity>;
  const update = async (filter: unknown, change: unknown, many: boolean) => {
    const what = `${where}.${many ? 'updateMany' : 'updateOne'}`;
    const apply = compileUpdate(change, what);
    // Rendered before the transaction: a filter that cannot work opens none.
    const condition = renderFilter(filter, what);
    const results = await core.run((db: Knex) =>
      db.transaction(async (trx) => {
        let builder = trx('bcms_documents').select('doc').where('collection', core.repo.collection).andWhereRaw(condition.sql, condition.bindings).orderBy('seq');
        if (!many) builder = builder.limit(1);
        const rows = (await builder.forUpdate()) as { doc: Entity }[];
        const out: Entity[] = [];
        for (const { doc } of rows) {
          const next = apply(doc as unknown as Record<string, unknown>) as unknown as Entity;
          core.checkSchema(next);
          out.push((await core.replace(next, trx)) as Entity);
        }
        return out;
      }),
    );
    observer.seen(results);
    return { acknowledged: true as const, matchedCount: results.length, modifiedCount: results.length };
  };
  return {
    find: (filter) => createQuery(anyCore, filter, `${where}.find`, (rows) => rows as Entity[], false),
    findOne: (filter) => createQuery(anyCore, filter, `${where}.findOne`, (rows) => (rows[0] as Entity | undefined) ?? null, true),
    findById: (id) => createQuery(anyCore, { _id: typeof id === 'string' ? id : String(id) }, `${where}.findById`, (rows) => (rows[0] as Entity | undefined) ?? null, true),
    countDocuments: (filter) => execable(core.repo.count((filter ?? {}) as DocumentFilter<Entity>)),
    exists: (filter) => execable(core.repo.findBy(filter).then((found) => (found === null ? null : { _id: found._id }))),
    create: (entity) => core.repo.add(entity as never),
    insertMany: (entities) => core.repo.addMany(entities as never),
    updateOne: (filter, change) => execable(update(filter, change, false)),
    updateMany: (filter, change) => execable(update(filter, change, true)),
    deleteOne: (filter) => execable(core.repo.deleteOne(filter).then((deleted) => ({ acknowledged: true as const, deletedCount: deleted ? 1 : 0 }))),
    deleteMany: (filter) =>
      execable(
        (async () => {
          const condition = renderFilter(filter, `${where}.deleteMany`);
          const rows = (await core.run((db) => db('bcms_documents').where('collection', core.repo.collection).andWhereRaw(condition.sql, condition.bindings).delete().returning('id'))) as {
            id: string;
          }[];
          observer.removed(rows.map((row) => row.id));
          return { acknowledged: true as const, deletedCount: rows.length };
        })(),
      ),
  };
}

/** `{ $set, $unset }` (or plain fields, which mongoose treats as `$set`) → a function making the changed copy. */
function compileUpdate(change: unknown, where: string): (doc: Record<string, unknown>) => Record<string, unknown> {
  if (!isPlainObject(change)) throw new TypeError(`${where}: the update must be an object ({ $set: {...} }), got ${kind(change)}`);
  const sets: [string[], unknown][] = [];
  const unsets: string[][] = [];
  const field = (path: string): string[] => {
    const segments = fieldPath(path);
    if (segments === undefined) throw new TypeError(`${where}: cannot update field ${JSON.stringify(path)}`);
    if (path === '_id' || path === 'createdAt') throw new TypeError(`${where}: ${path} cannot be changed`);
    return segments;
  };
  /** A value a document can hold (JSON), checked now rather than as a DataCloneError at the write. */
  const storable = (path: string[], value: unknown): unknown => {
    if (value !== undefined && JSON.stringify(value) === undefined) throw new TypeError(`${where}: ${path.join('.')} cannot be stored (not a JSON value)`);
    try {
      return structuredClone(value);
    } catch {
      throw new TypeError(`${where}: ${path.join('.')} cannot be stored (not a JSON value)`);
    }
  };
  for (const [key, value] of Object.entries(change)) {
    if (key === '$set' || key === '$unset') {
      if (!isPlainObject(value)) throw new TypeError(`${where}: ${key} takes an object`);
      for (const [path, fieldValue] of Object.entries(value)) {
        if (key === '$unset') unsets.push(field(path));
        else {
          const segments = field(path);
          sets.push([segments, storable(segments, fieldValue)]);
        }
      }
    } else if (key.startsWith('$')) {
      throw new TypeError(`${where}: unknown update operator ${JSON.stringify(key)} (known: $set, $unset)`);
    } else {
      const segments = field(key);
      sets.push([segments, storable(segments, value)]);
    }
  }
  return (doc) => {
    const next = structuredClone(doc);
    for (const [path, value] of sets) {
      let target = next;
      for (const segment of path.slice(0, -1)) {
        if (!Object.hasOwn(target, segment) || !isPlainObject(target[segment])) target[segment] = {};
        target = target[segment] as Record<string, unknown>;
      }
      target[path[path.length - 1] as string] = structuredClone(value);
    }
    for (const path of unsets) {
      let target: unknown = next;
      for (const segment of path.slice(0, -1)) target = isPlainObject(target) && Object.hasOwn(target, segment) ? target[segment] : undefined;
      if (isPlainObject(target)) delete target[path[path.length - 1] as string];
    }
    return next;
  };
}

// A mongoose Schema, read by its shape: `paths` maps each path ('title', 'author.name') to a
// SchemaType whose `instance` names its type ('String', 'Number', 'Boolean', 'Array', 'Embedded',
// ...), `isRequired` says whether it is required, arrays have `caster` (or `$embeddedSchemaType`)
// for their items and `schema` when their items are documents, as has a sub-document.
interface SchemaTypeLike {
  instance?: unknown;
  isRequired?: unknown;
  schema?: unknown;
  caster?: unknown;
  $embeddedSchemaType?: unknown;
}

const SCALARS: Record<string, 'string' | 'number' | 'boolean'> = { String: 'string', Number: 'number', Boolean: 'boolean' };

/** The ObjectSchema a repository checks documents against, from any schema it accepts. */
export function mongoSchemaToObjectSchema(schema: unknown, where: string): ObjectSchema {
  if (schema !== null && typeof schema === 'object' && 'objectSchema' in schema && isPlainObject((schema as MongoDBSchemaOfObjectSchema).objectSchema)) {
    return (schema as MongoDBSchemaOfObjectSchema).objectSchema;
  }
  if (isMongooseSchema(schema)) return fromMongoose(schema);
  if (isPlainObject(schema) && Object.values(schema).every((prop) => isPlainObject(prop) && typeof prop.__type === 'string')) return schema as ObjectSchema;
  throw new TypeError(`${where} must be objectSchemaToMongoDBSchema(...), a mongoose Schema or an ObjectSchema, got ${kind(schema)}`);
}

function fromMongoose(schema: MongooseSchemaLike): ObjectSchema {
  const out: ObjectSchema = {};
  for (const [path, type] of Object.entries(schema.paths)) {
    const prop = fromSchemaType(type as SchemaTypeLike);
    if (prop === undefined || path === '__v') continue;
    if (path === '_id' && prop.__type !== 'string') continue; // mongoose's own ObjectId: ours are strings
    const segments = path.split('.');
    let target = out;
    for (const segment of segments.slice(0, -1)) {
      let parent = target[segment];
      if (parent === undefined) {
        parent = { __type: 'object', __required: false, __child: {} };
        target[segment] = parent;
      }
      target = parent.__child as ObjectSchema;
    }
    target[segments[segments.length - 1] as string] = prop;
  }
  return out;
}

function fromSchemaType(type: SchemaTypeLike | undefined): ObjectPropSchema | undefined {
  if (type === undefined || type === null || typeof type !== 'object') return undefined;
  const required = type.isRequired === true;
  const scalar = SCALARS[String(type.instance)];
  if (scalar !== undefined) return { __type: scalar, __required: required };
  if (type.instance === 'Embedded' && isMongooseSchema(type.schema)) {
    return { __type: 'object', __required: required, __child: fromMongoose(type.schema) };
  }
  if (type.instance === 'Array') {
    if (isMongooseSchema(type.schema)) return { __type: 'array', __required: required, __child: { __type: 'object', __content: fromMongoose(type.schema) } };
    const item = (type.caster ?? type.$embeddedSchemaType) as SchemaTypeLike | undefined;
    const itemType = item === undefined ? undefined : SCALARS[String(item.instance)];
    // An array of anything else (Mixed, ObjectId, Date) is not checked item by item.
    return itemType === undefined ? undefined : { __type: 'array', __required: required, __child: { __type: itemType } };
  }
  // Mixed, ObjectId, Date, Buffer, Map...: not checked.
  return undefined;
}

function isMongooseSchema(value: unknown): value is MongooseSchemaLike {
  return value !== null && typeof value === 'object' && isPlainObject((value as MongooseSchemaLike).paths);
}

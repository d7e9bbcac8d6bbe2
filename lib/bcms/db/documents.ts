import type { Knex } from 'knex';
import { compileObjectSchema, type ObjectSchema, type ObjectSchemaCheck } from '../../schema/object-schema';
import { inList, isPlainObject, kind, MAX_ID_LENGTH, newObjectId, unstorable, usableId } from '../../db/values';
import { renderFilter, type DocumentFilter, type SqlFragment } from './document-filter';
import type { ContentStore } from '../../db/store';

export type { DocumentFieldOperators, DocumentFilter } from './document-filter';

/** What every stored document has: its id and its times (epoch milliseconds). */
export interface DocumentEntity {
  _id: string;
  createdAt: number;
  updatedAt: number;
}

/** FSDB's query: called with each document of the collection, in JS. */
export type DocumentPredicate<Entity> = (entity: Entity) => boolean;

/** A predicate function (FSDB's form) or a MongoDB filter object (run as SQL). */
export type DocumentQuery<Entity> = DocumentPredicate<Entity> | DocumentFilter<Entity>;

/** A document to add: `_id`, `createdAt` and `updatedAt` may be left out (they are filled in). */
export type NewDocument<Entity extends DocumentEntity> = Omit<Entity, '_id' | 'createdAt' | 'updatedAt'> & Partial<DocumentEntity>;

/**
 * A collection of JSON documents in the router's database (table `bcms_documents`), shared by
 * every instance on that database. Every method reads or writes the database: nothing is kept
 * between calls.
 */
export interface DocumentRepository<Entity extends DocumentEntity, Methods = unknown> {
  readonly collection: string;
  /** What the `methods` factory returned (`undefined` without one). */
  readonly methods: Methods;
  /** Every document, in the order they were added. */
  findAll(): Promise<Entity[]>;
  /** The documents with these ids, in the order of `ids`; ids that name none are left out. */
  findAllById(ids: string[]): Promise<Entity[]>;
  findById(id: string): Promise<Entity | null>;
  /** The first document (in the order they were added) the query matches. */
  findBy(query: DocumentQuery<Entity>): Promise<Entity | null>;
  findAllBy(query: DocumentQuery<Entity>): Promise<Entity[]>;
  /**
   * Stores a new document: `_id` is kept when given (an existing one is an error: use `update`),
   * else made (24 lower-case hex characters, as a MongoDB ObjectId); `createdAt` and `updatedAt`
   * are set to now. Resolves to the stored document; as in BCMS, the given object gets its `_id`
   * and times too.
   */
  add(entity: NewDocument<Entity>): Promise<Entity>;
  /** Adds all or none. */
  addMany(entities: NewDocument<Entity>[]): Promise<Entity[]>;
  /**
   * Replaces the document `entity._id` with `entity` (its `createdAt` kept, `updatedAt` set to now);
   * throws when there is none, as BCMS's FSDB does.
   */
  update(entity: Entity): Promise<Entity>;
  /** FSDB's form: `update` is called with each matching document and returns it changed. All or none. */
  updateMany(query: DocumentQuery<Entity>, update: (entity: Entity) => Entity): Promise<Entity[]>;
  /** MongoDB's form: `update` for each entity, all or none. */
  updateMany(entities: Entity[]): Promise<Entity[]>;
  /** `true` when a document was deleted. */
  deleteById(id: string): Promise<boolean>;
  /** `true` when every id named a document (all of them are deleted). */
  deleteAllById(ids: string[]): Promise<boolean>;
  /** Deletes the first document the query matches; `true` when there was one. */
  deleteOne(query: DocumentQuery<Entity>): Promise<boolean>;
  /** `true` when at least one document was deleted. */
  deleteMany(query: DocumentQuery<Entity>): Promise<boolean>;
  count(query?: DocumentQuery<Entity>): Promise<number>;
}

/** The largest document (as JSON, in UTF-8 bytes) a repository stores. */
export const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;
const INSERT_BATCH = 1000;
const TABLE = 'bcms_documents';

/** Hooks the MongoDB-cached form uses to keep its cache handler in step with what it reads and writes. */
export interface DocumentObserver<Entity> {
  seen(entities: Entity[]): void;
  removed(ids: string[]): void;
}

export interface DocumentRepositorySettings<Entity extends DocumentEntity> {
  /** The repository's name, for errors. */
  name: string;
  collection: string;
  /** The schema every written document must fit, or `undefined` for none. */
  schema: ObjectSchema | undefined;
  /** The database, asked at each call (the router built last). */
  store: () => ContentStore;
  observer?: DocumentObserver<Entity>;
  /**
   * FSDB's way: `add`, `addMany` and `update` resolve to the very objects they were given (with
   * `_id`, `createdAt` and `updatedAt` set), so that code changing the one after the write changes
   * the other (bngine adds a job's steps to the object it passed to `update`, then saves what
   * `update` answered). Otherwise they resolve to the stored document, as MongoDB's do.
   */
  returnsGiven?: boolean;
}

/** The parts a factory in front of the repository (FSDB's, MongoDB's) builds on. */
export interface DocumentCore<Entity extends DocumentEntity> {
  repo: DocumentRepository<Entity, unknown>;
  /** Refuses (TypeError) what the schema refuses. */
  checkSchema(entity: unknown): void;
  /** Runs a query on the bound database, migrated first. */
  run<T>(query: (db: Knex) => Promise<T>): Promise<T>;
  /** The rows of the collection a filter object matches, with order and paging. */
  select(filter: unknown, options: { sort?: SqlFragment; limit?: number; skip?: number; where: string }): Promise<Entity[]>;
  /** Writes a whole document back (its `_id` names the row); `null` when there is none. */
  replace(entity: Entity, db?: Knex): Promise<Entity | null>;
  /** Serialises a document after the same checks as `add`. */
  serialise(entity: object, where: string): string;
  where: string;
}

/**
 * The repository over one collection. `createFSDBRepository`, `createMongoDBCachedRepository` and
 * `createDocumentRepository` are thin fronts of this.
 */
export function createDocumentCore<Entity extends DocumentEntity>(settings: DocumentRepositorySettings<Entity>): DocumentCore<Entity> {
  const { name, collection, observer } = settings;
  const where = `repository "${name}" (collection "${collection}")`;
  const check: ObjectSchemaCheck | undefined = settings.schema === undefined ? undefined : compileObjectSchema(settings.schema);

  const run = <T>(query: (db: Knex) => Promise<T>): Promise<T> => settings.store().run(query);
  const seen = (entities: Entity[]): Entity[] => {
    observer?.seen(entities);
    return entities;
  };
  const removed = (ids: string[]): void => observer?.removed(ids);
  /** What a write resolves to: the given object, its stored fields written back (FSDB), or the stored document. */
  const answer = (given: Entity | NewDocument<Entity>, stored: Entity): Entity => {
    const written = writeBack(given, stored);
    return settings.returnsGiven && written ? (given as Entity) : stored;
  };

  function checkSchema(entity: unknown): void {
    const message = check?.(entity, 'entity');
    if (message) throw new TypeError(`${where}: ${message}`);
  }

  function serialise(entity: object, what: string): string {
    let text: string | undefined;
    try {
      text = JSON.stringify(entity);
    } catch (error) {
      throw new TypeError(`${what}: the document cannot be written as JSON (${(error as Error).message})`);
    }
    if (text === undefined) throw new TypeError(`${what}: the document cannot be written as JSON`);
    // Checked in UTF-16 units first: a string that long is too long in bytes too, without counting them.
    if (text.length > MAX_DOCUMENT_BYTES || Buffer.byteLength(text) > MAX_DOCUMENT_BYTES) {
      throw new TypeError(`${what}: the document is larger than ${MAX_DOCUMENT_BYTES / 1024 / 1024} MB as JSON`);
    }
    // Postgres text cannot hold NUL (JSONB refuses \u0000): said here, not as a database error.
    const refused = unstorable(text);
    if (refused !== undefined) throw new TypeError(`${what}: the document contains ${refused}, which Postgres cannot store`);
    return text;
  }

  /** The entity as it will be stored: an object with a usable `_id`; schema checked. */
  function prepare(entity: unknown, what: string, times: { createdAt: number; updatedAt: number }, makeId: boolean): { doc: Entity; text: string } {
    if (entity === null || typeof entity !== 'object' || Array.isArray(entity)) {
      throw new TypeError(`${what}: a document must be an object, got ${kind(entity)}`);
    }
    const source = entity as Record<string, unknown>;
    let id = source._id;
    if (id !== null && typeof id === 'object' && typeof (id as { toHexString?: unknown }).toHexString === 'function') {
      id = (id as { toHexString(): string }).toHexString(); // a MongoDB ObjectId
    }
    if (id === undefined || id === null || id === '') {
      if (!makeId) throw new TypeError(`${what}: the document has no _id`);
      id = newObjectId();
    }
    checkId(id, what);
    const doc = { ...source, _id: id, createdAt: times.createdAt, updatedAt: times.updatedAt } as unknown as Entity;
    const text = serialise(doc, what);
    checkSchema(doc);
    return { doc, text };
  }

  async function selectAll(db: Knex, lock = false): Promise<Entity[]> {
    const query = db(TABLE).select('doc').where('collection', collection).orderBy('seq');
    return ((await (lock ? query.forUpdate() : query)) as { doc: Entity }[]).map((row) => row.doc);
  }

  async function select(filter: unknown, options: { sort?: SqlFragment; limit?: number; skip?: number; where: string; lock?: boolean }, db?: Knex): Promise<Entity[]> {
    const condition = renderFilter(filter, options.where);
    const query = (knex: Knex) => {
      let builder = knex(TABLE).select('doc').where('collection', collection).andWhereRaw(condition.sql, condition.bindings);
      if (options.sort !== undefined) builder = builder.orderByRaw(options.sort.sql, options.sort.bindings);
      builder = builder.orderBy('seq');
      if (options.limit !== undefined) builder = builder.limit(options.limit);
      if (options.skip !== undefined && options.skip > 0) builder = builder.offset(options.skip);
      if (options.lock === true) builder = builder.forUpdate();
      return builder as unknown as Promise<{ doc: Entity }[]>;
    };
    const rows = db === undefined ? await run(query) : await query(db);
    return rows.map((row) => row.doc);
  }

  /** The documents a query matches, in order: a predicate runs here, a filter in the database. */
  async function matching(query: unknown, what: string, db?: Knex, lock = false): Promise<Entity[]> {
    if (typeof query === 'function') {
      const all = db === undefined ? await run((knex) => selectAll(knex)) : await selectAll(db, lock);
      // Truthy, as FSDB tests it (`e.tags && e.tags.includes(x)` matches).
      return all.filter((entity) => Boolean((query as DocumentPredicate<Entity>)(entity)));
    }
    return select(query, { where: what, lock }, db);
  }

  async function replace(entity: Entity, db?: Knex): Promise<Entity | null> {
    const text = serialise(entity, `${where}.update`);
    const write = async (knex: Knex) => {
      const [row] = (await knex(TABLE)
        .where({ collection, id: entity._id })
        .update({ doc: knex.raw(`?::jsonb || jsonb_build_object('createdAt', doc -> 'createdAt')`, [text]) })
        .returning('doc')) as { doc: Entity }[];
      return row?.doc ?? null;
    };
    return db === undefined ? run(write) : write(db);
  }

  async function updateOne(entity: Entity, db: Knex | undefined, what: string): Promise<Entity> {
    if (entity === null || typeof entity !== 'object' || Array.isArray(entity)) throw new TypeError(`${what}: a document must be an object, got ${kind(entity)}`);
    checkId(entity._id, what);
    const now = Date.now();
    // createdAt is the stored one (the write keeps it); a placeholder lets the schema check pass meanwhile.
    const { doc } = prepare(entity, what, { createdAt: typeof entity.createdAt === 'number' ? entity.createdAt : now, updatedAt: now }, false);
    const stored = await replace(doc, db);
    if (stored === null) throw new Error(`${what}: there is no document with _id "${entity._id}": use add`);
    return answer(entity, stored);
  }

  function ids(value: unknown, what: string): string[] {
    if (!Array.isArray(value)) throw new TypeError(`${what}: ids must be an array of strings, got ${kind(value)}`);
    return value.filter(usableId);
  }

  const repo: DocumentRepository<Entity, unknown> = {
    collection,
    methods: undefined,

    async findAll() {
      return seen(await run((db) => selectAll(db)));
    },

    async findAllById(list) {
      const wanted = ids(list, `${where}.findAllById`);
      if (wanted.length === 0) return [];
      const rows = (await run((db) =>
        db(TABLE)
          .select('doc')
          .where('collection', collection)
          .andWhereRaw(...inList('id', [...new Set(wanted)])),
      )) as { doc: Entity }[];
      const byId = new Map(rows.map((row) => [row.doc._id, row.doc]));
      return seen(wanted.flatMap((id) => (byId.has(id) ? [byId.get(id) as Entity] : [])));
    },

    async findById(id) {
      if (!usableId(id)) return null;
      const row = (await run((db) => db(TABLE).select('doc').where({ collection, id }).first())) as { doc: Entity } | undefined;
      return row === undefined ? null : (seen([row.doc])[0] as Entity);
    },

    async findBy(query) {
      const what = `${where}.findBy`;
      const [first] = typeof query === 'function' ? await matching(query, what) : await select(query, { where: what, limit: 1 });
      return first === undefined ? null : (seen([first])[0] as Entity);
    },

    async findAllBy(query) {
      return seen(await matching(query, `${where}.findAllBy`));
    },

    async add(entity) {
      const now = Date.now();
      const { doc, text } = prepare(entity, `${where}.add`, { createdAt: now, updatedAt: now }, true);
      const rows = (await run((db) => db(TABLE).insert({ collection, id: doc._id, doc: text }).onConflict(['collection', 'id']).ignore().returning('doc'))) as {
        doc: Entity;
      }[];
      const stored = rows[0]?.doc;
      if (stored === undefined) throw new Error(`${where}.add: a document with _id "${doc._id}" exists: use update`);
      return seen([answer(entity, stored)])[0] as Entity;
    },

    async addMany(entities) {
      if (!Array.isArray(entities)) throw new TypeError(`${where}.addMany: takes an array of documents, got ${kind(entities)}`);
      if (entities.length === 0) return [];
      const now = Date.now();
      const prepared = entities.map((entity, i) => prepare(entity, `${where}.addMany[${i}]`, { createdAt: now, updatedAt: now }, true));
      const unique = new Set(prepared.map((p) => p.doc._id));
      if (unique.size !== prepared.length) throw new Error(`${where}.addMany: two documents have the same _id`);
      const stored = await run((db) =>
        db.transaction(async (trx) => {
          const rows: { doc: Entity }[] = [];
          // In batches: one insert binds three values a document, and Postgres takes 65,535 at most.
          for (let start = 0; start < prepared.length; start += INSERT_BATCH) {
            const batch = prepared.slice(start, start + INSERT_BATCH);
            rows.push(
              ...((await trx(TABLE)
                .insert(batch.map((p) => ({ collection, id: p.doc._id, doc: p.text })))
                .onConflict(['collection', 'id'])
                .ignore()
                .returning('doc')) as { doc: Entity }[]),
            );
          }
          if (rows.length !== prepared.length) {
            const taken = prepared.map((p) => p.doc._id).filter((id) => !rows.some((row) => row.doc._id === id));
            throw new Error(`${where}.addMany: a document with _id "${taken[0]}" exists: use update (nothing was added)`);
          }
          return rows;
        }),
      );
      const byId = new Map(stored.map((row) => [row.doc._id, row.doc]));
      return seen(
        entities.map((entity, i) => {
          const item = prepared[i];
          if (item === undefined) throw new Error(`${where}.addMany: document ${i} was not prepared`);
          return answer(entity, byId.get(item.doc._id) as Entity);
        }),
      );
    },

    async update(entity) {
      return seen([await updateOne(entity, undefined, `${where}.update`)])[0] as Entity;
    },

    async updateMany(first: DocumentQuery<Entity> | Entity[], change?: (entity: Entity) => Entity) {
      if (Array.isArray(first)) {
        const list = first;
        return seen(
          await run((db) =>
            db.transaction(async (trx) => {
              const out: Entity[] = [];
              for (const [i, entity] of list.entries()) out.push(await updateOne(entity, trx, `${where}.updateMany[${i}]`));
              return out;
            }),
          ),
        );
      }
      if (typeof change !== 'function') throw new TypeError(`${where}.updateMany: takes (query, update function) or an array of documents`);
      const what = `${where}.updateMany`;
      // Checked before the transaction: a bad filter is a TypeError, never a database error.
      if (typeof first !== 'function') renderFilter(first, what);
      return seen(
        await run((db) =>
          db.transaction(async (trx) => {
            const out: Entity[] = [];
            for (const current of await matching(first, what, trx, true)) {
              const original = { _id: current._id, createdAt: current.createdAt };
              const next = change(current);
              if (next === null || typeof next !== 'object') throw new TypeError(`${what}: the update function must return the document, got ${kind(next)}`);
              // As FSDB: the id and creation time stay what they were.
              const { doc } = prepare({ ...next, _id: original._id }, what, { createdAt: original.createdAt, updatedAt: Date.now() }, false);
              out.push((await replace(doc, trx)) as Entity);
            }
            return out;
          }),
        ),
      );
    },

    async deleteById(id) {
      if (!usableId(id)) return false;
      const rows = await run((db) => db(TABLE).where({ collection, id }).delete().returning('id'));
      removed([id]);
      return rows.length > 0;
    },

    async deleteAllById(list) {
      const wanted = [...new Set(ids(list, `${where}.deleteAllById`))];
      const rows =
        wanted.length === 0
          ? []
          : await run((db) =>
              db(TABLE)
                .where('collection', collection)
                .andWhereRaw(...inList('id', wanted))
                .delete()
                .returning('id'),
            );
      removed(wanted);
      // Every id named a document (asking for one twice is asking once).
      return rows.length === new Set(list as unknown[]).size;
    },

    async deleteOne(query) {
      const what = `${where}.deleteOne`;
      let id: string | undefined;
      if (typeof query === 'function') {
        id = (await matching(query, what))[0]?._id;
      } else {
        id = (await select(query, { where: what, limit: 1 }))[0]?._id;
      }
      if (id === undefined) return false;
      return repo.deleteById(id);
    },

    async deleteMany(query) {
      const what = `${where}.deleteMany`;
      let rows: { id: string }[];
      if (typeof query === 'function') {
        const found = (await matching(query, what)).map((entity) => entity._id);
        rows =
          found.length === 0
            ? []
            : await run((db) =>
                db(TABLE)
                  .where('collection', collection)
                  .andWhereRaw(...inList('id', found))
                  .delete()
                  .returning('id'),
              );
      } else {
        const condition = renderFilter(query, what);
        rows = await run((db) => db(TABLE).where('collection', collection).andWhereRaw(condition.sql, condition.bindings).delete().returning('id'));
      }
      removed(rows.map((row) => row.id));
      return rows.length > 0;
    },

    async count(query) {
      if (typeof query === 'function') return (await matching(query, `${where}.count`)).length;
      const condition = query === undefined ? { sql: 'true', bindings: [] } : renderFilter(query, `${where}.count`);
      const row = await run((db) => db(TABLE).where('collection', collection).andWhereRaw(condition.sql, condition.bindings).count({ count: '*' }).first());
      // pg answers count(*) as a string (a bigint); PGlite as a number.
      return Number(row?.count ?? 0);
    },
  } as DocumentRepository<Entity, unknown>;

  return {
    repo,
    checkSchema,
    run,
    select: (filter, options) => select(filter, options),
    replace,
    serialise,
    where,
  };
}

/**
 * As BCMS's FSDB does, `add` and `update` set `_id`, `createdAt` and `updatedAt` on the object they
 * were given too: plugin code that reads `entity._id` after `await repo.add(entity)` keeps working.
 * A frozen object is left as it is. Answers whether it was written.
 */
function writeBack(given: unknown, stored: DocumentEntity): boolean {
  if (given === null || typeof given !== 'object' || Object.isFrozen(given)) return false;
  const target = given as Partial<DocumentEntity>;
  target._id = stored._id;
  target.createdAt = stored.createdAt;
  target.updatedAt = stored.updatedAt;
  return true;
}

function checkId(id: unknown, what: string): asserts id is string {
  if (typeof id !== 'string' || id === '') throw new TypeError(`${what}: _id must be a non-empty string, got ${kind(id)}`);
  if (id.length > MAX_ID_LENGTH) throw new TypeError(`${what}: _id is longer than ${MAX_ID_LENGTH} characters`);
  if (id.includes('\0')) throw new TypeError(`${what}: _id contains a NUL character`);
}

/** Checks the settings every front takes; wrong ones throw at once, where their author sees them. */
export function checkRepositorySettings(factory: string, config: unknown): { name: string; collection: string } {
  if (!isPlainObject(config)) throw new TypeError(`${factory}: argument must be an object { name, collection, schema, methods? }`);
  const { name, collection, methods } = config as { name?: unknown; collection?: unknown; methods?: unknown };
  if (typeof name !== 'string' || name === '') throw new TypeError(`${factory}: name must be a non-empty string`);
  if (typeof collection !== 'string' || collection === '' || collection.length > MAX_ID_LENGTH || collection.includes('\0')) {
    throw new TypeError(`${factory}: collection must be a non-empty string (at most ${MAX_ID_LENGTH} characters)`);
  }
  if (methods !== undefined && typeof methods !== 'function') throw new TypeError(`${factory}: methods must be a function`);
  return { name, collection };
}

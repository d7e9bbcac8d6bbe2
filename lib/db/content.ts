import type { Knex } from 'knex';
import { inList, kind, newObjectId, unstorable, usableId } from './values';
import { isIdShaped } from './repository';
import type { BcmsEntry, BcmsEntryMeta, BcmsTemplate } from './shapes';
import type { ContentStore } from './store';

// Templates and entries as BCMS's `BCMSRepo` has them (reference 1d): an FSDB-style repository
// each, its base methods at the top level and BCMS's own under `methods`, over the bcms_templates
// and bcms_entries tables. Predicate queries run over the table's rows in JS, as FSDB runs them.

/** A template, as BCMS shapes it (with `cid`, its short id, and `userId`). Times are epoch milliseconds. */
export interface BCMSTemplate extends BcmsTemplate {
  cid: string;
  userId: string;
}

/** An entry, as BCMS shapes it (with `cid`). Times are epoch milliseconds. */
export interface BCMSEntry extends BcmsEntry {
  cid: string;
}

/** What `add` takes: the entity, where everything but the required fields may be left out. */
export type NewBCMSTemplate = Pick<BCMSTemplate, 'name'> & Partial<BCMSTemplate>;
/** An entry to add through BCMS's repository: its template id, and any other field. */
export type NewBCMSEntry = Pick<BCMSEntry, 'templateId'> & Partial<BCMSEntry>;

/** The base methods BCMS's FSDB repositories have at the top level. */
export interface BCMSBaseRepository<Entity extends { _id: string }, New> {
  /** Every row, oldest first. */
  findAll(): Promise<Entity[]>;
  /** In the order of `ids`; ids that name nothing are left out. */
  findAllById(ids: string[]): Promise<Entity[]>;
  findById(id: string): Promise<Entity | null>;
  findBy(query: (entity: Entity) => boolean): Promise<Entity | null>;
  findAllBy(query: (entity: Entity) => boolean): Promise<Entity[]>;
  /** `_id` kept when given (a UUID or BCMS's hex id), else a new 24-hex id; times set to now. */
  add(entity: New): Promise<Entity>;
  addMany(entities: New[]): Promise<Entity[]>;
  /** Writes the given fields of the row `_id` (`updatedAt` set to now); throws when there is none, as BCMS's. */
  update(entity: Pick<Entity, '_id'> & Partial<Entity>): Promise<Entity>;
  updateMany(query: (entity: Entity) => boolean, update: (entity: Entity) => Entity): Promise<Entity[]>;
  updateMany(entities: (Pick<Entity, '_id'> & Partial<Entity>)[]): Promise<Entity[]>;
  deleteById(id: string): Promise<boolean>;
  /** `true` when every id named a row. */
  deleteAllById(ids: string[]): Promise<boolean>;
  deleteOne(query: (entity: Entity) => boolean): Promise<boolean>;
  /** `true` when at least one row was deleted. */
  deleteMany(query: (entity: Entity) => boolean): Promise<boolean>;
  count(): Promise<number>;
}

/** The `methods` of BCMS's entry repository. */
export interface BCMSEntryRepositoryMethods {
  /** By `_id`, `cid`, or the slug (`meta[0].props[1].data[0]`), as BCMS looks it up. */
  findByTemplateIdAndRef(templateId: string, ref: string): Promise<BCMSEntry | null>;
  findByTemplateIdAndCid(templateId: string, entryCid: string): Promise<BCMSEntry | null>;
  findByTemplateIdAndId(templateId: string, entryId: string): Promise<BCMSEntry | null>;
  findAllByStatus(status: string): Promise<BCMSEntry[]>;
  /** Oldest first; `[]` for an unknown id. */
  findAllByTemplateId(templateId: string): Promise<BCMSEntry[]>;
  /** Entries whose content holds a widget node with this widget's id. */
  findAllByWidgetId(widgetId: string): Promise<BCMSEntry[]>;
  /** Sets `status` to `''` on every entry that has this one. */
  clearAllStatuses(currentStatus: string): Promise<void>;
  deleteAllByTemplateId(templateId: string): Promise<void>;
  countByTemplateId(templateId: string): Promise<number>;
  add(entry: NewBCMSEntry): Promise<BCMSEntry>;
  /** Before BCMS's shape, `BCMSRepo.entry.methods` had these: kept for code written against them. */
  findById(id: string): Promise<BCMSEntry | null>;
  /** Changes the given fields; `null` when there is no such entry. */
  update(entry: Pick<BCMSEntry, '_id'> & Partial<BCMSEntry>): Promise<BCMSEntry | null>;
  deleteById(id: string): Promise<boolean>;
}

/** The `methods` of BCMS's template repository. */
export interface BCMSTemplateRepositoryMethods {
  /** By `_id`, `cid` or `name`. */
  findByRef(ref: string): Promise<BCMSTemplate | null>;
  findByName(name: string): Promise<BCMSTemplate | null>;
  findByCid(cid: string): Promise<BCMSTemplate | null>;
  findAllByCid(cids: string[]): Promise<BCMSTemplate[]>;
  findAllByPropGroupPointer(groupId: string): Promise<BCMSTemplate[]>;
  findAllByPropEntryPointer(templateId: string): Promise<BCMSTemplate[]>;
  findAllByPropTag(tagId: string): Promise<BCMSTemplate[]>;
  findAllByPropMedia(mediaId: string): Promise<BCMSTemplate[]>;
  findAllByPropWidget(widgetId: string): Promise<BCMSTemplate[]>;
  /** Before BCMS's shape, `BCMSRepo.template.methods` had these: kept for code written against them. */
  findAll(): Promise<BCMSTemplate[]>;
  findById(id: string): Promise<BCMSTemplate | null>;
  add(template: NewBCMSTemplate): Promise<BCMSTemplate>;
  update(template: Pick<BCMSTemplate, '_id'> & Partial<BCMSTemplate>): Promise<BCMSTemplate | null>;
  deleteById(id: string): Promise<boolean>;
}

/** BCMS's entry repository (`BCMSRepo.entry`): the base methods and `methods`, over this package's content tables. */
export type BCMSEntryRepository = BCMSBaseRepository<BCMSEntry, NewBCMSEntry> & { methods: BCMSEntryRepositoryMethods };
/** BCMS's template repository (`BCMSRepo.template`): the base methods and `methods`, over this package's content tables. */
export type BCMSTemplateRepository = BCMSBaseRepository<BCMSTemplate, NewBCMSTemplate> & { methods: BCMSTemplateRepositoryMethods };

export interface BCMSContentRepo {
  entry: BCMSEntryRepository;
  template: BCMSTemplateRepository;
}

/** How one table maps to its BCMS shape. */
interface Table<Entity> {
  name: string;
  where: string;
  columns: string[];
  toEntity(row: Record<string, unknown>): Entity;
  /** The columns to write for the given fields (only those given); throws a TypeError for a bad one. */
  toColumns(entity: Record<string, unknown>, what: string, adding: boolean): Record<string, unknown>;
  /** A database error as the caller should see it, or undefined to pass it on. */
  explain(error: unknown, entity: Record<string, unknown>, what: string): Error | undefined;
}

const time = (value: unknown): number => (value as Date).getTime();

/** A field of an entity that the repository refused: `<what>: <field> <problem>`. The SDK's routes answer it as a 400 naming the field. */
export class BcmsRepoFieldError extends TypeError {
  constructor(
    what: string,
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${what}: ${field} ${problem}`);
  }
}

/** A template name that another template holds (Postgres's unique index refused it). */
export class TemplateNameTakenError extends Error {
  constructor(
    what: string,
    readonly templateName: string,
    cause: unknown,
  ) {
    super(`${what}: a template named "${templateName}" exists`, { cause });
  }
}

function text(value: unknown, what: string, field: string, allowEmpty = true): string {
  if (typeof value !== 'string' || (!allowEmpty && value === '')) throw new BcmsRepoFieldError(what, field, `must be a ${allowEmpty ? '' : 'non-empty '}string, got ${kind(value)}`);
  if (value.includes('\0')) throw new BcmsRepoFieldError(what, field, 'contains a NUL character, which Postgres cannot store');
  return value;
}

/** JSONB columns take JSON text: `pg` would send a JS array as a Postgres array. */
function json(value: unknown, what: string, field: string): string {
  if (!Array.isArray(value)) throw new BcmsRepoFieldError(what, field, `must be an array, got ${kind(value)}`);
  const out = JSON.stringify(value);
  const refused = unstorable(out);
  if (refused !== undefined) throw new BcmsRepoFieldError(what, field, `contains ${refused}, which Postgres cannot store`);
  return out;
}

function idColumn(entity: Record<string, unknown>, what: string, adding: boolean): Record<string, unknown> {
  const id = entity._id;
  if (!adding) return {};
  if (id === undefined || id === null || id === '') return { id: newObjectId() };
  if (!isIdShaped(id)) throw new BcmsRepoFieldError(what, '_id', `${JSON.stringify(id)} is not an id (24 to 64 hex characters, as BCMS makes them, or a UUID)`);
  return { id };
}

function cidColumn(entity: Record<string, unknown>, what: string): Record<string, unknown> {
  if (entity.cid === undefined || entity.cid === '') return {};
  return { cid: text(entity.cid, what, 'cid', false) };
}

const TEMPLATES: Table<BCMSTemplate> = {
  name: 'bcms_templates',
  where: 'BCMSRepo.template',
  columns: ['id', 'cid', 'name', 'label', 'desc', 'user_id', 'single_entry', 'props', 'created_at', 'updated_at'],
  toEntity: (row) => ({
    _id: row.id as string,
    cid: row.cid as string,
    name: row.name as string,
    label: row.label as string,
    desc: row.desc as string,
    userId: row.user_id as string,
    singleEntry: row.single_entry as boolean,
    props: row.props as unknown[],
    createdAt: time(row.created_at),
    updatedAt: time(row.updated_at),
  }),
  toColumns(entity, what, adding) {
    const columns: Record<string, unknown> = { ...idColumn(entity, what, adding), ...cidColumn(entity, what) };
    if (adding || entity.name !== undefined) columns.name = text(entity.name, what, 'name', false);
    if (entity.label !== undefined || adding) columns.label = text(entity.label ?? entity.name, what, 'label');
    if (entity.desc !== undefined) columns.desc = text(entity.desc, what, 'desc');
    if (entity.userId !== undefined) columns.user_id = text(entity.userId, what, 'userId');
    if (entity.singleEntry !== undefined) columns.single_entry = entity.singleEntry === true;
    if (entity.props !== undefined) columns.props = json(entity.props, what, 'props');
    return columns;
  },
  explain(error, entity, what) {
    const { code, constraint } = error as { code?: string; constraint?: string };
    if (code !== '23505') return undefined;
    if (constraint === 'bcms_templates_pkey') return new Error(`${what}: a template with _id "${entity._id}" exists: use update`, { cause: error });
    return new TemplateNameTakenError(what, String(entity.name), error);
  },
};

const ENTRIES: Table<BCMSEntry> = {
  name: 'bcms_entries',
  where: 'BCMSRepo.entry',
  columns: ['id', 'cid', 'template_id', 'user_id', 'status', 'meta', 'content', 'created_at', 'updated_at'],
  toEntity: (row) => ({
    _id: row.id as string,
    cid: row.cid as string,
    templateId: row.template_id as string,
    userId: row.user_id as string,
    status: row.status as string,
    meta: row.meta as BcmsEntryMeta[],
    content: row.content as unknown[],
    createdAt: time(row.created_at),
    updatedAt: time(row.updated_at),
  }),
  toColumns(entity, what, adding) {
    const columns: Record<string, unknown> = { ...idColumn(entity, what, adding), ...cidColumn(entity, what) };
    if (adding || entity.templateId !== undefined) {
      if (!isIdShaped(entity.templateId)) throw new BcmsRepoFieldError(what, 'templateId', `${JSON.stringify(entity.templateId)} is not a template id`);
      columns.template_id = entity.templateId;
    }
    if (entity.userId !== undefined) columns.user_id = text(entity.userId, what, 'userId');
    // BCMS's status is optional: a missing one is stored as ''.
    if (entity.status !== undefined) columns.status = entity.status === null ? '' : text(entity.status, what, 'status');
    if (entity.meta !== undefined) columns.meta = json(entity.meta, what, 'meta');
    if (entity.content !== undefined) columns.content = json(entity.content, what, 'content');
    return columns;
  },
  explain(error, entity, what) {
    const { code } = error as { code?: string };
    if (code === '23503') return new Error(`${what}: no template with id "${entity.templateId}"`, { cause: error });
    if (code === '23505') return new Error(`${what}: an entry with _id "${entity._id}" exists: use update`, { cause: error });
    return undefined;
  },
};

/** As BCMS does, the object given to `add` or `update` gets the id, cid and times too (unless frozen). */
function writeBack(given: unknown, stored: { _id: string }): void {
  if (given === null || typeof given !== 'object' || Object.isFrozen(given)) return;
  const target = given as Record<string, unknown>;
  for (const key of ['_id', 'cid', 'createdAt', 'updatedAt']) target[key] = (stored as unknown as Record<string, unknown>)[key];
}

function entityOf(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`${what}: takes an object, got ${kind(value)}`);
  return value as Record<string, unknown>;
}

function predicate<Entity>(query: unknown, what: string): (entity: Entity) => boolean {
  if (typeof query !== 'function') throw new TypeError(`${what}: takes a predicate function (entity) => boolean, got ${kind(query)}`);
  // Truthy, as FSDB tests it.
  return (entity) => Boolean((query as (entity: Entity) => unknown)(entity));
}

/** The base methods over one table. */
function createBase<Entity extends { _id: string }, New>(
  table: Table<Entity>,
  store: ContentStore,
): BCMSBaseRepository<Entity, New> & {
  select(build: (query: Knex.QueryBuilder) => Knex.QueryBuilder): Promise<Entity[]>;
  patch(entity: unknown, what: string, db?: Knex): Promise<Entity | null>;
} {
  const run = <T>(query: (db: Knex) => Promise<T>): Promise<T> => store.run(query);
  const { name, where, columns } = table;
  const select = async (build: (query: Knex.QueryBuilder) => Knex.QueryBuilder, db?: Knex): Promise<Entity[]> => {
    const query = (knex: Knex) => build(knex(name).select(columns)).orderBy(['created_at', 'seq']) as unknown as Promise<Record<string, unknown>[]>;
    const rows = db === undefined ? await run(query) : await query(db);
    return rows.map(table.toEntity);
  };
  const all = (db?: Knex) => select((q) => q, db);

  async function insert(entities: unknown[], what: string): Promise<Entity[]> {
    const prepared = entities.map((entity, i) => {
      const fields = entityOf(entity, entities.length === 1 ? what : `${what}[${i}]`);
      return { fields, columns: table.toColumns(fields, entities.length === 1 ? what : `${what}[${i}]`, true) };
    });
    try {
      const rows = (await run((db) =>
        db(name)
          .insert(prepared.map((p) => p.columns))
          .returning(columns),
      )) as Record<string, unknown>[];
      const stored = rows.map(table.toEntity);
      // Rows come back in the order of the insert's values.
      stored.forEach((entity, i) => {
        writeBack(entities[i], entity);
      });
      return stored;
    } catch (error) {
      // The row the error's detail names (`Key (id)=(...) already exists.`), else the first.
      const culprit = prepared.find((p) => (error as { detail?: string }).detail?.includes(`=(${String(p.columns.id)})`)) ?? prepared[0];
      throw table.explain(error, culprit?.fields ?? {}, what) ?? error;
    }
  }

  /** Writes the given fields of the row `_id`; `null` when there is none. */
  async function patch(entity: unknown, what: string, db?: Knex): Promise<Entity | null> {
    const fields = entityOf(entity, what);
    if (!usableId(fields._id)) return null;
    const changes = table.toColumns(fields, what, false);
    const write = async (knex: Knex) => {
      try {
        const [row] = (await knex(name)
          .where('id', fields._id as string)
          .update({ ...changes, updated_at: knex.raw('clock_timestamp()') })
          .returning(columns)) as Record<string, unknown>[];
        return row === undefined ? null : table.toEntity(row);
      } catch (error) {
        throw table.explain(error, fields, what) ?? error;
      }
    };
    return db === undefined ? run(write) : write(db);
  }

  async function updateOrThrow(entity: unknown, what: string, db?: Knex): Promise<Entity> {
    const updated = await patch(entity, what, db);
    if (updated === null) throw new Error(`${what}: there is no row with _id ${JSON.stringify((entity as { _id?: unknown })?._id)}: use add`);
    writeBack(entity, updated);
    return updated;
  }

  const base = {
    select,
    patch,
    findAll: () => all(),
    async findAllById(ids: string[]) {
      if (!Array.isArray(ids)) throw new TypeError(`${where}.findAllById: takes an array of ids, got ${kind(ids)}`);
      const wanted = ids.filter(usableId);
      if (wanted.length === 0) return [];
      const found = await select((q) => q.whereRaw(...inList('id', [...new Set(wanted)])));
      const byId = new Map(found.map((e) => [e._id, e]));
      return wanted.flatMap((id) => (byId.has(id) ? [byId.get(id) as Entity] : []));
    },
    async findById(id: string) {
      if (!usableId(id)) return null;
      return (await select((q) => q.where('id', id)))[0] ?? null;
    },
    async findBy(query: (entity: Entity) => boolean) {
      const test = predicate<Entity>(query, `${where}.findBy`);
      return (await all()).find(test) ?? null;
    },
    async findAllBy(query: (entity: Entity) => boolean) {
      const test = predicate<Entity>(query, `${where}.findAllBy`);
      return (await all()).filter(test);
    },
    async add(entity: New) {
      return (await insert([entity], `${where}.add`))[0] as Entity;
    },
    async addMany(entities: New[]) {
      if (!Array.isArray(entities)) throw new TypeError(`${where}.addMany: takes an array, got ${kind(entities)}`);
      return entities.length === 0 ? [] : insert(entities, `${where}.addMany`);
    },
    update: (entity: Pick<Entity, '_id'> & Partial<Entity>) => updateOrThrow(entity, `${where}.update`),
    async updateMany(first: unknown, change?: (entity: Entity) => Entity) {
      const what = `${where}.updateMany`;
      if (Array.isArray(first)) {
        return run((db) =>
          db.transaction(async (trx) => {
            const out: Entity[] = [];
            for (const [i, entity] of first.entries()) out.push(await updateOrThrow(entity, `${what}[${i}]`, trx));
            return out;
          }),
        );
      }
      const test = predicate<Entity>(first, what);
      if (typeof change !== 'function') throw new TypeError(`${what}: takes (query, update function) or an array of entities`);
      return run((db) =>
        db.transaction(async (trx) => {
          const out: Entity[] = [];
          for (const current of (await all(trx)).filter(test)) {
            const next = change(current);
            out.push(await updateOrThrow({ ...entityOf(next, what), _id: current._id }, what, trx));
          }
          return out;
        }),
      );
    },
    async deleteById(id: string) {
      if (!usableId(id)) return false;
      // `returning`: PGlite does not report a row count for a delete.
      return (await run((db) => db(name).where('id', id).delete().returning('id'))).length > 0;
    },
    async deleteAllById(ids: string[]) {
      if (!Array.isArray(ids)) throw new TypeError(`${where}.deleteAllById: takes an array of ids, got ${kind(ids)}`);
      const wanted = [...new Set(ids.filter(usableId))];
      const rows =
        wanted.length === 0
          ? []
          : await run((db) =>
              db(name)
                .whereRaw(...inList('id', wanted))
                .delete()
                .returning('id'),
            );
      return rows.length === new Set(ids).size;
    },
    async deleteOne(query: (entity: Entity) => boolean) {
      const found = (await all()).find(predicate<Entity>(query, `${where}.deleteOne`));
      return found === undefined ? false : base.deleteById(found._id);
    },
    async deleteMany(query: (entity: Entity) => boolean) {
      const found = (await all()).filter(predicate<Entity>(query, `${where}.deleteMany`)).map((e) => e._id);
      if (found.length === 0) return false;
      return (
        (
          await run((db) =>
            db(name)
              .whereRaw(...inList('id', found))
              .delete()
              .returning('id'),
          )
        ).length > 0
      );
    },
    async count() {
      const row = await run((db) => db(name).count({ count: '*' }).first());
      // pg answers count(*) as a string (a bigint); PGlite as a number.
      return Number(row?.count ?? 0);
    },
  };
  return base as unknown as ReturnType<typeof createBase<Entity, New>>;
}

/** A prop condition as JSON containment on `props`: `[{ "type": "TAG", "defaultData": ["id"] }]`. */
const propHolds = (type: string, defaultData: unknown): string => JSON.stringify([{ type, defaultData }]);

/** BCMSRepo's entry and template repositories on one router's database. */
export function createBcmsContentRepo(store: ContentStore): BCMSContentRepo {
  const entryBase = createBase<BCMSEntry, NewBCMSEntry>(ENTRIES, store);
  const templateBase = createBase<BCMSTemplate, NewBCMSTemplate>(TEMPLATES, store);
  const run = <T>(query: (db: Knex) => Promise<T>): Promise<T> => store.run(query);
  const first = async <T>(found: Promise<T[]>): Promise<T | null> => (await found)[0] ?? null;
  const stringOr = <T>(value: unknown, empty: T, then: (value: string) => Promise<T>): Promise<T> => (usableId(value) ? then(value) : Promise.resolve(empty));

  const entryMethods: BCMSEntryRepositoryMethods = {
    findByTemplateIdAndRef: (templateId, ref) =>
      stringOr(templateId, null, (t) =>
        stringOr(ref, null, (r) => first(entryBase.select((q) => q.where('template_id', t).andWhere((w) => w.where('id', r).orWhere('cid', r).orWhereRaw(`meta #>> '{0,props,1,data,0}' = ?`, [r]))))),
      ),
    findByTemplateIdAndCid: (templateId, cid) => stringOr(templateId, null, (t) => stringOr(cid, null, (c) => first(entryBase.select((q) => q.where({ template_id: t, cid: c }))))),
    findByTemplateIdAndId: (templateId, id) => stringOr(templateId, null, (t) => stringOr(id, null, (i) => first(entryBase.select((q) => q.where({ template_id: t, id: i }))))),
    findAllByStatus: (status) => (typeof status === 'string' && !status.includes('\0') ? entryBase.select((q) => q.where('status', status)) : Promise.resolve([])),
    findAllByTemplateId: (templateId) => stringOr(templateId, [], (t) => entryBase.select((q) => q.where('template_id', t))),
    findAllByWidgetId: (widgetId) =>
      stringOr(widgetId, [], (w) => entryBase.findAllBy((e) => e.content.some((lng) => ((lng as { nodes?: { attrs?: { _id?: unknown } }[] }).nodes ?? []).some((node) => node?.attrs?._id === w)))),
    async clearAllStatuses(status) {
      if (typeof status !== 'string' || status.includes('\0')) return;
      await run((db) =>
        db('bcms_entries')
          .where('status', status)
          .update({ status: '', updated_at: db.raw('clock_timestamp()') }),
      );
    },
    async deleteAllByTemplateId(templateId) {
      if (!usableId(templateId)) return;
      await run((db) => db('bcms_entries').where('template_id', templateId).delete());
    },
    countByTemplateId: (templateId) => stringOr(templateId, 0, async (t) => Number((await run((db) => db('bcms_entries').where('template_id', t).count({ count: '*' }).first()))?.count ?? 0)),
    add: (entry) => entryBase.add(entry),
    findById: (id) => entryBase.findById(id),
    update: (entry) => entryBase.patch(entry, 'BCMSRepo.entry.methods.update'),
    deleteById: (id) => entryBase.deleteById(id),
  };

  const byProp = (type: string, defaultData: (id: string) => unknown) => (id: string) =>
    stringOr(id, [] as BCMSTemplate[], (i) => templateBase.select((q) => q.whereRaw('props @> ?::jsonb', [propHolds(type, defaultData(i))])));

  const templateMethods: BCMSTemplateRepositoryMethods = {
    findByRef: (ref) => stringOr(ref, null, (r) => first(templateBase.select((q) => q.where('id', r).orWhere('cid', r).orWhere('name', r)))),
    findByName: (name) => stringOr(name, null, (n) => first(templateBase.select((q) => q.where('name', n)))),
    findByCid: (cid) => stringOr(cid, null, (c) => first(templateBase.select((q) => q.where('cid', c)))),
    async findAllByCid(cids) {
      if (!Array.isArray(cids)) throw new TypeError(`BCMSRepo.template.methods.findAllByCid: takes an array of cids, got ${kind(cids)}`);
      const wanted = cids.filter(usableId);
      return wanted.length === 0 ? [] : templateBase.select((q) => q.whereRaw(...inList('cid', wanted)));
    },
    findAllByPropGroupPointer: byProp('GROUP_POINTER', (id) => ({ _id: id })),
    findAllByPropEntryPointer: byProp('ENTRY_POINTER', (id) => [{ templateId: id }]),
    findAllByPropTag: byProp('TAG', (id) => [id]),
    findAllByPropMedia: byProp('MEDIA', (id) => [id]),
    findAllByPropWidget: byProp('WIDGET', (id) => ({ _id: id })),
    findAll: () => templateBase.findAll(),
    findById: (id) => templateBase.findById(id),
    add: (template) => templateBase.add(template),
    update: (template) => templateBase.patch(template, 'BCMSRepo.template.methods.update'),
    deleteById: (id) => templateBase.deleteById(id),
  };

  const publicBase = <E extends { _id: string }, N>(base: ReturnType<typeof createBase<E, N>>): BCMSBaseRepository<E, N> => {
    const { select: _select, patch: _patch, ...rest } = base;
    return rest;
  };
  return {
    entry: { ...publicBase(entryBase), methods: entryMethods },
    template: { ...publicBase(templateBase), methods: templateMethods },
  };
}

const contentRepos = new WeakMap<ContentStore, BCMSContentRepo>();

/**
 * BCMSRepo's repositories on one router's database, one per store: the package's own routes
 * (`/api/extensions/templates`) read and write through the object `BCMSRepo` uses.
 */
export function bcmsContentRepoOf(store: ContentStore): BCMSContentRepo {
  let repo = contentRepos.get(store);
  if (repo === undefined) {
    repo = createBcmsContentRepo(store);
    contentRepos.set(store, repo);
  }
  return repo;
}

import type { Knex } from 'knex';
import { BcmsHttpError } from '../http/errors';
import type { ContentStore } from './store';
import { TEMPLATE_FIELD_LENGTHS } from './values';

import type { BcmsEntry, BcmsEntryMeta, BcmsTemplate } from './shapes';

export type { BcmsEntry, BcmsEntryMeta, BcmsEntryMetaProp, BcmsTemplate } from './shapes';

/** A template to add: its name, and optionally its label, description, single-entry flag and props. */
export type NewTemplate = Pick<BcmsTemplate, 'name'> & Partial<Pick<BcmsTemplate, 'label' | 'desc' | 'singleEntry' | 'props'>>;
/** A change to a template: its `_id`, and the fields to change. */
export type TemplateUpdate = Pick<BcmsTemplate, '_id'> & Partial<Omit<BcmsTemplate, '_id' | 'createdAt' | 'updatedAt'>>;
/** An entry to add: its template, and optionally its user, status, meta and content. */
export type NewEntry = Pick<BcmsEntry, 'templateId'> & Partial<Pick<BcmsEntry, 'userId' | 'status' | 'meta' | 'content'>>;
/** A change to an entry: its `_id`, and the fields to change. */
export type EntryUpdate = Pick<BcmsEntry, '_id'> & Partial<Pick<BcmsEntry, 'userId' | 'status' | 'meta' | 'content'>>;

/** The entries part of the content repo (`repo.entry` in a handler, `router.repo.entry` in the app). */
export interface BcmsEntryRepo {
  /** Every entry of a template, oldest first; `[]` for an unknown or malformed id. */
  findAllByTemplateId(templateId: string): Promise<BcmsEntry[]>;
  findById(id: string): Promise<BcmsEntry | null>;
  countByTemplateId(templateId: string): Promise<number>;
  add(entry: NewEntry): Promise<BcmsEntry>;
  /** Changes the given fields of the entry `_id`; `null` when there is none. */
  update(entry: EntryUpdate): Promise<BcmsEntry | null>;
  /** `true` when an entry was deleted. */
  deleteById(id: string): Promise<boolean>;
}

/** The templates part of the content repo (`repo.template` in a handler, `router.repo.template` in the app). */
export interface BcmsTemplateRepo {
  findAll(): Promise<BcmsTemplate[]>;
  findById(id: string): Promise<BcmsTemplate | null>;
  findByName(name: string): Promise<BcmsTemplate | null>;
  add(template: NewTemplate): Promise<BcmsTemplate>;
  update(template: TemplateUpdate): Promise<BcmsTemplate | null>;
  /** Deletes the template and, as BCMS does, its entries. */
  deleteById(id: string): Promise<boolean>;
}

/** What handlers get as `repo`. */
export interface BcmsRepo {
  entry: BcmsEntryRepo;
  template: BcmsTemplateRepo;
}

// Ids are text: UUIDs (what Postgres makes for a row added without one) and BCMS's hex ids (24
// characters from MongoDB, 64 from FSDB). Any string is looked up as it is (an unknown one finds
// nothing); one that cannot be text (NUL) or is absurdly long is not asked for.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HEX_ID = /^[0-9a-f]{24,64}$/i;
/** The ids a template or an entry may be given: a UUID or BCMS's hex id. */
export const isIdShaped = (value: unknown): value is string => typeof value === 'string' && (UUID.test(value) || HEX_ID.test(value));
const isId = (value: unknown): value is string => typeof value === 'string' && value !== '' && value.length <= 200 && !value.includes('\0');

const TEMPLATE_COLUMNS = ['id', 'name', 'label', 'desc', 'single_entry', 'props', 'created_at', 'updated_at'];
const ENTRY_COLUMNS = ['id', 'template_id', 'user_id', 'status', 'meta', 'content', 'created_at', 'updated_at'];

export interface TemplateRow {
  id: string;
  name: string;
  label: string;
  desc: string;
  single_entry: boolean;
  props: unknown[];
  created_at: Date;
  updated_at: Date;
}

export interface EntryRow {
  id: string;
  template_id: string;
  user_id: string;
  status: string;
  meta: BcmsEntryMeta[];
  content: unknown[];
  created_at: Date;
  updated_at: Date;
}

export const toTemplate = (row: TemplateRow): BcmsTemplate => ({
  _id: row.id,
  name: row.name,
  label: row.label,
  desc: row.desc,
  singleEntry: row.single_entry,
  props: row.props,
  createdAt: row.created_at.getTime(),
  updatedAt: row.updated_at.getTime(),
});

export const toEntry = (row: EntryRow): BcmsEntry => ({
  _id: row.id,
  templateId: row.template_id,
  userId: row.user_id,
  status: row.status,
  meta: row.meta,
  content: row.content,
  createdAt: row.created_at.getTime(),
  updatedAt: row.updated_at.getTime(),
});

/** By creation time, then by insertion order (`seq`, a bigint: a string from `pg`). */
const oldestFirst = (a: { created_at: Date; seq: string | number }, b: { created_at: Date; seq: string | number }): number =>
  a.created_at.getTime() - b.created_at.getTime() || Number(a.seq) - Number(b.seq);

/** JSONB columns take JSON text: `pg` would send a JS array as a Postgres array. */
function json(value: unknown, where: string): string {
  if (!Array.isArray(value)) throw new TypeError(`${where} must be an array`);
  const text = JSON.stringify(value);
  // Postgres text cannot hold NUL (JSONB refuses \u0000): say so, rather than a raw 22P05.
  if (text.includes('\\u0000')) throw new TypeError(`${where} contains a NUL character, which Postgres cannot store`);
  return text;
}

function text(value: unknown, where: string, allowEmpty = true): string {
  if (typeof value !== 'string' || (!allowEmpty && value === '')) throw new TypeError(`${where} must be a ${allowEmpty ? '' : 'non-empty '}string`);
  if (value.includes('\0')) throw new TypeError(`${where} contains a NUL character, which Postgres cannot store`);
  return value;
}

/** A template's name, label or desc, no longer than TEMPLATE_FIELD_LENGTHS: a longer one is a 400 naming it, before any query. */
function templateText(value: unknown, where: string, field: keyof typeof TEMPLATE_FIELD_LENGTHS, allowEmpty = true): string {
  const checked = text(value, `${where}: ${field}`, allowEmpty);
  const max = TEMPLATE_FIELD_LENGTHS[field];
  if (checked.length > max) throw new BcmsHttpError('TOO_LARGE', `${where}: ${field} is longer than ${max} characters (it has ${checked.length}).`);
  return checked;
}

const NUL = '\0';

/** The repository of one router's database. Every query is parameterised by Knex. */
export function createRepository(store: ContentStore): BcmsRepo {
  const run = <T>(query: (db: Knex) => Promise<T>): Promise<T> => store.run(query);

  const entry: BcmsEntryRepo = {
    async findAllByTemplateId(templateId) {
      if (!isId(templateId)) return [];
      // Sorted here, not by ORDER BY: a sort makes Postgres hold every row back until the last one
      // is read, where without it rows stream to us while the scan goes on (measured: 2 ms of
      // 9 ms for a 1,000-entry template). Rows mostly arrive in insertion order, which the sort
      // below passes through quickly.
      const rows = await run(
        (db) =>
          db('bcms_entries')
            .select([...ENTRY_COLUMNS, 'seq'])
            .where('template_id', templateId) as Promise<(EntryRow & { seq: string | number })[]>,
      );
      rows.sort(oldestFirst);
      return rows.map(toEntry);
    },
    async findById(id) {
      if (!isId(id)) return null;
      const row = await run((db) => db('bcms_entries').select(ENTRY_COLUMNS).where('id', id).first() as Promise<EntryRow | undefined>);
      return row === undefined ? null : toEntry(row);
    },
    async countByTemplateId(templateId) {
      if (!isId(templateId)) return 0;
      const row = await run((db) => db('bcms_entries').where('template_id', templateId).count({ count: '*' }).first());
      // pg answers count(*) as a string (a bigint); PGlite as a number.
      return Number(row?.count ?? 0);
    },
    async add(input) {
      if (!isIdShaped(input?.templateId)) throw new TypeError(`repo.entry.add: templateId ${JSON.stringify(input?.templateId)} is not a template id`);
      try {
        const [row] = await run((db) =>
          db<EntryRow>('bcms_entries')
            .insert({
              template_id: input.templateId,
              user_id: text(input.userId ?? '', 'repo.entry.add: userId'),
              status: text(input.status ?? '', 'repo.entry.add: status'),
              meta: json(input.meta ?? [], 'repo.entry.add: meta'),
              content: json(input.content ?? [], 'repo.entry.add: content'),
            } as never)
            .returning(ENTRY_COLUMNS),
        );
        return toEntry(row as EntryRow);
      } catch (error) {
        if ((error as { code?: string }).code === '23503') throw new Error(`repo.entry.add: no template with id "${input.templateId}"`, { cause: error });
        throw error;
      }
    },
    async update(input) {
      if (!isId(input?._id)) return null;
      const changes: Record<string, unknown> = { updated_at: store.database.knex.raw('clock_timestamp()') };
      if (input.userId !== undefined) changes.user_id = text(input.userId, 'repo.entry.update: userId');
      if (input.status !== undefined) changes.status = text(input.status, 'repo.entry.update: status');
      if (input.meta !== undefined) changes.meta = json(input.meta, 'repo.entry.update: meta');
      if (input.content !== undefined) changes.content = json(input.content, 'repo.entry.update: content');
      const [row] = await run((db) =>
        db<EntryRow>('bcms_entries')
          .where('id', input._id)
          .update(changes as never)
          .returning(ENTRY_COLUMNS),
      );
      return row === undefined ? null : toEntry(row as EntryRow);
    },
    async deleteById(id) {
      if (!isId(id)) return false;
      // `returning`: PGlite does not report a row count for a delete.
      return (await run((db) => db('bcms_entries').where('id', id).delete().returning('id'))).length > 0;
    },
  };

  const template: BcmsTemplateRepo = {
    async findAll() {
      const rows = await run((db) => db('bcms_templates').select(TEMPLATE_COLUMNS).orderBy(['created_at', 'seq']) as Promise<TemplateRow[]>);
      return rows.map(toTemplate);
    },
    async findById(id) {
      if (!isId(id)) return null;
      const row = await run((db) => db('bcms_templates').select(TEMPLATE_COLUMNS).where('id', id).first() as Promise<TemplateRow | undefined>);
      return row === undefined ? null : toTemplate(row);
    },
    async findByName(name) {
      if (typeof name !== 'string' || name.includes(NUL)) return null;
      const row = await run((db) => db('bcms_templates').select(TEMPLATE_COLUMNS).where('name', name).first() as Promise<TemplateRow | undefined>);
      return row === undefined ? null : toTemplate(row);
    },
    async add(input) {
      templateText(input?.name, 'repo.template.add', 'name', false);
      const label = templateText(input.label ?? input.name, 'repo.template.add', 'label');
      const desc = templateText(input.desc ?? '', 'repo.template.add', 'desc');
      try {
        const [row] = await run((db) =>
          db<TemplateRow>('bcms_templates')
            .insert({
              name: input.name,
              label,
              desc,
              single_entry: input.singleEntry === true,
              props: json(input.props ?? [], 'repo.template.add: props'),
            } as never)
            .returning(TEMPLATE_COLUMNS),
        );
        return toTemplate(row as TemplateRow);
      } catch (error) {
        if ((error as { code?: string }).code === '23505') throw new Error(`repo.template.add: a template named "${input.name}" exists`, { cause: error });
        throw error;
      }
    },
    async update(input) {
      if (!isId(input?._id)) return null;
      const changes: Record<string, unknown> = { updated_at: store.database.knex.raw('clock_timestamp()') };
      if (input.name !== undefined) changes.name = templateText(input.name, 'repo.template.update', 'name', false);
      if (input.label !== undefined) changes.label = templateText(input.label, 'repo.template.update', 'label');
      if (input.desc !== undefined) changes.desc = templateText(input.desc, 'repo.template.update', 'desc');
      if (input.singleEntry !== undefined) changes.single_entry = input.singleEntry === true;
      if (input.props !== undefined) changes.props = json(input.props, 'repo.template.update: props');
      try {
        const [row] = await run((db) =>
          db<TemplateRow>('bcms_templates')
            .where('id', input._id)
            .update(changes as never)
            .returning(TEMPLATE_COLUMNS),
        );
        return row === undefined ? null : toTemplate(row as TemplateRow);
      } catch (error) {
        if ((error as { code?: string }).code === '23505') throw new Error(`repo.template.update: a template named "${input.name}" exists`, { cause: error });
        throw error;
      }
    },
    async deleteById(id) {
      if (!isId(id)) return false;
      return (await run((db) => db('bcms_templates').where('id', id).delete().returning('id'))).length > 0;
    },
  };

  return { entry, template };
}

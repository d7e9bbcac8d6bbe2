import type { BcmsRepo } from '../db/repository';
import type { BcmsEntry, BcmsEntryMeta, BcmsTemplate } from '../db/shapes';
import { templateNameOf } from '../extensions/bodies';
import { describe } from './token';

/** What `seed.template()` takes: a template as the SDK creates one (`name` made from `label` when left out). */
export interface SeedTemplate {
  label: string;
  name?: string;
  desc?: string;
  singleEntry?: boolean;
  /** BCMS's props (`[{ id, name, label, type, required, array, defaultData }]`), stored as given. */
  props?: unknown[];
}

/** What `seed.entry()` takes besides the template. */
export interface SeedEntry {
  /** `[{ lng, props: [{ id, data }] }]`, BCMS's shape. Default `[]`. */
  meta?: BcmsEntryMeta[];
  content?: unknown[];
  status?: string;
  userId?: string;
}

/** Templates and entries written on the service's database, as handlers and the SDK then read them. */
export interface TestSeed {
  /**
   * Adds a template; resolves to it in BCMS's shape (`_id`, `name`...).
   *
   * @example
   * const blog = await service.seed.template({ label: 'Blog', props: [] }); // name 'blog'
   */
  template(template: SeedTemplate): Promise<BcmsTemplate>;
  /**
   * Adds an entry to a template (its `_id`, or the template itself); resolves to it in BCMS's shape.
   *
   * @example
   * await service.seed.entry(blog, { meta: [{ lng: 'en', props: [{ id: 'title', data: ['Hello'] }] }] });
   */
  entry(template: string | Pick<BcmsTemplate, '_id'>, entry?: SeedEntry): Promise<BcmsEntry>;
}

const TEMPLATE_KEYS = ['label', 'name', 'desc', 'singleEntry', 'props'];
const ENTRY_KEYS = ['meta', 'content', 'status', 'userId'];

function known(value: object, keys: readonly string[], where: string): void {
  const unknown = Object.keys(value).filter((key) => !keys.includes(key));
  if (unknown.length > 0) throw new TypeError(`${where}: unknown field ${unknown.map((key) => JSON.stringify(key)).join(', ')} (known: ${keys.join(', ')})`);
}

/** The repository's own errors, said as the kit's call that caused them. */
function asSeedError(error: unknown, where: string): Error {
  const message = (error as Error)?.message ?? String(error);
  const own = message.replace(/^repo\.(template|entry)\.add:?\s*/, '');
  return error instanceof TypeError ? new TypeError(`${where}: ${own}`) : new Error(`${where}: ${own}`, { cause: error });
}

export function createSeed(repo: () => BcmsRepo): TestSeed {
  return {
    async template(input) {
      const where = 'seed.template()';
      if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new TypeError(`${where} takes { label, name?, desc?, singleEntry?, props? }; got ${describe(input)}`);
      known(input, TEMPLATE_KEYS, where);
      const { label, desc, singleEntry, props } = input;
      if (typeof label !== 'string' || label.trim() === '') throw new TypeError(`${where}: label must be a non-empty string; got ${describe(label)}`);
      if (input.name !== undefined && (typeof input.name !== 'string' || input.name === '')) throw new TypeError(`${where}: name must be a non-empty string; got ${describe(input.name)}`);
      const name = input.name ?? templateNameOf(label);
      if (name === '') throw new TypeError(`${where}: label ${JSON.stringify(label)} makes no template name (lower-case letters, digits and "_"): give a name`);
      if (desc !== undefined && typeof desc !== 'string') throw new TypeError(`${where}: desc must be a string; got ${describe(desc)}`);
      if (singleEntry !== undefined && typeof singleEntry !== 'boolean') throw new TypeError(`${where}: singleEntry must be true or false; got ${describe(singleEntry)}`);
      if (props !== undefined && !Array.isArray(props)) throw new TypeError(`${where}: props must be an array of BCMS props; got ${describe(props)}`);
      try {
        return await repo().template.add({ name, label, desc: desc ?? '', singleEntry: singleEntry ?? false, props: props ?? [] });
      } catch (error) {
        throw asSeedError(error, where);
      }
    },

    async entry(template, input = {}) {
      const where = 'seed.entry()';
      const templateId = typeof template === 'string' ? template : (template as { _id?: unknown } | null)?._id;
      if (typeof templateId !== 'string' || templateId === '') {
        throw new TypeError(`${where}: the first argument must be a template or its _id (what seed.template() resolves to); got ${describe(template)}`);
      }
      if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new TypeError(`${where}: the second argument is { meta?, content?, status?, userId? }; got ${describe(input)}`);
      known(input, ENTRY_KEYS, where);
      const { meta = [], content = [], status = '', userId = '' } = input;
      checkMeta(meta, where);
      if (!Array.isArray(content)) throw new TypeError(`${where}: content must be an array; got ${describe(content)}`);
      if (typeof status !== 'string') throw new TypeError(`${where}: status must be a string; got ${describe(status)}`);
      if (typeof userId !== 'string') throw new TypeError(`${where}: userId must be a string; got ${describe(userId)}`);
      try {
        return await repo().entry.add({ templateId, meta, content, status, userId });
      } catch (error) {
        throw asSeedError(error, where);
      }
    },
  };
}

/** BCMS's entry meta: `[{ lng, props: [{ id, data }] }]`. */
function checkMeta(meta: unknown, where: string): void {
  const shape = "[{ lng: 'en', props: [{ id, data }] }]";
  if (!Array.isArray(meta)) throw new TypeError(`${where}: meta must be ${shape}; got ${describe(meta)}`);
  meta.forEach((language, index) => {
    const at = `${where}: meta[${index}]`;
    if (language === null || typeof language !== 'object') throw new TypeError(`${at} must be { lng, props }; got ${describe(language)}`);
    const { lng, props } = language as { lng?: unknown; props?: unknown };
    if (typeof lng !== 'string' || lng === '') throw new TypeError(`${at}.lng must be a language code such as 'en'; got ${describe(lng)}`);
    if (!Array.isArray(props)) throw new TypeError(`${at}.props must be an array of { id, data }; got ${describe(props)}`);
    props.forEach((prop, p) => {
      if (prop === null || typeof prop !== 'object' || typeof (prop as { id?: unknown }).id !== 'string') {
        throw new TypeError(`${at}.props[${p}] must be { id, data } with id a string; got ${describe(prop)}`);
      }
    });
  });
}

import { bcmsContentRepoOf, type BCMSContentRepo, type BCMSEntryRepository, type BCMSTemplateRepository } from '../db/content';
import type { ContentStore } from '../db/store';

let current: ContentStore | undefined;

/** Called by `bcmsExtensions` with its database: BCMSRepo, and plugin repositories, follow the router built last. */
export function bindBcmsRepo(store: ContentStore): void {
  current = store;
}

const NOT_BOUND = 'was used before any router was built: call bcmsExtensions(...) first';

/**
 * The database of the router built last, for repositories made before any router (at module load,
 * in a controller's `setup`): they ask for it at each call. `user` names the caller in the error.
 */
export function boundStore(user: string): ContentStore {
  if (current === undefined) throw new Error(`${user} ${NOT_BOUND}`);
  return current;
}

function content(): BCMSContentRepo {
  if (current === undefined) throw new Error(`BCMSRepo ${NOT_BOUND}, or use \`repo\` from the handler context`);
  return bcmsContentRepoOf(boundStore('BCMSRepo'));
}

/** An object whose methods call the current router's repository when they are called, not when they are read. */
function delegate<T extends object>(names: readonly (keyof T)[], pick: () => T): T {
  const methods = {} as Record<keyof T, unknown>;
  for (const name of names) {
    methods[name] = (...args: unknown[]) => (pick()[name] as (...a: unknown[]) => unknown)(...args);
  }
  return Object.freeze(methods) as T;
}

const BASE = ['findAll', 'findAllById', 'findById', 'findBy', 'findAllBy', 'add', 'addMany', 'update', 'updateMany', 'deleteById', 'deleteAllById', 'deleteOne', 'deleteMany', 'count'] as const;
const ENTRY_METHODS = [
  'findByTemplateIdAndRef',
  'findByTemplateIdAndCid',
  'findByTemplateIdAndId',
  'findAllByStatus',
  'findAllByTemplateId',
  'findAllByWidgetId',
  'clearAllStatuses',
  'deleteAllByTemplateId',
  'countByTemplateId',
  'add',
  'findById',
  'update',
  'deleteById',
] as const;
const TEMPLATE_METHODS = [
  'findByRef',
  'findByName',
  'findByCid',
  'findAllByCid',
  'findAllByPropGroupPointer',
  'findAllByPropEntryPointer',
  'findAllByPropTag',
  'findAllByPropMedia',
  'findAllByPropWidget',
  'findAll',
  'findById',
  'add',
  'update',
  'deleteById',
] as const;

function repository<R extends { methods: object }>(pick: () => R, methods: readonly (keyof R['methods'])[]): R {
  return Object.freeze({
    ...delegate(BASE as unknown as (keyof R)[], pick),
    methods: delegate(methods, () => pick().methods as R['methods']),
  }) as R;
}

/**
 * BCMS's `BCMSRepo`, for BCMS-style files, which import it instead of taking `repo` from their
 * context. As in BCMS, each repository has FSDB's base methods at the top level
 * (`BCMSRepo.template.findAll()`, `BCMSRepo.entry.findById(id)`) and BCMS's own under `methods`
 * (`BCMSRepo.entry.methods.findAllByTemplateId(id)`); entities are in BCMS's shape, `cid` included.
 * Bound to the database of the router built last.
 *
 * @example
 * const blogs = await BCMSRepo.entry.methods.findAllByTemplateId(templateId);
 * const template = await BCMSRepo.template.findById(templateId);
 */
export const BCMSRepo: { entry: BCMSEntryRepository; template: BCMSTemplateRepository } = Object.freeze({
  entry: repository<BCMSEntryRepository>(() => content().entry, ENTRY_METHODS),
  template: repository<BCMSTemplateRepository>(() => content().template, TEMPLATE_METHODS),
});

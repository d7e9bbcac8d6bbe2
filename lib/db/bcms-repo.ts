import type { BcmsEntryRepo, BcmsRepo, BcmsTemplateRepo } from './repository';

let current: BcmsRepo | undefined;

/** Called by `bcmsExtensions`: BCMSRepo follows the router built last. */
export function bindBcmsRepo(repo: BcmsRepo): void {
  current = repo;
}

function repo(): BcmsRepo {
  if (current === undefined) {
    throw new Error('BCMSRepo was used before any router was built: call bcmsExtensions(...) first, or use `repo` from the handler context');
  }
  return current;
}

/** Methods that call the current router's repository when they are called, not when they are read. */
function delegate<T extends object>(names: readonly (keyof T)[], pick: () => T): T {
  const methods = {} as Record<keyof T, unknown>;
  for (const name of names) {
    methods[name] = (...args: unknown[]) => (pick()[name] as (...a: unknown[]) => unknown)(...args);
  }
  return Object.freeze(methods) as T;
}

/**
 * The repository for BCMS-style files, which import it instead of taking `repo` from their context:
 * `BCMSRepo.entry.methods.findAllByTemplateId(id)`. Bound to the database of the router built last.
 *
 * @example
 * const blogs = await BCMSRepo.entry.methods.findAllByTemplateId(templateId);
 */
export const BCMSRepo: { entry: { methods: BcmsEntryRepo }; template: { methods: BcmsTemplateRepo } } = Object.freeze({
  entry: Object.freeze({
    methods: delegate<BcmsEntryRepo>(['findAllByTemplateId', 'findById', 'countByTemplateId', 'add', 'update', 'deleteById'], () => repo().entry),
  }),
  template: Object.freeze({
    methods: delegate<BcmsTemplateRepo>(['findAll', 'findById', 'findByName', 'add', 'update', 'deleteById'], () => repo().template),
  }),
});

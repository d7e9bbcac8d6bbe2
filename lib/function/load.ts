import { ownBodyLimit } from '../http/body';
import { isUrlSafe } from '../names';
import { functionBodyCheck } from './body-schema';
import type { BcmsFunction, BcmsFunctionModule } from './types';

/** Checks that each entry is a function module before anything runs (thrown by `bcmsExtensions`). */
export function checkFunctionModules(modules: unknown): asserts modules is BcmsFunctionModule[] {
  if (!Array.isArray(modules)) throw new TypeError('registry.functions must be an array of function modules (createBcmsFunction)');
  modules.forEach((module, index) => {
    if (module === null || typeof module !== 'object' || (module as BcmsFunctionModule).kind !== 'bcms-function') {
      throw new TypeError(`registry.functions[${index}] is not a function module: export createBcmsFunction(async () => ({ config, handler }))`);
    }
  });
}

/** Runs every factory and checks what it yields; `ready` rejects with the first problem found. */
export async function loadFunctions(modules: readonly BcmsFunctionModule[]): Promise<Map<string, BcmsFunction>> {
  const loaded = await Promise.all(
    modules.map(async (module, index) => {
      let definition: BcmsFunction;
      try {
        definition = await module.create();
      } catch (error) {
        throw new Error(`registry.functions[${index}]: its factory threw: ${(error as Error)?.message ?? String(error)}`, { cause: error });
      }
      const where = `registry.functions[${index}]`;
      if (definition === null || typeof definition !== 'object' || definition.config === null || typeof definition.config !== 'object') {
        throw new TypeError(`${where}: the factory must return { config: { name, public }, handler }`);
      }
      const { name, public: isPublic } = definition.config;
      if (!isUrlSafe(name)) throw new Error(`${where}: function name ${JSON.stringify(name)} is not URL-safe (letters, digits, "-", "_", ".", "~", starting with a letter or digit)`);
      // As in BCMS, a function without `public` is private.
      if (isPublic !== undefined && typeof isPublic !== 'boolean') throw new TypeError(`function "${name}": config.public must be true, false or left out (private)`);
      ownBodyLimit(definition.config.bodyLimit, `function "${name}": config`);
      if (typeof definition.handler !== 'function') throw new TypeError(`function "${name}": handler must be a function`);
      functionBodyCheck(definition); // a bodySchema that cannot be checked is refused now
      return definition;
    }),
  );
  const byName = new Map<string, BcmsFunction>();
  for (const definition of loaded) {
    if (byName.has(definition.config.name)) throw new Error(`duplicate function name "${definition.config.name}" in registry.functions`);
    byName.set(definition.config.name, definition);
  }
  return byName;
}

import { createRequire, Module } from 'node:module';
import path from 'node:path';
import { checkFunctionModules, loadFunctions } from '../function/load';
import type { BcmsFunction } from '../function/types';
import { setUpControllers } from '../plugin/mount';
import { PluginRouteTable } from '../plugin/routes';
import type { BcmsPlugin } from '../plugin/types';

/** This package's entry (dist/index.js, or lib/index.ts under the tests): what `require('bcms-extensions')` gives a bundle. */
const SELF = path.resolve(__dirname, '..', 'index');

export type DeploymentKind = 'plugin' | 'function';

/** What a bundle turned out to be, once loaded and checked. */
export type LoadedExtension = { kind: 'plugin'; name: string; plugin: BcmsPlugin } | { kind: 'function'; name: string; definition: BcmsFunction };

/**
 * Runs a bundle's code as a CommonJS module, with `bcms-extensions` resolved to this very package
 * (bundles leave it external), and returns its exports. Deployed code runs with the service's
 * privileges: only keys with the deploy permission may send it.
 */
export function runBundle(code: string, filename: string, self: string = SELF): unknown {
  const module = new Module(filename) as Module & { _compile(code: string, filename: string): void };
  module.filename = filename;
  const fallback = createRequire(path.join(process.cwd(), 'bcms-deployment.js'));
  module.require = ((id: string) => (id === 'bcms-extensions' ? require(self) : fallback(id))) as NodeJS.Require;
  module._compile(code, filename);
  return module.exports;
}

/** The file name a deployed version's code runs under (in stacks and logs). */
export function bundleFilename(kind: DeploymentKind, name: string, version: string): string {
  return `bcms-deployment:${kind}/${name}@${version}.js`;
}

/** The default export (ES module interop) or the module itself. */
export function defaultExport(exports: unknown): unknown {
  if (exports !== null && typeof exports === 'object' && 'default' in exports) return (exports as { default: unknown }).default;
  return exports;
}

/**
 * Loads a bundle and checks that it exports what its manifest says: a plugin (createBcmsPlugin),
 * renamed to the manifest's name, or a function module (createBcmsFunction) whose factory yields
 * a function of the manifest's name. Throws with what is wrong.
 */
export async function loadExtension(kind: DeploymentKind, name: string, code: string, filename: string): Promise<LoadedExtension> {
  return checkExtension(kind, name, defaultExport(runBundle(code, filename)));
}

/** Checks what a bundle or module exports against its kind and name; sets up a plugin's controllers. */
export async function checkExtension(kind: DeploymentKind, name: string, exported: unknown): Promise<LoadedExtension> {
  if (kind === 'plugin') {
    const controllers = (exported as BcmsPlugin | null)?.controllers;
    if (exported === null || typeof exported !== 'object' || (controllers !== undefined && !Array.isArray(controllers))) {
      throw new TypeError('the bundle does not export a plugin: its default export must be createBcmsPlugin({ name, controllers })');
    }
    // The deployed name is the manifest's (bcms-plugin.config.json's pluginName), whatever the code says.
    const plugin: BcmsPlugin = { ...(exported as BcmsPlugin), name, ui: undefined };
    await setUpControllers([plugin]);
    new PluginRouteTable([plugin]); // throws on a plugin that cannot work
    return { kind, name, plugin };
  }
  checkFunctionModules([exported]);
  const definition = (await loadFunctions([exported as never])).values().next().value as BcmsFunction;
  // No name asked for (a registry module loaded in an isolate): the factory's name is the function's.
  if (name === '') return { kind, name: definition.config.name, definition };
  if (definition.config.name !== name) {
    throw new Error(`the bundle's function is named "${definition.config.name}", its manifest "${name}": they must agree`);
  }
  return { kind, name, definition };
}

import { createRequire, Module } from 'node:module';
import path from 'node:path';
import { checkEvent, checkJob } from '../events/check';
import type { BCMSEvent, BCMSJob } from '../events/types';
import { checkFunctionModules, loadFunctions } from '../function/load';
import type { BcmsFunction } from '../function/types';
import { setUpControllers } from '../plugin/mount';
import { PluginRouteTable } from '../plugin/routes';
import type { BcmsPlugin } from '../plugin/types';

/** This package's entry (dist/index.js, or lib/index.ts under the tests): what `require('bcms-extensions')` gives a bundle. */
const SELF = path.resolve(__dirname, '..', 'index');

/** What a deployment is: a plugin, a function, or (from a functions project's src/events and src/jobs) an event handler or a job. */
export type DeploymentKind = 'plugin' | 'function' | 'event' | 'job';

/** Every kind, in the order the CLI and the errors name them. */
export const DEPLOYMENT_KINDS: readonly DeploymentKind[] = ['plugin', 'function', 'event', 'job'];

/**
 * A deployed version as log lines name it, in their `extension` field: `function hello@1.0.0`, as
 * its isolates' lines do. Never `name`: pino's own binding of that key (the logger's name) would
 * be written twice in one line.
 */
export function extensionLabel(kind: DeploymentKind, name: string, version: string): string {
  return `${kind} ${name}@${version}`;
}

/**
 * What a bundle turned out to be, once loaded and checked. An event's and a job's `name` is the
 * deployment's (its file's: `src/jobs/tick.ts` is `tick`), set on the definition too.
 */
export type LoadedExtension =
  | { kind: 'plugin'; name: string; plugin: BcmsPlugin }
  | { kind: 'function'; name: string; definition: BcmsFunction }
  | { kind: 'event'; name: string; event: BCMSEvent }
  | { kind: 'job'; name: string; job: BCMSJob };

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
  if (kind === 'event' || kind === 'job') return checkEventOrJob(kind, name, exported);
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

/**
 * An event's or a job's factory run and its result checked (lib/events/check.ts), as BCMS checks
 * them when it loads src/events and src/jobs. Named after the deployment; with no name asked for (a
 * registry entry in an isolate), by the definition's own `name`, if it has one.
 */
async function checkEventOrJob(kind: 'event' | 'job', name: string, exported: unknown): Promise<LoadedExtension> {
  const shape =
    kind === 'event' ? 'createBcmsEvent(async () => ({ config: { scope, method }, handler }))' : 'createBcmsJob(async () => ({ cron: { minute, hour, dayOfMonth, month, dayOfWeek }, handler }))';
  if (typeof exported !== 'function') throw new TypeError(`the bundle does not export ${kind === 'event' ? 'an event' : 'a job'}: its default export must be ${shape}`);
  const made = (await (exported as () => Promise<unknown>)()) as { name?: unknown } | null;
  const own = typeof made?.name === 'string' && made.name !== '' ? made.name : undefined;
  const named = name === '' ? own : name;
  const renamed = named === undefined ? {} : { name: named };
  if (kind === 'event') return { kind, name: named ?? '', event: { ...checkEvent(made, 'the event'), ...renamed } };
  return { kind, name: named ?? '', job: { ...checkJob(made, 'the job'), ...renamed } };
}

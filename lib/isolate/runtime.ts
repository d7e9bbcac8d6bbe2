import { setMaxListeners, type EventEmitter } from 'node:events';
import { Module } from 'node:module';
import type { ContentStore } from '../db/store';
import { type Metrics, NO_METRICS } from '../metrics';
import type { ExtensionHealth, RunningExtension } from '../deploy/deployed';
import type { LiveExtensions } from '../deploy/live';
import { addedLayers } from '../layer';
import { bundleFilename, type DeploymentKind, extensionLabel } from '../deploy/load';
import type { BCMSEvent, BCMSJob, BcmsEventModule, BcmsJobModule } from '../events/types';
import type { BcmsFunction, BcmsFunctionModule } from '../function/types';
import type { ResolvedOptions } from '../options';
import type { BcmsPlugin } from '../plugin/types';
import type { IdentifyPluginKey } from '../security/caller';
import type { AccessTokenVerifier } from '../security/jwt';
import { AnswerHeaderCheck } from './answer-headers';
import { DatabaseBridge } from './database-bridge';
import { LogBudget } from './log-budget';
import { startIsolated, type IsolatedCallSettings } from './extension';
import type { IsolateServices } from './host';
import type { ExtensionSource } from './protocol';
import type { SandboxChoice } from './sandbox';

/** Where the registry's code comes from, for `isolate: 'all'`: each entry's module file. */
export interface RegistrySources {
  plugins: { name: string; source: ExtensionSource }[];
  functions: ExtensionSource[];
  /** Each event's and job's factory (createBcmsEvent, createBcmsJob), in registry order. */
  events: ExtensionSource[];
  jobs: ExtensionSource[];
}

/**
 * One router's isolates: the services they may ask for (its pool, its verifiers, its log) and the
 * limits they run under. Starts deployed versions, and with `isolate: 'all'` the registry.
 */
export class Isolation {
  private readonly services: IsolateServices;
  private readonly registry: RunningExtension[] = [];
  private closed = false;
  /** Aborted by close(): each load under way listens to it (as many as there are deployments loading at once). */
  private readonly closing = new AbortController();

  private readonly calls: IsolatedCallSettings;

  constructor(
    settings: Pick<
      ResolvedOptions,
      | 'logger'
      | 'extensionMemoryMb'
      | 'extensionAnswerMb'
      | 'extensionEnv'
      | 'extensionPermissions'
      | 'extensionPool'
      | 'pluginTimeoutMs'
      | 'functionTimeoutMs'
      | 'jobTimeoutMs'
      | 'loadTimeoutMs'
      | 'bodyLimit'
      | 'bodyTimeoutMs'
      | 'filesDir'
    >,
    deps: { store: ContentStore; verifyAccessToken: AccessTokenVerifier; verifyPluginKey: IdentifyPluginKey; events: EventEmitter; sandbox: SandboxChoice; metrics?: Metrics },
  ) {
    const {
      logger,
      extensionMemoryMb: memoryMb,
      extensionAnswerMb,
      extensionEnv: env,
      extensionPermissions: permissions,
      pluginTimeoutMs,
      functionTimeoutMs,
      jobTimeoutMs,
      loadTimeoutMs,
      bodyLimit,
      bodyTimeoutMs,
      filesDir,
    } = settings;
    const { store, verifyAccessToken, verifyPluginKey, events } = deps;
    // An isolate may emit only the events its layers name, checked as they say (never 'error', which would throw here).
    const layers = addedLayers();
    const layerModules = layers.flatMap((layer) => layer.isolateModule ?? []);
    const checks = new Map(layers.flatMap((layer) => Object.entries(layer.isolateEvents ?? {})));
    const publish = (name: string, data: unknown): void => {
      const check = checks.get(name);
      try {
        const event = check?.(data);
        if (event !== undefined) events.emit(name, event);
      } catch (error) {
        // A listener of the host's that throws on it costs the event, never the service.
        logger.error({ err: error, event: name }, 'bcms-extensions: an event from an isolate could not be handed on');
      }
    };
    const answerLimit = extensionAnswerMb * 1024 * 1024;
    // Extension sessions are bounded by the longest call: a statement, or a transaction left idle, cannot be a live call's past it.
    const bridge = new DatabaseBridge(store, { max: settings.extensionPool.max, timeoutMs: Math.max(functionTimeoutMs, pluginTimeoutMs) }, logger);
    this.services = {
      logger,
      bridge,
      verifyAccessToken,
      verifyPluginKey,
      memoryMb,
      env,
      loadTimeoutMs,
      closing: this.closing.signal,
      filesDir,
      layerModules,
      publish,
      answerLimit,
      logBudget: new LogBudget(logger),
      answerHeaders: new AnswerHeaderCheck(logger),
      sandbox: deps.sandbox,
      permissions,
      metrics: deps.metrics ?? NO_METRICS,
    };
    setMaxListeners(0, this.closing.signal);
    this.calls = { pluginTimeoutMs, functionTimeoutMs, jobTimeoutMs, bodyLimit, bodyTimeoutMs };
  }

  /** A deployed version, loaded in its first isolate (rejects with an ExtensionLoadError). */
  deployment(deployment: { kind: DeploymentKind; name: string; version: string; code: string }): Promise<RunningExtension> {
    const { kind, name, version, code } = deployment;
    return startIsolated(kind, name, extensionLabel(kind, name, version), { type: 'bundle', code, filename: bundleFilename(kind, name, version) }, this.services, this.calls);
  }

  /**
   * A deployed version loaded apart, within the load limit, before it may go live: its isolates,
   * for the next load to take up (`keep`), or ended at once (`isolate: 'none'`, where the service
   * then loads it itself). Rejects with why it does not load.
   */
  async check(deployment: { kind: DeploymentKind; name: string; version: string; code: string }, keep: boolean): Promise<RunningExtension | undefined> {
    const loaded = await this.deployment(deployment);
    if (keep) return loaded;
    await loaded.close?.();
    return undefined;
  }

  /**
   * `isolate: 'all'`: the registry's functions and plugins (the latter once `database` is ready:
   * a setup may use it), loaded in isolates and handed to `live`. Rejects naming what did not load.
   */
  loadRegistry(sources: RegistrySources, live: LiveExtensions, database: Promise<void>): Promise<void>[] {
    const functions = Promise.all(sources.functions.map((source) => this.registryEntry('function', '', source))).then((loaded) => {
      const byName = new Map<string, BcmsFunction>();
      for (const extension of loaded) {
        if (extension.kind !== 'function') continue;
        if (byName.has(extension.name)) throw new Error(`duplicate function name "${extension.name}" in registry.functions`);
        byName.set(extension.name, extension.definition);
      }
      live.setRegistryFunctions(byName);
    });
    const plugins = database
      .then(() => Promise.all(sources.plugins.map(({ name, source }) => this.registryEntry('plugin', name, source))))
      .then((loaded) => live.setIsolatedRegistry(loaded.flatMap((extension) => (extension.kind === 'plugin' ? [extension.plugin] : []))));
    return [functions, plugins];
  }

  /**
   * `isolate: 'all'`: the registry's events (`kind` 'event') or jobs ('job'), each loaded in
   * isolates from its module file, as stand-ins in registry order: each handler runs in its
   * isolates, within functionTimeoutMs (an event) or jobTimeoutMs (a job). A stand-in's `name` is
   * the definition's own, when it has one (the events engine names the others). Rejects naming
   * the entry that did not load.
   */
  async loadRegistryEvents(sources: readonly ExtensionSource[]): Promise<BCMSEvent[]> {
    const loaded = await Promise.all(sources.map((source) => this.registryEntry('event', '', source)));
    return loaded.flatMap((extension) => (extension.kind === 'event' ? [extension.event] : []));
  }

  /** `isolate: 'all'`: the registry's jobs, as `loadRegistryEvents` loads events. */
  async loadRegistryJobs(sources: readonly ExtensionSource[]): Promise<BCMSJob[]> {
    const loaded = await Promise.all(sources.map((source) => this.registryEntry('job', '', source)));
    return loaded.flatMap((extension) => (extension.kind === 'job' ? [extension.job] : []));
  }

  /** `isolate: 'all'`: how the registry's events and jobs are loaded, for lib/events/engine.ts. */
  registryEventsAndJobs(sources: RegistrySources): { events(): Promise<BCMSEvent[]>; jobs(): Promise<BCMSJob[]> } {
    return { events: () => this.loadRegistryEvents(sources.events), jobs: () => this.loadRegistryJobs(sources.jobs) };
  }

  /** How the registry's extensions in isolates fare (`isolate: 'all'`), for the health route. */
  health(): ExtensionHealth[] {
    return this.registry.map((extension) => extension.health?.() ?? { state: 'running' });
  }

  /** Ends the isolates still loading (the service is closing): their loads fail at once, recorded nowhere. */
  stopLoading(): void {
    this.closing.abort();
  }

  /** Ends the registry's isolates (deployed ones end with their deployments). */
  async close(): Promise<void> {
    this.closed = true;
    this.stopLoading();
    await Promise.all(this.registry.map((extension) => extension.close?.()));
    await this.services.bridge.close();
  }

  private async registryEntry(kind: DeploymentKind, name: string, source: ExtensionSource): Promise<RunningExtension> {
    const what = `registry ${kind} ${name || (source as { file: string }).file}`;
    let loaded: RunningExtension;
    try {
      loaded = await startIsolated(kind, name, what, source, this.services, this.calls);
    } catch (error) {
      throw new Error(`${what}: it did not load in its isolate: ${(error as Error).message}`, { cause: error });
    }
    this.registry.push(loaded);
    if (this.closed) void loaded.close?.();
    return loaded;
  }
}

/**
 * Each registry entry's module file, for `isolate: 'all'`; throws at once, naming an entry that
 * has none. An event or a job is found by its factory (what createBcmsEvent and createBcmsJob
 * return, and a file exports), as a function module is.
 */
export function registryModuleSources(
  plugins: readonly BcmsPlugin[],
  functions: readonly BcmsFunctionModule[],
  events: readonly BcmsEventModule[] = [],
  jobs: readonly BcmsJobModule[] = [],
): RegistrySources {
  return {
    plugins: plugins.map((plugin, index) => ({ name: plugin.name, source: moduleSourceOf(plugin, `registry.plugins[${index}] ("${plugin.name}")`) })),
    functions: functions.map((module, index) => moduleSourceOf(module, `registry.functions[${index}]`)),
    events: events.map((factory, index) => moduleSourceOf(factory, `registry.events[${index}]`, 'event and job (its createBcmsEvent or createBcmsJob)')),
    jobs: jobs.map((factory, index) => moduleSourceOf(factory, `registry.jobs[${index}]`, 'event and job (its createBcmsEvent or createBcmsJob)')),
  };
}

/**
 * The CommonJS module file that exports `value` (as `module.exports`, or one of its exports),
 * which its isolates load again.
 */
function moduleSourceOf(value: unknown, what: string, noun = 'plugin and function module'): ExtensionSource {
  const cache = (Module as unknown as { _cache: Record<string, { exports?: unknown } | undefined> })._cache;
  for (const [file, loaded] of Object.entries(cache)) {
    const exports = loaded?.exports;
    if (exports === value) return { type: 'module', file, key: '' };
    if (exports === null || typeof exports !== 'object') continue;
    for (const key of Object.keys(exports)) {
      try {
        if ((exports as Record<string, unknown>)[key] === value) return { type: 'module', file, key };
      } catch {
        // An export whose getter throws (a lazy export of some module): not ours.
      }
    }
  }
  throw new TypeError(
    `${what}: with isolate: 'all' each ${noun} is loaded again in isolates from the CommonJS file that exports it, and none of the loaded modules exports this one: export it from a file of its own and require() it`,
  );
}

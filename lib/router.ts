import { Module } from 'node:module';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Knex } from 'knex';
import { bcmsContentRepoOf, bindBcmsRepo } from './db/bcms-repo';
import { openDatabase, type DatabaseOption } from './db/connection';
import { createRepository } from './db/repository';
import { ContentStore } from './db/store';
import { activeDeployments, DeployedExtensions, LOAD_TIMEOUT_MS, withTimeout, type RunningExtension } from './deploy/deployed';
import { listenForDeployments } from './deploy/listen';
import { LiveExtensions } from './deploy/live';
import { loadExtension, type DeploymentKind } from './deploy/load';
import { createDeployRoutes, DEPLOYMENTS_PATH } from './deploy/routes';
import { recordLoadError } from './deploy/store';
import { createSdkController } from './extensions/content';
import { createKeysController } from './extensions/keys';
import { createAccessListServer } from './function/access-list';
import { checkFunctionModules, loadFunctions } from './function/load';
import { createFunctionServer, readFunctionBody, writeFunctionResult } from './function/serve';
import type { BcmsFunction, BcmsFunctionModule } from './function/types';
import { createDispatch } from './http/dispatch';
import { errorHandler } from './http/errors';
import { createExchange } from './http/exchange';
import { DatabaseBridge } from './isolate/database-bridge';
import { startIsolated } from './isolate/extension';
import type { IsolateServices } from './isolate/host';
import type { ExtensionSource } from './isolate/protocol';
import { type BcmsExtensionsOptions, resolveOptions } from './options';
import { createBcmsPlugin } from './plugin/create';
import { setUpControllers } from './plugin/mount';
import { PluginRouteTable } from './plugin/routes';
import { createPluginServer, writePluginAnswer } from './plugin/serve';
import type { BcmsPlugin } from './plugin/types';
import { createClientSignatureVerifier } from './security/bcms-client';
import { createCallerCheck, createPluginKeyCheck } from './security/caller';
import { createAccessTokenVerifier } from './security/jwt';
import { SignatureMemory } from './security/replay';
import { createSignatureVerifier } from './security/signature';
import { checkPluginUis, UiRoutes } from './ui/assets';
import { bindLogger, toBcmsLogger } from './use-logger';

export interface BcmsRegistry {
  plugins?: BcmsPlugin[];
  functions?: BcmsFunctionModule[];
}

/** What `bcmsExtensions` returns: an Express router, plus its life cycle. */
export interface BcmsExtensionsRouter extends Router {
  /**
   * Resolves once every function factory has run and the database is migrated (or found
   * unreachable: requests then retry); rejects with a registry that cannot work.
   */
  readonly ready: Promise<void>;
  /** The Knex instance the router uses (migrated once `ready` resolved). */
  readonly db: Knex;
  /** Closes what the router opened: its pool, or its embedded database. */
  close(): Promise<void>;
}

/**
 * Mounts the extension interface: plugin endpoints under `/api/plugin/`, functions under
 * `/api/function/`. Paths it does not own fall through to the host's routes.
 *
 * This is the composition root: it builds each part from the options and the registry and wires
 * them. A request's way through them: `http/dispatch` (whose path is it?) → `http/exchange` (id,
 * CORS, log line, errors) → `plugin/serve`, `function/serve` (with `security/caller`),
 * `ui/assets` or `deploy/routes`.
 *
 * @example
 * const router = bcmsExtensions({ plugins: [helloPlugin], functions: [helloFunction] }, { jwt: { secret } });
 * app.use(router);
 * await router.ready;
 */
export function bcmsExtensions(registry: BcmsRegistry = {}, options?: BcmsExtensionsOptions): BcmsExtensionsRouter {
  if (registry === null || typeof registry !== 'object') throw new TypeError('argument registry must be an object { plugins?, functions? }');
  const settings = resolveOptions(options);
  const { logger, bodyLimit } = settings;

  // The registry, checked now where a mistake can be seen at once.
  const registryPlugins = registry.plugins ?? [];
  if (!Array.isArray(registryPlugins)) throw new TypeError('registry.plugins must be an array of plugins (createBcmsPlugin)');
  const isolateAll = settings.isolate === 'all';
  const live = new LiveExtensions(registryPlugins, { isolated: isolateAll });
  const ui = new UiRoutes(checkPluginUis(registryPlugins), settings.admin);
  const modules = registry.functions ?? [];
  checkFunctionModules(modules);
  // isolate: 'all': each plugin and function module of the registry is loaded in isolates from its module file.
  const registrySources = isolateAll
    ? {
        plugins: registryPlugins.map((plugin, index) => registryModuleSource(plugin, `registry.plugins[${index}] ("${plugin.name}")`)),
        functions: modules.map((module, index) => registryModuleSource(module, `registry.functions[${index}]`)),
      }
    : undefined;
  const verifyAccessToken = createAccessTokenVerifier(settings.jwt);

  // Content, once nothing above refused the options: a refused router leaves no database open.
  const store = new ContentStore(openDatabase(settings.database as DatabaseOption | undefined, process.env, logger), logger);
  const repo = createRepository(store);
  // One memory of keys and accepted signatures for both schemes: a signature is accepted once, whichever way it comes.
  const signatures = { memory: new SignatureMemory(store, logger), clockSkewSeconds: settings.signature.clockSkewSeconds };
  const verifySignedRequest = createSignatureVerifier(signatures);
  const verifyClientSignedRequest = createClientSignatureVerifier(signatures);

  // Nothing below throws: BCMSRepo and useLogger now serve this router (function factories and
  // controller setups, which run next, included).
  bindBcmsRepo(store);
  bindLogger(logger);
  const bcmsLogger = toBcmsLogger(logger);
  for (const plugin of registryPlugins) {
    if (Array.isArray(plugin.middleware) && plugin.middleware.length > 0) {
      logger.warn({ plugin: plugin.name }, 'bcms-extensions: plugin middleware is not mounted (mount middleware on the host app): this plugin declares some');
    }
  }

  const verifyPluginKey = createPluginKeyCheck({ verifySignedRequest, verifyClientSignedRequest, bodyLimit, logger });

  // Isolates: what deployed code (and, with `isolate: 'all'`, the registry's) runs in.
  const isolateServices: IsolateServices = {
    logger,
    bridge: new DatabaseBridge(store),
    verifyAccessToken,
    verifyPluginKey,
    memoryMb: settings.extensionMemoryMb,
    env: settings.extensionEnv,
    loadTimeoutMs: LOAD_TIMEOUT_MS,
  };
  const callSettings = { pluginTimeoutMs: settings.pluginTimeoutMs, functionTimeoutMs: settings.functionTimeoutMs, bodyLimit };
  const filenameOf = (kind: DeploymentKind, name: string, version: string): string => `bcms-deployment:${kind}/${name}@${version}.js`;
  const inIsolates = (deployment: { kind: DeploymentKind; name: string; version: string; code: string }): Promise<RunningExtension> => {
    const { kind, name, version, code } = deployment;
    return startIsolated(kind, name, `${kind} ${name}@${version}`, { type: 'bundle', code, filename: filenameOf(kind, name, version) }, isolateServices, callSettings);
  };

  // Deployments go live by swapping the live tables.
  const deployed = new DeployedExtensions({
    read: () => store.run(() => activeDeployments(store.database.knex)),
    start:
      settings.isolate === 'none'
        ? (deployment) => withTimeout(loadExtension(deployment.kind, deployment.name, deployment.code, filenameOf(deployment.kind, deployment.name, deployment.version)), LOAD_TIMEOUT_MS)
        : inIsolates,
    recordFailure: (id, message) => store.run(() => recordLoadError(store.database.knex, id, message)),
    logger,
    swap: (set) => {
      live.apply(set);
      ui.setDeployed(set.uis);
    },
    enabled: settings.deployments === 'on',
  });
  let stopListening: (() => Promise<void>) | undefined;
  let closed = false;
  // Settles only once both are done, so that a refused registry leaves no migration running behind it.
  const started = store.start();
  const isolatedRegistry: RunningExtension[] = [];
  const inRegistryIsolates = async (kind: DeploymentKind, name: string, source: ExtensionSource): Promise<RunningExtension> => {
    let loaded: RunningExtension;
    try {
      loaded = await startIsolated(kind, name, `${kind} ${name || (source as { file: string }).file}`, source, isolateServices, callSettings);
    } catch (error) {
      throw new Error(`registry ${kind} ${name || (source as { file: string }).file}: it did not load in its isolate: ${(error as Error).message}`, { cause: error });
    }
    isolatedRegistry.push(loaded);
    if (closed) void loaded.close?.();
    return loaded;
  };
  const ready = Promise.allSettled(
    registrySources === undefined
      ? [
          loadFunctions(modules).then((loaded) => live.setRegistryFunctions(loaded)),
          // After the database: a setup may build a repository and read it.
          started.then(() => setUpControllers(registryPlugins)).then(() => live.setUpDone()),
        ]
      : [
          Promise.all(registrySources.functions.map((source) => inRegistryIsolates('function', '', source))).then((loaded) => {
            const byName = new Map<string, BcmsFunction>();
            for (const extension of loaded) {
              if (extension.kind !== 'function') continue;
              if (byName.has(extension.name)) throw new Error(`duplicate function name "${extension.name}" in registry.functions`);
              byName.set(extension.name, extension.definition);
            }
            live.setRegistryFunctions(byName);
          }),
          started
            .then(() => Promise.all(registrySources.plugins.map((source, index) => inRegistryIsolates('plugin', (registryPlugins[index] as BcmsPlugin).name, source))))
            .then((loaded) => live.setIsolatedRegistry(loaded.flatMap((extension) => (extension.kind === 'plugin' ? [extension.plugin] : [])))),
        ],
  )
    .then((outcomes) => {
      for (const outcome of outcomes) if (outcome.status === 'rejected') throw outcome.reason;
    })
    .then(() => {
      live.open();
      if (settings.deployments === 'off') {
        logger.warn({}, 'bcms-extensions: deployments are off (deployments: "off" or BCMS_DEPLOYMENTS=off): no deployed plugin or function runs on this instance');
        return;
      }
      // A restarted instance serves what is deployed, without waiting on it: each deployment goes
      // live once loaded, and a request for one still loading waits for it. Then it hears of every change.
      const reload = (): void => void deployed.reload().catch((error: unknown) => logger.error({ err: error }, 'bcms-extensions: could not load the deployments (tried again on the next change)'));
      reload();
      if (!closed) stopListening = listenForDeployments(store.database.knex, logger, reload);
    });
  // The refusal is logged even when the host never awaits `ready`, and is not an unhandled rejection.
  ready.catch((error: unknown) => logger.error({ err: error }, 'bcms-extensions: the router could not start (a registry that cannot work, or a database it cannot migrate)'));

  // The request path.
  const exchange = createExchange({ logger, pending: () => (live.functions === undefined ? ready : undefined) });
  const servePlugin = createPluginServer({ bodyLimit, timeoutMs: settings.pluginTimeoutMs, logger: bcmsLogger, errorHandler, repo, verifyAccessToken, verifyPluginKey });
  const readBody = (req: Request): Promise<Buffer> => readFunctionBody(req, bodyLimit);
  const identifyCaller = createCallerCheck({ verifyAccessToken, verifySignedRequest, verifyClientSignedRequest, readBody, logger });
  const serveFunction = createFunctionServer({
    functions: () => live.functions ?? new Map(),
    pending: (name) => deployed.pending('function', name),
    identifyCaller,
    bodyLimit,
    timeoutMs: settings.functionTimeoutMs,
    logger: bcmsLogger,
    errorHandler,
    repo,
  });
  const sdkController = createSdkController({ plugins: () => live.allPlugins, hasUi: (name) => ui.hasUi(name), functions: () => live.functions ?? new Map(), content: bcmsContentRepoOf(store) });
  const ownRoutes = new PluginRouteTable([createBcmsPlugin({ name: 'extensions', controllers: [createKeysController(store), sdkController] })], '/api');

  const serveDeployments = createDeployRoutes({
    verify: verifySignedRequest,
    store,
    deployed,
    // Always in an isolate, within the load limit; with `isolate: 'none'` the service then loads it itself.
    check: async (deployment) => {
      const loaded = await inIsolates(deployment);
      if (settings.isolate !== 'none') return loaded;
      await loaded.close?.();
      return undefined;
    },
    taken: (kind, name) => live.isRegistryName(kind, name),
    logger,
  });
  const dispatch = createDispatch({
    exchange,
    ui,
    deploymentsPath: DEPLOYMENTS_PATH,
    serveDeployments,
    serveFunction,
    serveAccessList: createAccessListServer({ functions: () => live.functions ?? new Map(), verify: verifyClientSignedRequest, readBody }),
    plugins: () => live.plugins,
    ownRoutes,
    servePlugin,
    writePluginAnswer,
    writeFunctionResult,
  });

  const router = express.Router() as BcmsExtensionsRouter;
  // The router answers its own paths before Express's routing loop runs a second time; any route a
  // host adds to this router with router.use/get still works, through the original handle.
  const routing = router as unknown as { handle(req: Request, res: Response, next: NextFunction): void };
  const routeStack = routing.handle;
  routing.handle = function handle(req, res, next) {
    if (dispatch(req, res)) return;
    // A path of an app plugin whose controllers are being set up: routed again once they are.
    if (live.awaitsSetup(req.url)) return void ready.then(settled, settled);
    // A path of a deployed plugin still loading: routed again once it is.
    const loading = deployedPluginLoading(req.url);
    if (loading !== undefined) return void loading.then(settled, settled);
    routeStack.call(router, req, res, next);
    function settled(): void {
      if (!dispatch(req, res)) routeStack.call(router, req, res, next);
    }
  };
  function deployedPluginLoading(url: string): Promise<void> | undefined {
    if (!url.startsWith('/api/plugin/')) return undefined;
    const name = /^\/api\/plugin\/([^/?]+)/.exec(url)?.[1];
    return name === undefined ? undefined : deployed.pending('plugin', name);
  }

  return Object.assign(router, {
    ready,
    db: store.database.knex,
    close: async () => {
      closed = true;
      await stopListening?.();
      // Loads under way finish, then every isolate is ended, before the database closes under them.
      await deployed.close();
      await ready.catch(() => {});
      await Promise.all(isolatedRegistry.map((extension) => extension.close?.()));
      await store.database.close();
    },
  });
}

/**
 * Where a registry entry's code comes from, for `isolate: 'all'`: the CommonJS module file that
 * exports it (as `module.exports`, or one of its exports), which its isolates load again.
 */
function registryModuleSource(value: unknown, what: string): ExtensionSource {
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
    `${what}: with isolate: 'all' each plugin and function module is loaded again in isolates from the CommonJS file that exports it, and none of the loaded modules exports this one: export it from a file of its own and require() it`,
  );
}

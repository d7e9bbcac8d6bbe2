import { EventEmitter } from 'node:events';
import express, { type NextFunction, type Request, type Response } from 'express';
import { openDatabase, type DatabaseOption } from './db/connection';
import { createRepository } from './db/repository';
import { ContentStore } from './db/store';
import { loadInProcess } from './deploy/deployed';
import { Deployments, type StartDeployment } from './deploy/deployments';
import { LiveExtensions } from './deploy/live';
import { createDeployRoutes, DEPLOYMENTS_PATH } from './deploy/routes';
import { IdempotencyLedger } from './function/idempotency';
import { checkFunctionModules } from './function/load';
import { createFunctionServer, readFunctionBody, writeFunctionResult } from './function/serve';
import { createDispatch } from './http/dispatch';
import { errorHandler, isClosing } from './http/errors';
import { Admission } from './http/closing';
import { createExchange } from './http/exchange';
import { toBcmsLogger } from './handler-logger';
import { drainDefaultLogger } from './logger';
import { Isolation, registryModuleSources } from './isolate/runtime';
import { sandboxFor } from './isolate/sandbox';
import { bindLayers } from './layer';
import { metricsFor } from './metrics';
import { createOwnRoutes, OPENAPI_PATH } from './openapi/route';
import { createHealthController, HEALTH_PATH } from './extensions/health';
import { type BcmsExtensionsOptions, resolveOptions } from './options';
import { warnAboutMiddleware, warnWithoutSecret } from './plugin/routes';
import { createPluginServer, writePluginAnswer } from './plugin/serve';
import { createCallerCheck, createPluginKeyCheck, signedBodyOf } from './security/caller';
import { createAccessTokenVerifier } from './security/jwt';
import { createUserIdentifier } from './security/auth';
import { SignatureMemory } from './security/replay';
import { createRateLimits } from './security/rate-limit';
import { createSignatureVerifier } from './security/signature';
import { checkPluginUis, UiRoutes } from './ui/assets';
import type { BcmsExtensionsRouter, BcmsRegistry } from './router-types';
import { eventManagerOf } from './events/emit';
import { EventsAndJobs } from './events/engine';

export type { BcmsExtensionsRouter, BcmsRegistry } from './router-types';

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
  if (registry === null || typeof registry !== 'object') throw new TypeError('argument registry must be an object { plugins?, functions?, events?, jobs? }');
  const settings = resolveOptions(options);
  const { logger, bodyLimit, bodyTimeoutMs } = settings;

  // The registry, checked now where a mistake can be seen at once.
  const registryPlugins = registry.plugins ?? [];
  const isolateAll = settings.isolate === 'all';
  const live = new LiveExtensions(registryPlugins, { isolated: isolateAll });
  const { metrics, registry: metricsRegistry } = metricsFor(settings.metrics, live); // NO_METRICS unless the option is on
  const ui = new UiRoutes(checkPluginUis(registryPlugins), settings.admin);
  const modules = registry.functions ?? [];
  checkFunctionModules(modules);
  // isolate: 'all': each plugin and function module of the registry is loaded in isolates from its module file.
  const registrySources = isolateAll ? registryModuleSources(registryPlugins, modules, registry.events, registry.jobs) : undefined;
  // "Who is this request's user", for every guard and caller check: the app's user (auth.fromRequest) first, then a BCMS JWT.
  const verifyAccessToken = createUserIdentifier(createAccessTokenVerifier(settings.jwt), settings.auth.fromRequest);
  const sandbox = sandboxFor(settings); // the isolates': throws where 'bubblewrap' is required and cannot run

  // Content, once nothing above refused the options: a refused router leaves no database open.
  const store = new ContentStore(openDatabase(settings.database as DatabaseOption | undefined, process.env, logger), logger, { secrets: settings.secrets, metrics });
  const repo = createRepository(store);
  const eventsAndJobs = new EventsAndJobs(store, logger, settings, registry, metrics); // throws on a registry of events or jobs that are not factories
  const { limitKey, limitIp, ...limits } = createRateLimits(store, logger, settings.rateLimit); // counted in the database, for every instance
  // One memory of keys and accepted signatures for both schemes: a signature is accepted once, whichever way it comes.
  const signatures = { memory: new SignatureMemory(store, logger, settings.secrets), clockSkewSeconds: settings.signature.clockSkewSeconds, limitKey };
  const verifySignedRequest = createSignatureVerifier(signatures);
  // A signed body (a function's, the BCMS client's): the bytes a host parser kept, else read here.
  const readBody = (req: Request): Promise<Buffer> => signedBodyOf(req, () => readFunctionBody(req, bodyLimit, bodyTimeoutMs), logger);

  // Nothing below throws. The layers (lib/layer.ts) now serve this router: the BCMS layer's
  // BCMSRepo and useLogger included, for the function factories and controller setups run next.
  const events = new EventEmitter();
  const layers = bindLayers({ settings, store, logger, verifyAccessToken, signatures, events, functions: () => live.functions ?? new Map(), readBody });
  const keyVerifiers = { verifySignedRequest, keySchemes: layers.keySchemes };
  const bcmsLogger = toBcmsLogger(logger);
  warnAboutMiddleware(registryPlugins, logger);
  const verifyPluginKey = createPluginKeyCheck({ ...keyVerifiers, bodyLimit, bodyTimeoutMs, logger });

  // Isolates: what deployed code (and, with `isolate: 'all'`, the registry's) runs in. Deployments go live by swapping the live tables.
  const isolation = new Isolation(settings, { store, verifyAccessToken, verifyPluginKey, events, sandbox: sandbox.choice, metrics });
  const start: StartDeployment = settings.isolate === 'none' ? (deployment) => loadInProcess(deployment, settings.loadTimeoutMs) : (deployment) => isolation.deployment(deployment);
  const deployments = new Deployments({ store, live, ui, logger, start, enabled: settings.deployments === 'on', trusted: settings.trustedKeys, refused: sandbox.refused });
  // Settles only once both are done, so that a refused registry leaves no migration running behind it.
  const started = store.start();
  const ready = Promise.allSettled([
    ...(registrySources === undefined ? live.loadRegistry(modules, started) : isolation.loadRegistry(registrySources, live, started)),
    eventsAndJobs.loadRegistry(registrySources && isolation.registryEventsAndJobs(registrySources)),
  ])
    .then((outcomes) =>
      outcomes.forEach((outcome) => {
        if (outcome.status === 'rejected') throw outcome.reason;
      }),
    )
    .then(() => {
      live.open();
      if (settings.auth.fromRequest === undefined) warnWithoutSecret(live.plugins.jwtGuarded(), settings.jwt.secret, logger);
      deployments.start();
      return eventsAndJobs.start(live); // once its handlers are recorded: a write from then on reaches them
    });
  // The refusal is logged even when the host never awaits `ready`, and is not an unhandled rejection.
  ready.catch((error: unknown) => isClosing(error) || logger.error({ err: error }, 'bcms-extensions: the router could not start (a registry that cannot work, or a database it cannot migrate)'));

  // The request path. Requests under way when close() begins are answered; later ones get 503 SERVICE_CLOSING.
  const admission = new Admission(logger, bodyTimeoutMs + Math.max(settings.functionTimeoutMs, settings.pluginTimeoutMs));
  // The health route answers while the start is under way (it says so); every other request waits for it.
  const pending = (path: string) => (live.functions === undefined && path !== HEALTH_PATH ? ready : undefined);
  const exchange = createExchange({ logger, bodyTimeoutMs, admission, metrics, pending, cors: settings.cors, onError: settings.onError });
  const servePlugin = createPluginServer({ bodyLimit, bodyTimeoutMs, timeoutMs: settings.pluginTimeoutMs, logger: bcmsLogger, errorHandler, repo, verifyAccessToken, verifyPluginKey });
  const identifyCaller = createCallerCheck({ ...keyVerifiers, verifyAccessToken, readBody, logger, limitKey });
  const idempotency = new IdempotencyLedger(store, logger, settings.functionTimeoutMs, verifyAccessToken);
  const serveFunction = createFunctionServer({
    functions: () => live.functions ?? new Map(),
    pending: (name) => deployments.deployed.pending('function', name),
    identifyCaller,
    bodyLimit,
    bodyTimeoutMs,
    idempotency,
    limitIp,
    timeoutMs: settings.functionTimeoutMs,
    logger: bcmsLogger,
    errorHandler,
    repo,
  });
  const own = createOwnRoutes({
    store,
    keys: settings.keys,
    live,
    hasUi: (name) => ui.hasUi(name),
    events,
    title: settings.admin?.title ?? 'BCMS',
    openapi: settings.openapi,
    info: settings.openapiInfo,
    controllers: [createHealthController({ store, ready, extensions: () => [...deployments.deployed.health().values(), ...isolation.health()] })],
    rateLimited: limits.on,
    metrics: metricsRegistry && { registry: metricsRegistry, token: settings.metrics?.token },
  });

  const serveDeployments = createDeployRoutes({
    verify: verifySignedRequest,
    store,
    deployed: deployments.deployed,
    // Always in an isolate, within the load limit; with `isolate: 'none'` the service then loads it itself.
    check: (deployment) => isolation.check(deployment, settings.isolate !== 'none'),
    taken: (kind, name) => live.isRegistryName(kind, name),
    logger,
    bodyTimeoutMs,
    verifyAccessToken,
    trusted: settings.trustedKeys,
    sandbox,
    metrics,
  });
  const dispatch = createDispatch({
    exchange,
    ui,
    deploymentsPath: DEPLOYMENTS_PATH,
    serveDeployments,
    serveFunction,
    layerRoutes: layers.routes,
    plugins: () => live.plugins,
    ownRoutes: own.table,
    servePlugin,
    writePluginAnswer,
    writeFunctionResult,
    preflights: settings.cors !== undefined, // cors: false leaves them to the app
    enveloped: new Set([OPENAPI_PATH]),
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
    const loading = deployments.pluginLoading(req.url);
    if (loading !== undefined) return void loading.then(settled, settled);
    routeStack.call(router, req, res, next);
    function settled(): void {
      if (!dispatch(req, res)) routeStack.call(router, req, res, next);
    }
  };

  return Object.assign(router, {
    ready,
    db: store.database.knex,
    repo,
    events,
    emit: eventManagerOf(() => store).emit,
    openapi: own.document,
    metrics: metricsRegistry,
    close: async () => {
      await admission.close(); // new requests refused (503), those under way answered
      await eventsAndJobs.close(); // no more deliveries or ticks claimed here
      // Loads under way are ended (deployments first told it is closing, so as not to record them failed), then every isolate, before the database closes under them.
      const deployed = deployments.close();
      isolation.stopLoading();
      await deployed;
      await ready.catch(() => {});
      await isolation.close();
      await Promise.all([layers.close(), idempotency.close(), limits.close()]);
      await store.database.close();
      await drainDefaultLogger(); // its last lines out before the app ends the process
    },
  });
}

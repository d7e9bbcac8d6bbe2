import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Knex } from 'knex';
import { bindBcmsRepo } from './db/bcms-repo';
import { createSdkController } from './extensions/content';
import { createKeysController } from './extensions/keys';
import { activeDeployments, DeployedExtensions } from './deploy/deployed';
import { listenForDeployments } from './deploy/listen';
import { createDeployRoutes, DEPLOYMENTS_PATH } from './deploy/routes';
import { openDatabase, type DatabaseOption } from './db/connection';
import { createRepository } from './db/repository';
import { ContentStore } from './db/store';
import { checkFunctionModules, loadFunctions } from './function/load';
import type { BcmsFunction, BcmsFunctionAuth, BcmsFunctionContext, BcmsFunctionModule } from './function/types';
import { hasBody, isJsonType, parseJsonBody, readRawBody } from './http/body';
import { BcmsHttpError, errorHandler } from './http/errors';
import { type Family, writeError, writeJson, writePreflight } from './http/respond';
import { type BcmsExtensionsOptions, resolveOptions } from './options';
import { createBcmsPlugin } from './plugin/create';
import { PluginRouteTable, type PluginMatch, type PluginRoute } from './plugin/routes';
import type { BcmsPlugin, BcmsPluginContext, PreRequestContext } from './plugin/types';
import { createAccessTokenVerifier, hasBearerToken, JWTPermissionName, tokenAllows } from './security/jwt';
import { createSignatureVerifier, isSignedRequest, SIGNATURE_CHALLENGE } from './security/signature';
import { checkPluginUis, UiRoutes } from './ui/assets';

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

const FUNCTION_PREFIX = '/api/function/';
const PLUGIN_PREFIX = '/api/plugin/';
/** The package's own routes (keys, the SDK's data, its scripts): never a plugin's or a function's path. */
const EXTENSIONS_PREFIX = '/api/extensions/';
const FUNCTION_ALLOW = 'POST, OPTIONS';

/** The verbs of every matching path, for `Allow`. */
function allowOf(matches: readonly PluginMatch[]): string {
  if (matches.length === 1) return (matches[0] as PluginMatch).path.allow;
  const verbs = new Set(matches.flatMap((match) => [...match.path.verbs.keys()]));
  return [...verbs, 'OPTIONS'].join(', ');
}

/**
 * Mounts the extension interface: plugin endpoints under `/api/plugin/`, functions under
 * `/api/function/`. Paths it does not own fall through to the host's routes.
 *
 * @example
 * const router = bcmsExtensions({ plugins: [helloPlugin], functions: [helloFunction] }, { jwt: { secret } });
 * app.use(router);
 * await router.ready;
 */
export function bcmsExtensions(registry: BcmsRegistry = {}, options?: BcmsExtensionsOptions): BcmsExtensionsRouter {
  if (registry === null || typeof registry !== 'object') throw new TypeError('argument registry must be an object { plugins?, functions? }');
  const settings = resolveOptions(options);
  const { logger, bodyLimit, functionTimeoutMs } = settings;
  const registryPlugins = registry.plugins ?? [];
  // Replaced whole when a deployment changes: a request in flight keeps the table it matched.
  let plugins = new PluginRouteTable(registryPlugins);
  let allPlugins: readonly BcmsPlugin[] = registryPlugins;
  const uiDirs = checkPluginUis(registryPlugins);
  const ui = new UiRoutes(uiDirs, settings.admin);
  const modules = registry.functions ?? [];
  checkFunctionModules(modules);
  const verifyAccessToken = createAccessTokenVerifier(settings.jwt);
  const store = new ContentStore(openDatabase(settings.database as DatabaseOption | undefined, process.env, logger), logger);
  const repo = createRepository(store);
  const sdkController = createSdkController({ plugins: () => allPlugins, hasUi: (name) => ui.hasUi(name), functions: () => functions ?? new Map(), repo });
  const ownRoutes = new PluginRouteTable([createBcmsPlugin({ name: 'extensions', controllers: [createKeysController(store), sdkController] })], '/api');
  const verifySignedRequest = createSignatureVerifier({ store, clockSkewSeconds: settings.signature.clockSkewSeconds, logger });
  bindBcmsRepo(repo);

  const nextRequestId = createRequestIds();
  let registryFunctions = new Map<string, BcmsFunction>();
  let functions: Map<string, BcmsFunction> | undefined;
  const registryPluginNames = new Set(registryPlugins.map((plugin) => plugin.name));
  /** Deployed extensions go live here; the app's own (registry) names always win. */
  const deployed = new DeployedExtensions(
    () => store.run(() => activeDeployments(store.database.knex)),
    logger,
    (set) => {
      const added = set.plugins.filter((plugin) => !registryPluginNames.has(plugin.name));
      plugins = new PluginRouteTable([...registryPlugins, ...added]);
      allPlugins = [...registryPlugins, ...added];
      ui.setDeployed(set.uis);
      functions = new Map([...[...set.functions].filter(([name]) => !registryFunctions.has(name)), ...registryFunctions]);
    },
  );
  const serveDeployments = createDeployRoutes({
    verify: verifySignedRequest,
    store,
    deployed,
    taken: (kind, name) => (kind === 'plugin' ? registryPluginNames.has(name) : registryFunctions.has(name)),
    logger,
  });
  let stopListening: (() => Promise<void>) | undefined;
  let closed = false;
  // Settles only once both are done, so that a refused registry leaves no migration running behind it.
  const ready = Promise.allSettled([
    loadFunctions(modules).then((loaded) => {
      registryFunctions = loaded;
    }),
    store.start(),
  ])
    .then((outcomes) => {
      for (const outcome of outcomes) if (outcome.status === 'rejected') throw outcome.reason;
    })
    .then(async () => {
      // A restarted instance serves what is deployed; then it hears of every later change.
      await deployed.reload().catch((error: unknown) => logger.error({ err: error }, 'bcms-extensions: could not load the deployments (tried again on the next change)'));
      functions ??= new Map(registryFunctions);
      const reload = (): void => void deployed.reload().catch((error: unknown) => logger.error({ err: error }, 'bcms-extensions: could not load the deployments'));
      if (!closed) stopListening = listenForDeployments(store.database.knex, logger, reload);
    });
  // The refusal is logged even when the host never awaits `ready`, and is not an unhandled rejection.
  ready.catch((error: unknown) => logger.error({ err: error }, 'bcms-extensions: the router could not start (a registry that cannot work, or a database it cannot migrate)'));

  /** The request's log line. `path` is the router-relative path: no query string, never a token. */
  function finish(req: Request, res: ServerResponse, path: string, requestId: string, started: number): void {
    logger.info(
      {
        requestId,
        method: req.method,
        path: req.baseUrl ? req.baseUrl + path : path,
        status: res.statusCode,
        ms: Math.round((performance.now() - started) * 1000) / 1000,
      },
      'request',
    );
  }

  /**
   * Renders what a request threw. Headers a handler set (say Cache-Control) do not go out on its
   * error: only those the host set before the router, and the router's own, stay.
   */
  function fail(req: Request, res: ServerResponse, error: unknown, family: Family, requestId: string, hostHeaders: readonly string[]): void {
    // The connection, not the request stream: a body read to its end destroys the stream too.
    if (req.socket?.destroyed === true && !res.headersSent) {
      // The client went away (mid-body, say): there is no one to answer, and nothing went wrong here.
      logger.debug({ err: error, requestId }, 'bcms-extensions: client closed the request');
      res.statusCode = 499; // for the log line only, as nginx logs it
      return;
    }
    let answer: BcmsHttpError;
    if (error instanceof BcmsHttpError) {
      answer = error;
    } else {
      logger.error({ err: error, requestId }, 'bcms-extensions: unexpected error');
      answer = new BcmsHttpError('INTERNAL_ERROR');
    }
    if (res.headersSent) {
      // The handler started its own answer: nothing valid can follow, so end what is there.
      res.end();
      return;
    }
    for (const name of res.getHeaderNames()) {
      if (!hostHeaders.includes(name) && name !== 'access-control-allow-origin' && name !== 'x-request-id') res.removeHeader(name);
    }
    writeError(res, answer, family, requestId);
  }

  async function servePlugin(req: Request, res: Response, route: PluginRoute): Promise<void> {
    if (req.body === undefined && req.method !== 'GET' && req.method !== 'HEAD' && hasBody(req)) {
      // A JSON (or untyped) body is parsed; any other type is left unread for the handler.
      const type = req.headers['content-type'];
      if (type === undefined || isJsonType(type)) req.body = parseJsonBody(await readRawBody(req, bodyLimit));
    }
    const base: BcmsPluginContext = { request: req, response: res, logger, errorHandler, repo };
    let context: BcmsPluginContext = base;
    const { preRequestHandler, handler } = route.method;
    if (preRequestHandler !== undefined) {
      const guard: PreRequestContext = { ...base, verifyAccessToken: () => verifyAccessToken(req) };
      const yielded: unknown = await preRequestHandler(guard);
      if (yielded !== null && typeof yielded === 'object') context = { ...base, ...yielded };
    }
    const result: unknown = await handler(context);
    if (res.headersSent) return; // the handler answered through `response` itself
    // 200 unless the handler chose another status with response.status(...).
    writeJson(res, res.statusCode, JSON.stringify(result) ?? 'null');
  }

  /** A private function's caller: an HTTP Signature of an API key that lists it, or a JWT whose role holds EXECUTE. */
  async function authenticate(req: Request, name: string): Promise<BcmsFunctionAuth> {
    if (hasBearerToken(req)) {
      let accessToken;
      try {
        accessToken = await verifyAccessToken(req);
      } catch (error) {
        if (!(error instanceof BcmsHttpError)) throw error;
        throw new BcmsHttpError('TOKEN_INVALID', error.code === 'TOKEN_MISSING' ? undefined : error.message, {
          'WWW-Authenticate': 'Bearer error="invalid_token"',
        });
      }
      if (!tokenAllows(accessToken.payload, undefined, JWTPermissionName.EXECUTE)) {
        throw new BcmsHttpError('TOKEN_FORBIDDEN', 'Token has no role with the EXECUTE permission.');
      }
      return { type: 'jwt', accessToken };
    }
    if (isSignedRequest(req)) {
      if (bodyWasRead(req)) {
        logger.error(
          { requestId: req.res?.getHeader('x-request-id'), path: req.originalUrl },
          'bcms-extensions: a body parser ran before the router, so a signed body cannot be checked against its digest. ' +
            'Mount the router before express.json() and other body parsers: app.use(bcmsExtensions(...)) first.',
        );
        throw new BcmsHttpError('BODY_ALREADY_PARSED');
      }
      const { auth, body } = await verifySignedRequest(req, { function: name }, () => readFunctionBody(req));
      req.body = parseJsonBody(body);
      return auth;
    }
    const scheme = req.headers.authorization?.trim().split(/\s/, 1)[0];
    const message = scheme
      ? `This function is private, and the ${scheme} scheme is not accepted: sign the request (Authorization: Signature) or send a bearer token whose role holds EXECUTE.`
      : undefined;
    throw new BcmsHttpError('SIGNATURE_REQUIRED', message, { ...SIGNATURE_CHALLENGE });
  }

  /** A function's raw body: JSON or untyped, at most `bodyLimit` bytes. */
  function readFunctionBody(req: Request): Promise<Buffer> {
    const type = req.headers['content-type'];
    if (type !== undefined && !isJsonType(type)) return Promise.reject(new BcmsHttpError('UNSUPPORTED_MEDIA_TYPE'));
    return readRawBody(req, bodyLimit);
  }

  async function serveFunction(req: Request, res: Response, definition: BcmsFunction): Promise<void> {
    const auth = definition.config.public ? null : await authenticate(req, definition.config.name);
    // A host body parser that ran first already set `req.body`: use it as it is.
    if (req.body === undefined && auth?.type !== 'signature' && hasBody(req)) req.body = parseJsonBody(await readFunctionBody(req));
    const context: BcmsFunctionContext = { request: req, logger, errorHandler, repo, auth };
    const result = await withTimeout(definition, context);
    writeJson(res, 200, `{"success":true,"result":${JSON.stringify(result) ?? 'null'}}`);
  }

  /** The handler's result, or FUNCTION_TIMEOUT once `functionTimeoutMs` passed (the handler runs on). */
  function withTimeout(definition: BcmsFunction, context: BcmsFunctionContext): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const message = `Function "${definition.config.name}" ran past its time-out of ${functionTimeoutMs} ms.`;
        reject(new BcmsHttpError('FUNCTION_TIMEOUT', message));
      }, functionTimeoutMs);
      const settle = (): void => clearTimeout(timer);
      // Called inside the executor, a synchronous throw of the handler rejects this promise too.
      Promise.resolve(definition.handler(context)).then(
        (value) => (settle(), resolve(value)),
        (error: unknown) => (settle(), reject(error)),
      );
    });
  }

  /** The function a path names, or FUNCTION_NOT_FOUND. */
  function functionAt(path: string): BcmsFunction {
    const name = path.length > FUNCTION_PREFIX.length ? path.slice(FUNCTION_PREFIX.length) : '';
    const definition = (functions as Map<string, BcmsFunction>).get(name);
    if (definition === undefined) throw new BcmsHttpError('FUNCTION_NOT_FOUND', `Function "${name}" not found.`);
    return definition;
  }

  /**
   * Answers a request the router owns: synchronously (a preflight), or through the promise it
   * returns. Throws, or rejects, with what went wrong.
   */
  function dispatch(req: Request, res: Response, family: Family, path: string, matches: readonly PluginMatch[] | undefined): Promise<void> | void {
    const preflightHeaders = req.headers['access-control-request-headers'];
    if (family === 'function') {
      const definition = functionAt(path);
      if (req.method === 'OPTIONS') return writePreflight(res, FUNCTION_ALLOW, preflightHeaders);
      if (req.method !== 'POST') throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here; use POST.`, { Allow: FUNCTION_ALLOW });
      return serveFunction(req, res, definition);
    }
    if (matches === undefined) throw new BcmsHttpError('INVALID_URL');
    const method = req.method === 'HEAD' ? 'GET' : (req.method as string);
    if (method === 'OPTIONS') return writePreflight(res, allowOf(matches), preflightHeaders);
    // The first matching path that serves this verb, as Express would pick its route.
    for (const match of matches) {
      const route = match.path.verbs.get(method);
      if (route === undefined) continue;
      if (match.params !== null) req.params = match.params;
      return servePlugin(req, res, route);
    }
    throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here.`, { Allow: allowOf(matches) });
  }

  /**
   * One request the router owns, from its id to its log line. Errors of every kind end here.
   * Plain promise callbacks rather than an async function: one promise less per request.
   */
  function serve(req: Request, res: Response, family: Family, path: string, handle: () => Promise<void> | void): void {
    const requestId = nextRequestId();
    const started = performance.now();
    const hostHeaders = res.getHeaderNames();
    // Every answer carries these, one a handler writes itself included (DESIGN.md "HTTP").
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('X-Request-Id', requestId);
    const done = (): void => finish(req, res, path, requestId, started);
    const failed = (error: unknown): void => {
      fail(req, res, error, family, requestId, hostHeaders);
      done();
    };
    let work: Promise<void> | void;
    try {
      work = functions === undefined ? ready.then(handle) : handle();
    } catch (error) {
      return failed(error);
    }
    if (work === undefined) return done();
    work.then(done, failed);
  }

  /** Decides whether a request is the router's, by its path alone; everything else falls through. */
  function owns(req: Request, res: Response): boolean {
    const url = req.url;
    const query = url.indexOf('?');
    let path = query === -1 ? url : url.slice(0, query);
    // Pages and files: the admin shell, the SDK and shell scripts, plugin UIs.
    const target = ui.match(path);
    if (target !== undefined) {
      serve(req, res, 'plugin', path, () => ui.serve(req, res, target, req.baseUrl));
      return true;
    }
    if (!url.startsWith('/api/')) return false;
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    if (path.startsWith(DEPLOYMENTS_PATH)) {
      serve(req, res, 'plugin', path, () => serveDeployments(req, res, path));
      return true;
    }
    if (path.startsWith(FUNCTION_PREFIX) || path === '/api/function') {
      serve(req, res, 'function', path, () => dispatch(req, res, 'function', path, undefined));
      return true;
    }
    const table = path.startsWith(PLUGIN_PREFIX) ? plugins : path.startsWith(EXTENSIONS_PREFIX) ? ownRoutes : undefined;
    if (table === undefined) return false;
    let matches: readonly PluginMatch[] | undefined;
    try {
      matches = table.match(path);
      if (matches === undefined) return false; // nothing serves it: the host's route or its 404
    } catch {
      // A parameter with a malformed percent-encoding: the path is ours, the URL is not valid.
    }
    serve(req, res, 'plugin', path, () => dispatch(req, res, 'plugin', path, matches));
    return true;
  }

  const router = express.Router() as BcmsExtensionsRouter;
  // The router answers its own paths before Express's routing loop runs a second time; any route a
  // host adds to this router with router.use/get still works, through the original handle.
  const routing = router as unknown as { handle(req: Request, res: Response, next: NextFunction): void };
  const routeStack = routing.handle;
  routing.handle = function handle(req, res, next) {
    if (!owns(req, res)) routeStack.call(router, req, res, next);
  };
  return Object.assign(router, {
    ready,
    db: store.database.knex,
    close: async () => {
      closed = true;
      await stopListening?.();
      await store.database.close();
    },
  });
}

/**
 * Request ids: a random prefix per router and a counter, unique across restarts and instances
 * (48 random bits) and far cheaper per request than a random UUID.
 */
function createRequestIds(): () => string {
  const prefix = randomBytes(6).toString('hex');
  let count = 0;
  return () => `${prefix}-${(++count).toString(36)}`;
}

/** Whether a body parser already consumed the request (body-parser marks it `_body`). */
function bodyWasRead(req: Request): boolean {
  return req.body !== undefined || (req as { _body?: unknown })._body === true || req.readableEnded;
}

/**
 * An extension that runs in isolates, as the router sees it: a plugin whose methods and a function
 * whose handler are stand-ins that send each call to the extension's pool. The router routes,
 * reads bodies and checks the package's own JWT guard itself, as for any plugin; the code of the
 * extension runs only in its isolates.
 */
import type { Request } from 'express';
import type { DeploymentKind, LoadedExtension } from '../deploy/load';
import type { ExtensionHealth } from '../deploy/deployed';
import type { BCMSEvent, BCMSEventHandlerData, BCMSJob } from '../events/types';
import type { BcmsFunction, BcmsFunctionAuth, BcmsFunctionContext } from '../function/types';
import { hasBody, readRawBody } from '../http/body';
import { BcmsHttpError } from '../http/errors';
import { createJwtGuard } from '../plugin/guard';
import { hasBearerToken } from '../security/jwt';
import type { BcmsController, BcmsControllerMethod, BcmsPlugin, BcmsPluginContext, HttpVerb } from '../plugin/types';
import type { JWT, JWTPermissionName, JWTRoleName } from '../security/token';
import { ISOLATED, type IsolateAnswer } from './answer';
import { withoutCredentials } from './answer-headers';
import type { IsolateServices, NewCall } from './host';
import { cronLine } from '../events/check';
import { IsolatePool } from './pool';
import type { ExtensionSource, WireExtension, WireRequest, WireRoute } from './protocol';
import { toWire, unsignedToken } from './wire';
import { DESCRIBED, type OperationSecurity, trustedFunction, trustedOperation } from '../openapi/describe';

export interface IsolatedCallSettings {
  pluginTimeoutMs: number;
  /** A function's call, and an event handler's. */
  functionTimeoutMs: number;
  /** A job's run. */
  jobTimeoutMs: number;
  bodyLimit: number;
  bodyTimeoutMs: number;
}

/** A loaded extension whose code runs in isolates; `close()` ends them once their calls are answered. */
export type IsolatedExtension = LoadedExtension & { close(): Promise<void>; health(): ExtensionHealth };

/**
 * Loads an extension in a first isolate (the check that it works) and returns its stand-in.
 * Rejects with an ExtensionLoadError (422 BUNDLE_LOAD_FAILED / BUNDLE_LOAD_TIMEOUT).
 */
export async function startIsolated(kind: DeploymentKind, name: string, label: string, source: ExtensionSource, services: IsolateServices, settings: IsolatedCallSettings): Promise<IsolatedExtension> {
  const pool = await IsolatePool.start(label, kind, name, source, services);
  const close = (): Promise<void> => pool.close();
  const health = (): ExtensionHealth => pool.health();
  try {
    const extension = pool.extension;
    // The extension's own name: a registry function's is its factory's.
    if (extension.kind === 'function') return { kind: 'function', name: extension.name, definition: functionStandIn(pool, extension, settings), close, health };
    if (extension.kind === 'event') return { kind: 'event', name: extension.name, event: eventStandIn(pool, extension, label, settings), close, health };
    if (extension.kind === 'job') return { kind: 'job', name: extension.name, job: jobStandIn(pool, extension, label, settings), close, health };
    return { kind: 'plugin', name: extension.name, plugin: pluginStandIn(pool, extension, settings), close, health };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * A request as plain data: what an isolate's handler reads of it. Its credentials stay here: an
 * isolate is not trusted with the caller's bearer token, signature, cookies or keys (it could replay
 * them against the service: mint an API key with an admin's token, say; see `withoutCredentials`). What the service's
 * guards decided of them crosses instead (`accessToken`, and a custom guard's asks).
 */
export function toWireRequest(req: Request, raw?: Buffer): WireRequest {
  const url = req.url;
  const query = url.indexOf('?');
  const wire: WireRequest = {
    method: req.method,
    url,
    originalUrl: req.originalUrl,
    baseUrl: req.baseUrl,
    path: query === -1 ? url : url.slice(0, query),
    params: (req.params ?? {}) as Record<string, string>,
    query: query === -1 ? {} : req.query,
    headers: withoutCredentials(req.headers),
    ip: undefined,
    protocol: 'http',
    hostname: undefined,
    secure: false,
  };
  setAddress(wire, req);
  if (hasBearerToken(req)) wire.bearer = true;
  if (req.body !== undefined) wire.body = req.body;
  if (raw !== undefined) wire.raw = raw.toString('base64');
  return wire;
}

/**
 * `ip`, `protocol`, `hostname` and `secure` as Express gives them. From a peer its `trust proxy`
 * setting does not trust (the default: no proxy), they come from the socket and the Host header
 * alone, as Express's getters would find, without their parsing of X-Forwarded-* headers.
 */
function setAddress(wire: WireRequest, req: Request): void {
  const socket = req.socket;
  const trust = req.app?.get('trust proxy fn') as ((address: string | undefined, hop: number) => boolean) | undefined;
  if (typeof trust !== 'function' || trust(socket.remoteAddress, 0)) {
    wire.ip = req.ip;
    wire.protocol = req.protocol;
    wire.hostname = req.hostname;
    wire.secure = req.secure;
    return;
  }
  wire.secure = (socket as { encrypted?: boolean }).encrypted === true;
  wire.ip = socket.remoteAddress;
  wire.protocol = wire.secure ? 'https' : 'http';
  wire.hostname = hostnameOf(req.headers.host);
}

/** Express's `hostname` of a Host header: without its port, an IPv6 literal kept whole. */
function hostnameOf(host: string | undefined): string | undefined {
  if (!host) return undefined;
  const offset = host[0] === '[' ? host.indexOf(']') + 1 : 0;
  const colon = host.indexOf(':', offset);
  return colon === -1 ? host : host.slice(0, colon);
}

/** A function call's caller as it crosses: a token's without its signature (`unsignedToken`), a key's as it is (it holds no secret). */
function unsignedAuth(auth: BcmsFunctionAuth | null): BcmsFunctionAuth | null {
  if (auth === null || auth.type !== 'jwt') return auth;
  const token = unsignedToken(auth.accessToken);
  return { type: 'jwt', accessToken: token, ...token };
}

function functionStandIn(pool: IsolatePool, extension: Extract<WireExtension, { kind: 'function' }>, settings: IsolatedCallSettings): BcmsFunction {
  const { name } = extension;
  const timeout = (): BcmsHttpError => new BcmsHttpError('FUNCTION_TIMEOUT', `Function "${name}" ran past its time-out of ${settings.functionTimeoutMs} ms.`);
  const handler = (context: BcmsFunctionContext): Promise<IsolateAnswer> =>
    pool.call(
      { t: 'function', request: toWireRequest(context.request), auth: unsignedAuth(context.auth), idempotencyKey: context.idempotencyKey },
      context.request,
      settings.functionTimeoutMs,
      timeout,
    );
  const bodyLimit = extension.bodyLimit === undefined ? {} : { bodyLimit: extension.bodyLimit };
  // What the document says of it was made in the isolate, where its schemas are.
  return Object.defineProperty({ config: { name, public: extension.public === true, ...bodyLimit }, handler: Object.defineProperty(handler, ISOLATED, { value: true }) }, DESCRIBED, {
    value: trustedFunction(extension.described, extension.public === true),
  });
}

/**
 * An event handler whose code runs in the isolate: `handler(data)` sends the event there and
 * settles once the isolate's handler has, within functionTimeoutMs (past it the isolate is ended
 * and replaced, as for a function). What the handler threw rejects it as an Error with the
 * handler's message (and the isolate's stack, never the service's).
 */
function eventStandIn(pool: IsolatePool, extension: Extract<WireExtension, { kind: 'event' }>, label: string, settings: IsolatedCallSettings): BCMSEvent {
  const timeout = (): Error => new Error(`The ${label} ran past its time-out of ${settings.functionTimeoutMs} ms (functionTimeoutMs); its isolate was ended and is replaced.`);
  const handler = async (data: BCMSEventHandlerData): Promise<void> => {
    const { scope, method, payload } = data ?? ({} as BCMSEventHandlerData);
    await pool.call({ t: 'handle-event', scope: String(scope), method: String(method), payload: toWire(payload) }, undefined, settings.functionTimeoutMs, timeout);
  };
  const config = { scope: String(extension.config.scope), method: String(extension.config.method) };
  return { ...(extension.name === '' ? {} : { name: extension.name }), config, handler: Object.defineProperty(handler, ISOLATED, { value: true }) };
}

/**
 * A job whose code runs in the isolate: `handler()` runs one tick there, within jobTimeoutMs; past
 * it the isolate is ended (whatever the run was doing stops) and replaced, and the promise rejects
 * saying so. What the handler threw rejects it with the handler's message.
 */
function jobStandIn(pool: IsolatePool, extension: Extract<WireExtension, { kind: 'job' }>, label: string, settings: IsolatedCallSettings): BCMSJob {
  const timeout = (): Error => new Error(`The ${label} ran past its time-out of ${settings.jobTimeoutMs} ms (jobTimeoutMs); its isolate was ended and is replaced.`);
  const handler = async (): Promise<void> => {
    await pool.call({ t: 'run-job' }, undefined, settings.jobTimeoutMs, timeout);
  };
  // What the isolate said of its cron is checked again here, as the service reads it (it is untrusted).
  const { second, minute, hour, dayOfMonth, month, dayOfWeek } = extension.cron;
  const cron = {
    ...(second === undefined ? {} : { second: String(second) }),
    minute: String(minute),
    hour: String(hour),
    dayOfMonth: String(dayOfMonth),
    month: String(month),
    dayOfWeek: String(dayOfWeek),
  };
  cronLine(cron, `the job ${JSON.stringify(extension.name)}`);
  return { ...(extension.name === '' ? {} : { name: extension.name }), cron, handler: Object.defineProperty(handler, ISOLATED, { value: true }) };
}

/** A pre-request handler that runs in the isolate: here it only keeps the body's bytes for a signature check. */
const inIsolate = Object.defineProperty(() => undefined, ISOLATED, { value: true });

function pluginStandIn(pool: IsolatePool, extension: Extract<WireExtension, { kind: 'plugin' }>, settings: IsolatedCallSettings): BcmsPlugin {
  const controllers: BcmsController[] = [];
  const byController = new Map<string, { controller: WireRoute['controller']; methods: [string, BcmsControllerMethod<unknown, unknown>][] }>();
  extension.routes.forEach((route, index) => {
    const id = `${route.controller.name}\u0000${route.controller.path}`;
    let group = byController.get(id);
    if (group === undefined) {
      group = { controller: route.controller, methods: [] };
      byController.set(id, group);
    }
    group.methods.push([String(route.key), methodStandIn(pool, route, index, settings)]);
  });
  for (const { controller, methods } of byController.values()) {
    const made = Object.fromEntries(methods);
    controllers.push({ name: String(controller.name), path: String(controller.path), methods: () => made });
  }
  const policies = extension.policies;
  return { name: extension.name, controllers, ...(Array.isArray(policies) ? { policy: () => policies as never } : {}) };
}

function methodStandIn(pool: IsolatePool, route: WireRoute, index: number, settings: IsolatedCallSettings): BcmsControllerMethod<unknown, unknown> {
  const timeout = (): BcmsHttpError => new BcmsHttpError('PLUGIN_TIMEOUT');
  const runGuard = route.guard.type === 'custom';
  const call = (req: Request, accessToken: JWT | undefined, raw?: Buffer): Promise<IsolateAnswer> => {
    const message: NewCall = { t: 'plugin', route: index, request: toWireRequest(req, raw), runGuard };
    if (accessToken !== undefined) message.accessToken = unsignedToken(accessToken);
    return pool.call(message, req, settings.pluginTimeoutMs, timeout);
  };
  const handler = (context: BcmsPluginContext & { accessToken?: JWT }): Promise<IsolateAnswer> => {
    const req = context.request as unknown as Request;
    // A body of a type the router leaves unread (not JSON) crosses as bytes.
    if (req.body === undefined && req.method !== 'GET' && req.method !== 'HEAD' && hasBody(req)) {
      return readRawBody(req, route.bodyLimit ?? settings.bodyLimit, settings.bodyTimeoutMs).then((raw) => call(req, context.accessToken, raw));
    }
    return call(req, context.accessToken);
  };
  const guard =
    route.guard.type === 'jwt'
      ? createJwtGuard('a deployed plugin', route.guard.roles as JWTRoleName[], route.guard.permission as JWTPermissionName)
      : route.guard.type === 'custom'
        ? inIsolate
        : undefined;
  const standIn: BcmsControllerMethod<unknown, unknown> = {
    ...(route.path === undefined ? {} : { path: String(route.path) }),
    type: String(route.type) as HttpVerb,
    ...(route.bodyLimit === undefined ? {} : { bodyLimit: route.bodyLimit }),
    ...(guard === undefined ? {} : { preRequestHandler: guard as never }),
    handler: Object.defineProperty(handler, ISOLATED, { value: true }) as never,
  };
  // Its security is the guard the service enforces for it, whatever the isolate says.
  const security: OperationSecurity =
    route.guard.type === 'jwt' ? { type: 'jwt', roles: [...route.guard.roles], permission: route.guard.permission } : { type: route.guard.type === 'custom' ? 'custom' : 'none' };
  return Object.defineProperty(standIn, DESCRIBED, { value: trustedOperation(route.described, security) });
}

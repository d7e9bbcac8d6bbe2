import type { ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import type { BcmsRepo } from '../db/repository';
import { hasBody, isJsonType, ownBodyLimit, parseJsonBody, RAW_BODY, readRawBody, refuseDeepBody, ROUTE_BODY_LIMIT } from '../http/body';
import { BcmsHttpError, type ErrorHandler } from '../http/errors';
import { withDeadline } from '../http/deadline';
import { IsolateAnswer, isIsolated } from '../isolate/answer';
import type { Work } from '../http/exchange';
import { writeBytes, writeJson, writePreflight } from '../http/respond';
import type { IdentifyPluginKey } from '../security/caller';
import { type AccessTokenVerifier, hasBearerToken } from '../security/jwt';
import type { JWT } from '../security/token';
import type { BcmsLogger } from '../handler-logger';
import { JWT_GUARD_CHECK, type JwtGuardCheck, markGuardedRequest, runGuarded, tokenFirstOf } from './guard';
import { paramsOf, type PluginMatch, type PluginRoute } from './routes';
import type { BcmsControllerMethod, BcmsPluginContext } from './types';

/** Answers a request for a plugin endpoint, given the paths of the route table it matched. */
export type PluginServer = (req: Request, res: Response, matches: readonly PluginMatch[] | undefined) => Work;

/**
 * Serves plugin methods: picks the method by verb (or answers OPTIONS and 405), reads a JSON
 * body, runs the pre-request handler (the guard), then the handler, and writes what it returned.
 */
export function createPluginServer(deps: {
  bodyLimit: number;
  /** A body still arriving this long after its reading began is answered 408 REQUEST_TIMEOUT. */
  bodyTimeoutMs: number;
  /** A handler still running after this is answered 504 (an isolated one: by its pool, which ends its isolate). */
  timeoutMs: number;
  logger: BcmsLogger;
  errorHandler: ErrorHandler;
  repo: BcmsRepo;
  verifyAccessToken: AccessTokenVerifier;
  /** The API key of a signed request, for `BCMSRouteProtection.createJwtApiPreRequestHandler`. */
  verifyPluginKey: IdentifyPluginKey;
}): PluginServer {
  const { bodyLimit, bodyTimeoutMs, timeoutMs, logger, errorHandler, repo, verifyAccessToken, verifyPluginKey } = deps;

  /**
   * A handler's result: a plain value is written now; a promise (or anything `await` would wait
   * for, a Knex query builder, say) is handed to the exchange, which writes its value, or answers
   * 504 once the handler ran past its time-out.
   */
  function answer(res: Response, route: PluginRoute, result: unknown): Work {
    // A native promise comes back as it is; a subclass or another thenable is adopted into one.
    if (isThenable(result)) return isIsolated(route.method.handler) ? Promise.resolve(result) : withDeadline(Promise.resolve(result), timeoutMs, late);
    writePluginAnswer(res, result);
  }

  /**
   * The handler's context, after the guard if there is one; then the handler's result: written now
   * when it is a plain value, else its promise, whose value the exchange writes (`writePluginAnswer`).
   */
  function run(req: Request, res: Response, route: PluginRoute, verified?: JWT): Work {
    const context: BcmsPluginContext = { name: route.name, request: req as BcmsPluginContext['request'], response: res, logger, errorHandler, repo };
    const { preRequestHandler, handler } = route.method;
    if (preRequestHandler === undefined) return answer(res, route, handler(context));
    // The JWT guard with a token verified before (here, before the body; or earlier, and remembered):
    // the same outcome as running it, without its promises.
    const check = (preRequestHandler as { [JWT_GUARD_CHECK]?: JwtGuardCheck })[JWT_GUARD_CHECK];
    const known = check === undefined ? undefined : (verified ?? verifyAccessToken.known?.(req));
    if (known !== undefined) {
      (context as { accessToken?: unknown }).accessToken = (check as JwtGuardCheck)(known).accessToken;
      return answer(res, route, handler(context));
    }
    // An author's own pre-request handler may call a guard with a context it built: the guard finds
    // the verifiers, and the plugin an API key must list, on the request. Set here only, past the
    // unguarded and JWT fast paths, which need none of them.
    if (check === undefined) markGuardedRequest(req, verifyAccessToken, verifyPluginKey, route.plugin);
    const guarded = runGuarded(preRequestHandler as never, handler as never, context, () => verifyAccessToken(req));
    return isIsolated(handler) ? guarded : withDeadline(guarded, timeoutMs, late);
  }

  /**
   * With a JSON (or untyped) body, once it is read and parsed; any other type is left unread for the
   * handler. Behind a guard that decides on the bearer token (`tokenFirstOf`), the token is verified
   * and its roles checked first: a request it refuses is answered before a byte of its body is read.
   * Behind any other pre-request handler the body is read first (an author's own may read
   * `request.body`; a signature's digest is over its bytes), and its bytes are kept too (`RAW_BODY`):
   * a guard that accepts signed requests checks the digest or HMAC over them, and the handler gets
   * them parsed, so what it reads is what was signed.
   */
  function serveRoute(req: Request, res: Response, route: PluginRoute): Work {
    if (req.body === undefined && req.method !== 'GET' && req.method !== 'HEAD' && hasBody(req)) {
      const type = req.headers['content-type'];
      if (type === undefined || isJsonType(type)) {
        const first = tokenFirstOf(route.method.preRequestHandler);
        if (first === undefined || (first.bearerOnly && !hasBearerToken(req))) return readThenRun(req, res, route, type);
        const known = verifyAccessToken.known?.(req);
        if (known !== undefined) {
          first.check(known);
          return readThenRun(req, res, route, type, known);
        }
        return verifyAccessToken(req).then((accessToken) => {
          first.check(accessToken);
          return readThenRun(req, res, route, type, accessToken);
        });
      }
    }
    refuseDeepBody(req.body); // a host parser's, when one ran first: as deep as it came
    return run(req, res, route);
  }

  /** Reads the body (to the method's own `bodyLimit`, else the router's), parses it, then runs the route. */
  function readThenRun(req: Request, res: Response, route: PluginRoute, type: string | undefined, verified?: JWT): Work {
    const limit = limitOf(route.method);
    if (limit !== bodyLimit) (req as { [ROUTE_BODY_LIMIT]?: number })[ROUTE_BODY_LIMIT] = limit;
    return readRawBody(req, limit, bodyTimeoutMs).then((raw) => {
      if (route.method.preRequestHandler !== undefined) (req as { [RAW_BODY]?: Buffer })[RAW_BODY] = raw;
      req.body = parseJsonBody(raw, type);
      return run(req, res, route, verified);
    });
  }

  /** A method's own `bodyLimit` (checked by `createControllerMethod`), in bytes, parsed once; else the router's. */
  function limitOf(method: BcmsControllerMethod<unknown, unknown>): number {
    if (method.bodyLimit === undefined) return bodyLimit;
    let limit = ownLimits.get(method);
    if (limit === undefined) {
      limit = ownBodyLimit(method.bodyLimit, 'a controller method') as number;
      ownLimits.set(method, limit);
    }
    return limit;
  }
  const ownLimits = new WeakMap<object, number>();

  return function servePlugin(req, res, matches) {
    if (matches === undefined) throw new BcmsHttpError('INVALID_URL');
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (method === 'OPTIONS') return writePreflight(res, allowOf(matches));
    // The first matching path that serves this verb, as Express would pick its route.
    for (const match of matches) {
      const route = match.path.verbs.get(method);
      if (route === undefined) continue;
      if (match.values !== null) req.params = paramsOf(route, match.values);
      return serveRoute(req, res, route);
    }
    throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here.`, { Allow: allowOf(matches) });
  };
}

/** What an in-process handler still running past `timeoutMs` is answered. */
const late = (): BcmsHttpError => new BcmsHttpError('PLUGIN_TIMEOUT');

/** Writes what a handler returned (200 unless it chose another status), unless it answered through `response` itself. */
export function writePluginAnswer(res: ServerResponse, value: unknown): void {
  if (res.headersSent) return;
  if (value instanceof IsolateAnswer) {
    value.write(res);
    return;
  }
  if (Buffer.isBuffer(value)) {
    writeBytes(res, res.statusCode, value);
    return;
  }
  writeJson(res, res.statusCode, JSON.stringify(value) ?? 'null');
}

/** A promise, or anything `await` would wait for (a Knex query builder, say). */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/** The verbs of every matching path, for `Allow`. */
function allowOf(matches: readonly PluginMatch[]): string {
  if (matches.length === 1) return (matches[0] as PluginMatch).path.allow;
  const verbs = new Set(matches.flatMap((match) => [...match.path.verbs.keys()]));
  return [...verbs, 'OPTIONS'].join(', ');
}

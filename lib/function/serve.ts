import type { ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import type { BcmsRepo } from '../db/repository';
import { bodyLimitOf, hasBody, isJsonType, ownBodyLimit, parseJsonBody, RAW_BODY, readRawBody, refuseDeepBody, ROUTE_BODY_LIMIT } from '../http/body';
import { BcmsHttpError, type ErrorHandler } from '../http/errors';
import { IsolateAnswer, isIsolated } from '../isolate/answer';
import type { Work } from '../http/exchange';
import { writeJson, writePreflight } from '../http/respond';
import type { BcmsLogger } from '../handler-logger';
import { FunctionAnswer, type IdempotencyLedger, readIdempotencyKey } from './idempotency';
import { checkedFunctionBody } from './body-schema';
import type { BcmsFunction, BcmsFunctionAuth, BcmsFunctionConfig, BcmsFunctionContext } from './types';

export const FUNCTION_PREFIX = '/api/function/';
const FUNCTION_ALLOW = 'POST, OPTIONS';

/** Answers `POST /api/function/<name>` (and its preflight), given the router-relative path. */
export type FunctionServer = (req: Request, res: Response, path: string) => Work;

/**
 * A function's raw body: JSON or untyped, at most the function's own `bodyLimit` (left on the
 * request by the function server), else `limit` bytes, within `timeoutMs`; any other type is 415.
 * A call with an `Idempotency-Key` keeps the bytes on the request, for the hash of its body.
 */
export function readFunctionBody(req: Request, limit: number, timeoutMs?: number): Promise<Buffer> {
  const type = req.headers['content-type'];
  if (type !== undefined && !isJsonType(type)) return Promise.reject(new BcmsHttpError('UNSUPPORTED_MEDIA_TYPE'));
  const reading = readRawBody(req, bodyLimitOf(req, limit), timeoutMs);
  if (req.headers['idempotency-key'] === undefined) return reading;
  return reading.then((raw) => ((req as { [RAW_BODY]?: Buffer })[RAW_BODY] = raw));
}

/**
 * Serves functions: finds the function by name, checks its caller when it is private, reads its
 * JSON body, runs it within `timeoutMs` and answers `{ "success": true, "result": ... }`.
 */
export function createFunctionServer(deps: {
  /** The functions live now (the app's own and the deployed), looked up on every call. */
  functions: () => ReadonlyMap<string, BcmsFunction>;
  /** While a deployed function of this name is loading, the load: the call waits for it rather than answering 404. */
  pending?: (name: string) => Promise<void> | undefined;
  /** Who calls a private function (lib/security/caller.ts). */
  identifyCaller: (req: Request, name: string) => Promise<BcmsFunctionAuth>;
  bodyLimit: number;
  /** A body still arriving this long after its reading began is answered 408 REQUEST_TIMEOUT. */
  bodyTimeoutMs: number;
  timeoutMs: number;
  logger: BcmsLogger;
  errorHandler: ErrorHandler;
  repo: BcmsRepo;
  /** Calls with an `Idempotency-Key` run once per key, caller and body (lib/function/idempotency.ts). */
  idempotency?: IdempotencyLedger;
  /** `rateLimit.ip`: counts the call of the client's address, rejecting with 429 once its points are spent. Unset: no limit. */
  limitIp?: (req: Request) => Promise<void>;
}): FunctionServer {
  const { functions, pending, identifyCaller, bodyLimit, bodyTimeoutMs, timeoutMs, logger, errorHandler, repo, idempotency, limitIp } = deps;
  /** Functions' own `bodyLimit` in bytes (checked when they loaded), parsed once each. */
  const ownLimits = new WeakMap<BcmsFunctionConfig, number>();

  /**
   * The function's result, which the exchange writes in its envelope (`writeFunctionResult`); with
   * an `Idempotency-Key`, the answer the ledger gives (a new run's, or the first run's again).
   */
  function run(req: Request, definition: BcmsFunction, auth: BcmsFunctionAuth | null, key: string | undefined): Promise<unknown> {
    if (key === undefined || idempotency === undefined) return runHandler(req, definition, auth, undefined);
    return idempotency.once(req, definition.config.name, key, auth, () => runHandler(req, definition, auth, key));
  }

  function runHandler(req: Request, definition: BcmsFunction, auth: BcmsFunctionAuth | null, idempotencyKey: string | undefined): Promise<unknown> {
    if (req.body === undefined) req.body = {}; // as BCMS: a call without a body, or with an empty one, reads `{}` (a JSON null stays null)
    const context: BcmsFunctionContext = { request: req, logger, errorHandler, repo, auth };
    if (idempotencyKey !== undefined) context.idempotencyKey = idempotencyKey;
    // An isolated function's pool enforces its time-out, and ends the isolate that ran past it.
    if (isIsolated(definition.handler)) return definition.handler(context) as Promise<unknown>;
    // With a bodySchema, the body is checked (and becomes the schema's output) before the handler runs.
    if (definition.config.bodySchema === undefined) return withTimeout(definition, context, timeoutMs);
    return checkedFunctionBody(definition, req.body).then((body) => {
      req.body = body;
      return withTimeout(definition, context, timeoutMs);
    });
  }

  /**
   * Runs it once its body is read. A host body parser that ran first already set `req.body`: used as
   * it is; a signed call's body was read and parsed when its signature was checked.
   */
  function withBody(req: Request, definition: BcmsFunction, auth: BcmsFunctionAuth | null, key: string | undefined): Promise<unknown> {
    if (auth?.type === 'signature' || !hasBody(req)) return run(req, definition, auth, key);
    if (req.body !== undefined) {
      refuseDeepBody(req.body); // a host parser's: as deep as it came
      return run(req, definition, auth, key);
    }
    return readFunctionBody(req, bodyLimit, bodyTimeoutMs).then((raw) => {
      req.body = parseJsonBody(raw, req.headers['content-type']);
      return run(req, definition, auth, key);
    });
  }

  return function serveFunction(req, res, path): Work {
    const name = path.length > FUNCTION_PREFIX.length ? path.slice(FUNCTION_PREFIX.length) : '';
    const definition = functions().get(name);
    if (definition === undefined) {
      const loading = pending?.(name);
      if (loading !== undefined) return loading.then((): Work => (functions().has(name) ? serveFunction(req, res, path) : notFound(name)));
      notFound(name);
    }
    if (req.method === 'OPTIONS') return writePreflight(res, FUNCTION_ALLOW);
    if (req.method !== 'POST') throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here; use POST.`, { Allow: FUNCTION_ALLOW });
    const { config } = definition;
    if (config.bodyLimit !== undefined) {
      let limit = ownLimits.get(config);
      if (limit === undefined) {
        limit = ownBodyLimit(config.bodyLimit, `function "${config.name}": config`) as number;
        ownLimits.set(config, limit);
      }
      // For every reader of this call's body: a signature's check reads it through identifyCaller.
      (req as { [ROUTE_BODY_LIMIT]?: number })[ROUTE_BODY_LIMIT] = limit;
    }
    // A malformed Idempotency-Key is refused before anything is read (no header: no database round trip).
    const key = req.headers['idempotency-key'] === undefined ? undefined : readIdempotencyKey(req);
    // The address's rate limit before anything else of the call touches the database.
    if (limitIp !== undefined) return limitIp(req).then(() => call(req, definition, key));
    return call(req, definition, key);
  };

  /**
   * A private function decides on a bearer token (or on no credential at all) before a byte of the
   * body is read; only a signature, whose digest covers the bytes, reads them first.
   */
  function call(req: Request, definition: BcmsFunction, key: string | undefined): Promise<unknown> {
    if (definition.config.public === true) return withBody(req, definition, null, key);
    return identifyCaller(req, definition.config.name).then((auth) => withBody(req, definition, auth, key));
  }
}

function notFound(name: string): never {
  throw new BcmsHttpError('FUNCTION_NOT_FOUND', `Function "${name}" not found.`);
}

/** Writes a function's result in its envelope, `{ "success": true, "result": ... }`. */
export function writeFunctionResult(res: ServerResponse, result: unknown): void {
  if (result instanceof IsolateAnswer) {
    result.writeResult(res);
    return;
  }
  if (result instanceof FunctionAnswer) {
    result.write(res);
    return;
  }
  writeJson(res, 200, `{"success":true,"result":${JSON.stringify(result) ?? 'null'}}`);
}

/** The handler's result, or FUNCTION_TIMEOUT once `timeoutMs` passed (the handler runs on). */
function withTimeout(definition: BcmsFunction, context: BcmsFunctionContext, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new BcmsHttpError('FUNCTION_TIMEOUT', `Function "${definition.config.name}" ran past its time-out of ${timeoutMs} ms.`));
    }, timeoutMs);
    const settle = (): void => clearTimeout(timer);
    // Called inside the executor, a synchronous throw of the handler rejects this promise too.
    Promise.resolve(definition.handler(context)).then(
      (value) => {
        settle();
        resolve(value);
      },
      (error: unknown) => {
        settle();
        reject(error);
      },
    );
  });
}

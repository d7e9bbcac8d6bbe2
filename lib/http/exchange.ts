import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Request, Response } from 'express';
import { type Logger, REQUEST_LINE, type RequestLineWriter } from '../logger';
import { type Metrics, NO_METRICS } from '../metrics';
import { requestSpan } from '../tracing';
import { dropUnreadBody } from './body';
import { BcmsHttpError, type ErrorCode } from './errors';
import type { Admission } from './closing';
import { type PreflightResponse, ROUTER_CORS, type RouterCors } from './cors';
import { type ErrorHook, reportError } from './on-error';
import { createRequestIds, requestIdOf, traceIdOf } from './request-id';
import { type Family, writeError } from './respond';

/**
 * What a part's answer leaves to do: nothing (it answered), or a promise: settled once it answered,
 * or of the value the exchange's writer turns into the answer (a handler's result, say).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a part that answered returns nothing: handlers without a return statement must fit
export type Work = Promise<unknown> | void;

/** Answers a request the exchange took; `arg` is what dispatch found for it (its path, its matches). */
export type Handle<A> = (req: Request, res: Response, arg: A) => Work;

/** Writes the value a part's promise resolved to: the answer to a handler's result. */
export type Writer = (res: ServerResponse, value: unknown) => void;

/**
 * Takes one request the router owns from its id to its log line: `handle(req, res, arg)` answers
 * it, by returning or through the promise it returns (whose value `write` writes, when given);
 * whatever it throws or rejects with is rendered here.
 */
export type Exchange = <A>(req: Request, res: Response, family: Family, path: string, handle: Handle<A>, arg: A, write?: Writer) => void;

/** What a part that answered at once left, once the router's start had to be waited for: nothing to write. */
const ANSWERED = Symbol('answered');

/**
 * What every request the router owns gets (docs/http.md): an id, its CORS headers (the `cors`
 * option) and `X-Request-Id` on every answer (a handler's own included), its errors as JSON bodies
 * (5xx reported to `onError` first), and one log line. `pending(path)` is the router's start while
 * it is under way: requests wait for it.
 */
export function createExchange(options: {
  logger: Logger;
  pending: (path: string) => Promise<void> | undefined;
  bodyTimeoutMs: number;
  admission?: Admission;
  metrics?: Metrics;
  /** Undefined for `cors: false`: the app's own CORS headers are left as they are. */
  cors?: RouterCors;
  onError?: ErrorHook;
}): Exchange {
  const { logger, pending, bodyTimeoutMs, admission, metrics = NO_METRICS, cors, onError } = options;
  const nextRequestId = createRequestIds();
  const writeLine = (logger as { [REQUEST_LINE]?: RequestLineWriter })[REQUEST_LINE];

  // The hot path of every request: the handler's own promise is the only one waited on (its value
  // written here, not in a `then` of its own), and dispatch passes what it found as `arg` rather
  // than in a closure.
  return function exchange(req, res, family, path, handle, arg, write) {
    const requestId = requestIdOf(req.headers['x-request-id'], nextRequestId);
    const traceId = traceIdOf(req.headers.traceparent);
    const started = performance.now();
    // A span when the app has OpenTelemetry's API; the handler runs within it.
    const span = requestSpan(req.method, family, path, requestId, req.headers);
    const done = (): void => {
      logRequest(logger, writeLine, req, res, path, requestId, traceId, started, admission);
      metrics.request(path, res.statusCode, (performance.now() - started) / 1000);
      span?.end(res.statusCode);
    };
    const hostHeaders = res.getHeaderNames();
    res.setHeader('X-Request-Id', requestId);
    const failed = (error: unknown): void => {
      const code = renderError(logger, req, res, error, family, requestId, hostHeaders, onError);
      if (code !== undefined) metrics.error(code);
      // Refused before its body was read (a guard's 401, say): the rest is dropped unparsed, within bodyTimeoutMs.
      if (res.getHeader('connection') !== 'close') dropUnreadBody(req, bodyTimeoutMs);
      done();
    };
    let work: Work;
    try {
      // A preflight's CORS headers are its part's to set, with the path's verbs (writePreflight).
      let corsSet: Promise<void> | undefined;
      if (req.method === 'OPTIONS') (res as PreflightResponse)[ROUTER_CORS] = cors;
      else if (cors !== undefined) corsSet = cors.answer(req, res);
      // Once the router is closing: 503 SERVICE_CLOSING (lib/http/closing.ts).
      admission?.admit(res);
      // An `origin` function that calls back later is waited for, and then the router's start.
      const starting = corsSet === undefined ? pending(path) : corsSet.then(() => pending(path));
      const run = (): Work => (span === undefined ? handle(req, res, arg) : span.run(() => handle(req, res, arg)));
      work = starting === undefined ? run() : starting.then(() => run() ?? ANSWERED);
    } catch (error) {
      return failed(error);
    }
    if (work === undefined) return done();
    const answered = (value: unknown): void => {
      if (write !== undefined && value !== ANSWERED) {
        try {
          write(res, value);
        } catch (error) {
          failed(error);
          return;
        }
      }
      done();
    };
    try {
      work.then(answered, failed);
    } catch (error) {
      // A promise whose own `then` throws: its error is the request's.
      failed(error);
    }
  };
}

/**
 * The request's log line: `{ requestId, traceId?, method, path, status, ms }`, through the default logger's
 * own writer when it has one. `path` is the mount path and the router-relative path: no query
 * string, never a token.
 */
function logRequest(
  logger: Logger,
  writeLine: RequestLineWriter | undefined,
  req: Request,
  res: ServerResponse,
  path: string,
  requestId: string,
  traceId: string | undefined,
  started: number,
  admission?: Admission,
): void {
  admission?.done(res);
  const fullPath = req.baseUrl ? req.baseUrl + path : path;
  const ms = Math.round((performance.now() - started) * 1000) / 1000;
  if (writeLine !== undefined) {
    writeLine(requestId, traceId, req.method, fullPath, res.statusCode, ms);
    return;
  }
  logger.info({ requestId, ...(traceId === undefined ? {} : { traceId }), method: req.method, path: fullPath, status: res.statusCode, ms }, 'request');
}

/**
 * Renders what a request threw, and says its code (none for a client that went away). Headers a handler set (say Cache-Control) do not go out on its
 * error: only those the host set before the router, and the router's own, stay. A 500 names the
 * request id and nothing internal; the error itself goes to the log.
 */
function renderError(
  logger: Logger,
  req: Request,
  res: ServerResponse,
  error: unknown,
  family: Family,
  requestId: string,
  hostHeaders: readonly string[],
  onError: ErrorHook | undefined,
): ErrorCode | undefined {
  // The connection, not the request stream: a body read to its end destroys the stream too.
  if (req.socket?.destroyed === true && !res.headersSent) {
    // The client went away (mid-body, say): there is no one to answer, and nothing went wrong here.
    logger.debug({ err: error, requestId }, 'bcms-extensions: client closed the request');
    res.statusCode = 499; // for the log line only, as nginx logs it
    return undefined;
  }
  let answer: BcmsHttpError;
  if (error instanceof BcmsHttpError) {
    answer = error;
  } else {
    logger.error({ err: error, requestId }, 'bcms-extensions: unexpected error');
    answer = new BcmsHttpError('INTERNAL_ERROR');
  }
  // Before the answer, never waited for: the app's error reporting (Sentry and the like).
  if (onError !== undefined && answer.status >= 500) reportError(onError, logger, error, answer, req, requestId);
  if (res.headersSent) {
    // The handler started its own answer: nothing valid can follow, so end what is there.
    res.end();
    return answer.code;
  }
  for (const name of res.getHeaderNames()) {
    // The host's, the request id and the CORS headers (the router's, or the app's own cors() before it) stay.
    if (!hostHeaders.includes(name) && name !== 'x-request-id' && name !== 'vary' && !name.startsWith('access-control-')) res.removeHeader(name);
  }
  try {
    writeError(res, answer, family, requestId);
  } catch (error) {
    // Nothing valid can be answered (a header the error carried that HTTP cannot): the connection
    // goes, the service stays (this runs where a throw would end its process).
    logger.error({ err: error, requestId }, 'bcms-extensions: an error could not be answered; the connection is closed');
    res.destroy();
  }
  return answer.code;
}

import type { Request } from 'express';
import type { Logger } from '../logger';
import type { BcmsHttpError, ErrorCode } from './errors';

/** What `onError` is told of the answer beside the error: the request id its body and log line name, its status and code. */
export interface ErrorReport {
  requestId: string;
  status: number;
  code: ErrorCode;
}

/**
 * The `onError` option: called with every error the router answers with a 5xx, before the answer
 * is written, and never waited for. A throw or a rejection of its own is logged and changes nothing.
 *
 * @example
 * bcmsExtensions(registry, { onError: (error, req) => Sentry.captureException(error, { extra: { path: req.path } }) });
 */
export type ErrorHook = (error: Error, req: Request, report: ErrorReport) => unknown;

/**
 * Hands a 5xx to the app's hook: what was thrown when it is an Error (a handler's own, or the
 * router's describing the answer: FUNCTION_TIMEOUT, EXTENSION_CRASHED, DATABASE_UNAVAILABLE...),
 * else an Error that carries it as its `cause`.
 */
export function reportError(hook: ErrorHook, logger: Logger, thrown: unknown, answer: BcmsHttpError, req: Request, requestId: string): void {
  const error = thrown instanceof Error ? thrown : new Error(`Something that is not an Error was thrown (${typeof thrown}); answered ${answer.status} ${answer.code}.`, { cause: thrown });
  try {
    const outcome = hook(error, req, { requestId, status: answer.status, code: answer.code });
    if (outcome !== null && typeof outcome === 'object' && typeof (outcome as PromiseLike<unknown>).then === 'function') {
      (outcome as PromiseLike<unknown>).then(undefined, (failure: unknown) => logger.error({ err: failure, requestId }, 'bcms-extensions: the onError option rejected (the answer is unchanged)'));
    }
  } catch (failure) {
    logger.error({ err: failure, requestId }, 'bcms-extensions: the onError option threw (the answer is unchanged)');
  }
}

import type { IncomingMessage, ServerResponse } from 'node:http';
import { tooLargeToDrain } from './body';
import { ROUTER_CORS, type PreflightResponse } from './cors';
import type { BcmsHttpError } from './errors';

/** Which body shape an error takes: `{ message }` (plugins) or `{ success: false, error }` (functions). */
export type Family = 'plugin' | 'function';

/**
 * Writes a JSON answer. The CORS headers and `X-Request-Id` were set when the request was taken (so a handler's own answer has them too); this adds the content headers. The router
 * writes its answers itself rather than through `res.json`: that skips Express's ETag and content
 * negotiation, which the API never uses.
 */
export function writeJson(res: ServerResponse, status: number, body: string, extra?: Readonly<Record<string, string>>): void {
  if (extra !== undefined) {
    for (const name in extra) res.setHeader(name, extra[name] as string);
  }
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Writes bytes a handler returned (a `Buffer`, as BCMS sends one): `application/octet-stream` unless it set a type. */
export function writeBytes(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, {
    'Content-Type': (res.getHeader('content-type') as string | undefined) ?? 'application/octet-stream',
    'Content-Length': body.length,
  });
  res.end(body);
}

/** The body of an error, by family. The router's own 500s name the request id and nothing internal. */
export function errorBody(error: BcmsHttpError, family: Family, requestId: string): string {
  let message = error.message;
  if (error.code === 'INTERNAL_ERROR') message = `Internal error. Request id: ${requestId}.`;
  else if (error.code === 'BODY_ALREADY_PARSED') message = `${error.message} Request id: ${requestId}.`;
  if (family === 'plugin') return error.body === undefined ? JSON.stringify({ message }) : JSON.stringify(error.body);
  return JSON.stringify({ success: false, error: { code: error.code, message } });
}

export function writeError(res: ServerResponse, error: BcmsHttpError, family: Family, requestId: string): void {
  const headers: Record<string, string> = {
    // Every 401 names its scheme (RFC 9110), a handler's errorHandler.occurred(401, ...) included.
    ...(error.status === 401 ? { 'WWW-Authenticate': 'Bearer' } : undefined),
    ...error.headers,
  };
  // A too-large or stalled body is left unread, and so is a large one refused before it was read (a
  // guard's 401): closing the connection keeps Node from draining it. A small rest is drained (dropUnreadBody).
  const req = (res as { req?: IncomingMessage }).req;
  if (error.code === 'BODY_TOO_LARGE' || error.code === 'REQUEST_TIMEOUT' || (req !== undefined && tooLargeToDrain(req))) headers.Connection = 'close';
  writeJson(res, error.status, errorBody(error, family, requestId), headers);
}

/**
 * Answers an `OPTIONS` request on a path the router serves, whose verbs are `allow`: a CORS
 * preflight, 204 with the headers the `cors` option gives (lib/http/cors.ts), and `Allow`.
 */
export function writePreflight(res: ServerResponse, allow: string): Promise<void> | undefined {
  const cors = (res as PreflightResponse)[ROUTER_CORS];
  const req = (res as { req?: IncomingMessage }).req;
  if (cors !== undefined && req !== undefined) return cors.preflight(req, res, allow);
  // No CORS of the router's (`cors: false` leaves preflights to the app): a plain OPTIONS answer.
  res.writeHead(204, { Allow: allow });
  res.end();
  return undefined;
}

import { randomBytes } from 'node:crypto';

/**
 * Request ids: a random prefix per router and a counter, unique across restarts and instances
 * (48 random bits) and far cheaper per request than a random UUID.
 */
export function createRequestIds(): () => string {
  const prefix = randomBytes(6).toString('hex');
  let count = 0;
  return () => `${prefix}-${(++count).toString(36)}`;
}

/** What an id a client or a proxy sends may be: 1 to 128 letters, digits, `_`, `.`, `:` or `-` (nothing a log line must escape). */
const INCOMING_ID = /^[\w.:-]{1,128}$/;

/** The request's id: the one its `X-Request-Id` header gives, when it is fit for a log line, else `next()`. */
export function requestIdOf(header: string | string[] | undefined, next: () => string): string {
  return typeof header === 'string' && INCOMING_ID.test(header) ? header : next();
}

/** W3C Trace Context's `traceparent`: version, trace id, parent id, flags (lower-case hex). */
const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}(?:-|$)/;

/** The trace id of a valid `traceparent` header (not version ff, not all zeros), else undefined. */
export function traceIdOf(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const found = TRACEPARENT.exec(header);
  if (found === null || found[1] === 'ff' || /^0+$/.test(found[2] ?? '')) return undefined;
  return found[2];
}

import { METHODS } from 'node:http';
import os from 'node:os';
import pino from 'pino';

/**
 * The logging surface the router needs: any pino logger fits, and so does any object with these
 * methods (`(object, message)` as pino takes them).
 */
export interface Logger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
  debug(object: object, message?: string): void;
}

/**
 * The lines of one turn of the event loop, handed to stdout in one write when the turn ends
 * (`setImmediate`) rather than one write per line: a server under load answers dozens of requests
 * per turn, and a write per line cost more than anything the router does itself. The writer is
 * `pino.destination` (sonic-boom), asynchronous as pino's default is, so a slow reader of stdout
 * never stalls the server. The library adds no process listener: what is held is written out when
 * the router closes (`drain`), and how the process ends is the app's call.
 */
class TurnBuffer {
  private pending = '';
  private scheduled = false;
  /** stdout's reader is gone (EPIPE): lines have nowhere to go, and are dropped. */
  private closed = false;
  private readonly out: ReturnType<typeof pino.destination>;

  constructor(fd: number) {
    this.out = pino.destination({ dest: fd, sync: false });
    // A closed stdout (`node server.js | head`) must not take the server down: pino ignores EPIPE too.
    this.out.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
      this.closed = true;
    });
  }

  write(line: string): boolean {
    if (this.closed) return true;
    this.pending += line;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    return true;
  }

  /** Hands what is held to stdout; pino's `logger.flush(callback)` lands here. */
  flush(callback?: (error?: Error) => void): void {
    this.scheduled = false;
    if (this.pending !== '' && !this.closed) {
      const lines = this.pending;
      this.pending = '';
      this.out.write(lines);
    }
    callback?.();
  }

  /**
   * Everything held, written: once sonic-boom's asynchronous write is out of its thread (a process
   * that exits meanwhile cuts it short), at most a second, then what is left synchronously.
   */
  async drain(): Promise<void> {
    this.flush();
    const until = Date.now() + 1000;
    while ((this.out as unknown as { _writing?: boolean })._writing === true && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 1));
    // sonic-boom's flushSync retries a write that failed with EPIPE for ever.
    if (this.closed) return;
    try {
      this.out.flushSync();
    } catch {
      // Nothing more can be done for stdout (closed, or never ready).
    }
  }
}

/**
 * Writes the request log line itself: the same JSON, byte for byte but the time, as the logger's
 * `info(fields, 'request')` would. Only the default logger has one (see `createDefaultLogger`).
 */
export type RequestLineWriter = (requestId: string, traceId: string | undefined, method: string, path: string, status: number, ms: number) => void;
export const REQUEST_LINE = Symbol('bcms-extensions.requestLine');

let stdoutLines: TurnBuffer | undefined;

/** Node's HTTP methods as JSON strings, made once. */
const QUOTED_METHODS = new Map(METHODS.map((method) => [method, JSON.stringify(method)]));

/**
 * The router's default logger: pino, named `bcms-extensions`, writing to stdout a turn at a time.
 * Its request line, one per request, is put together by a template rather than by pino's
 * serialiser: measured in `npm run bench`, pino's formatting of that line was most of what logging
 * cost a request (2.5 µs against 0.7 µs). Every other message goes through pino.
 */
export function createDefaultLogger(): Logger {
  stdoutLines ??= new TurnBuffer(1);
  const out = stdoutLines;
  const logger = pino({ name: 'bcms-extensions' }, out);
  // pino's own bindings, in its order: {"level","time","pid","hostname","name", fields..., "msg"}.
  const bindings = `,"pid":${process.pid},"hostname":${JSON.stringify(os.hostname())},"name":"bcms-extensions","requestId":`;
  // The request id (the router's own, or a client's of letters, digits and _.:-), the trace id (hex)
  // and the method (nearly always one Node's parser knows) need no escaping: no JSON.stringify for them.
  const write: RequestLineWriter = (requestId, traceId, method, path, status, ms) => {
    if (!logger.isLevelEnabled('info')) return;
    out.write(
      `{"level":30,"time":${Date.now()}${bindings}"${requestId}"${traceId === undefined ? '' : `,"traceId":"${traceId}"`},"method":${QUOTED_METHODS.get(method) ?? JSON.stringify(method)},"path":${JSON.stringify(path)},"status":${status},"ms":${ms},"msg":"request"}\n`,
    );
  };
  return Object.defineProperty(logger, REQUEST_LINE, { value: write });
}

/** Writes out what the default logger holds (router.close() ends with it): a no-op if none was made. */
export function drainDefaultLogger(): Promise<void> {
  return stdoutLines?.drain() ?? Promise.resolve();
}

/**
 * Query parameters whose values are credentials or the parts of a signature, by name
 * (case-insensitive): a signed URL's `key`, `nonce`, `timestamp` and `signature` (the BCMS client's
 * scheme signs so), and the names tokens, secrets and passwords travel under.
 */
const CREDENTIAL_PARAMETER = /^(?:nonce|timestamp|sig|hmac|code|jwt|auth|session|sid|pwd|key[-_]?id)$|key$|token|secret|signature|passw|credential|authori[sz]ation/i;

/**
 * A URL fit for a log line (SECURITY.md: no token, signature or secret in any log line): the
 * value of each query parameter that may hold a credential is `[redacted]`; the path and the other
 * parameters stay as they are, to tell requests apart.
 *
 * @example
 * redactUrl('/api/function/f?key=k&nonce=n&timestamp=1&signature=ab&page=2');
 * // '/api/function/f?key=[redacted]&nonce=[redacted]&timestamp=[redacted]&signature=[redacted]&page=2'
 */
export function redactUrl(url: string): string {
  const start = url.indexOf('?');
  if (start === -1) return url;
  const end = url.indexOf('#', start);
  const query = url.slice(start + 1, end === -1 ? undefined : end);
  const parts = query.split('&').map((part) => {
    const equals = part.indexOf('=');
    if (equals === -1) return part;
    // The name as a server reads it (percent-decoded, `+` a space): `sig%6Eature` is `signature` too.
    const name = new URLSearchParams(part.slice(0, equals)).keys().next().value ?? '';
    return CREDENTIAL_PARAMETER.test(name) ? `${part.slice(0, equals)}=[redacted]` : part;
  });
  return url.slice(0, start + 1) + parts.join('&') + (end === -1 ? '' : url.slice(end));
}

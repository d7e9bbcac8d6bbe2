import type { IncomingMessage } from 'node:http';
import { TextDecoder } from 'node:util';
import { parse as parseContentType } from 'content-type';
import { BcmsHttpError } from './errors';

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/**
 * The raw bytes of a body the plugin server read and parsed before a route's pre-request handler,
 * kept on the request: a guard that accepts signed requests checks the signature over these bytes,
 * which the stream can no longer give.
 */
export const RAW_BODY = Symbol('bcms-extensions.rawBody');

/**
 * A body parser's `verify` hook that keeps the bytes it parsed, for a host that mounts its parser
 * before the router: signed calls are then checked against those bytes.
 *
 * @example
 * app.use(express.json({ verify: keepRawBody }));
 * app.use(bcmsExtensions(registry, options));
 */
export function keepRawBody(req: object, _res: unknown, buffer: Buffer): void {
  (req as { [RAW_BODY]?: Buffer })[RAW_BODY] = buffer;
}

/** `bodyLimit` as bytes: a number of bytes or a string such as `'1mb'`, `'512kb'`. */
export function parseByteSize(value: number | string, name: string): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
    if (match) return Math.floor(Number(match[1]) * (UNITS[(match[2] ?? 'b').toLowerCase()] as number));
  }
  throw new TypeError(`option ${name} must be a byte count or a size such as "1mb", got ${JSON.stringify(value)}`);
}

/**
 * A method's or function's own `bodyLimit` (bytes, or a size such as `'16kb'`) as bytes; undefined
 * when it sets none. Thrown where the method or function is made, naming it.
 */
export function ownBodyLimit(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseByteSize(value as number | string, 'bodyLimit');
  } catch {
    throw new TypeError(`${where}: bodyLimit must be a byte count or a size such as "16kb", got ${JSON.stringify(value)}`);
  }
}

/**
 * The limit of the route a request reached, when its method or function sets its own: left on the
 * request by the plugin and function servers, for the readers a guard calls (a signed body's).
 */
export const ROUTE_BODY_LIMIT = Symbol('bcms-extensions.routeBodyLimit');

/** The route's own limit (`ROUTE_BODY_LIMIT`), else `fallback` (the router's `bodyLimit`). */
export function bodyLimitOf(req: IncomingMessage, fallback: number): number {
  return (req as { [ROUTE_BODY_LIMIT]?: number })[ROUTE_BODY_LIMIT] ?? fallback;
}

/** The most of a refused body's unread rest that is drained to keep its connection open. */
export const DRAIN_LIMIT = 64 * 1024;

/**
 * Whether a request refused before its body was read leaves more of it to come than is worth
 * draining (over DRAIN_LIMIT, or of unknown length): its answer then closes the connection.
 */
export function tooLargeToDrain(req: IncomingMessage): boolean {
  if (!hasBody(req) || req.complete || req.readableEnded || (req as { _consuming?: boolean })._consuming === true) return false;
  const length = req.headers['content-length'];
  return length === undefined || !(Number(length) <= DRAIN_LIMIT);
}

/**
 * After an answer given before the body was read (a guard's 401 or 403, a 404, a 415) that keeps
 * the connection (a rest of at most DRAIN_LIMIT: see tooLargeToDrain): the rest of the body is read
 * and dropped, never parsed nor kept, so that the keep-alive connection can serve the client's next
 * request (RFC 9112 §9.3 requires the body to be read to find it). A rest that has not arrived
 * within `timeoutMs` closes the connection. A body already all received is dropped by Node itself;
 * an answer that closes the connection (413, 408, a large rest) needs no drain.
 */
export function dropUnreadBody(req: IncomingMessage, timeoutMs: number): void {
  if (!hasBody(req) || req.complete || req.readableEnded || req.socket === null || req.socket.destroyed) return;
  const socket = req.socket;
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  timer.unref();
  const done = (): void => clearTimeout(timer);
  req.once('end', done);
  req.once('close', done);
  req.resume();
}

/** Whether a request says it carries a body (RFC 9112: Content-Length or Transfer-Encoding). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Reads the raw body, refusing more than `limit` bytes with BODY_TOO_LARGE before reading it when
 * Content-Length says so, and as soon as the stream passes the limit otherwise. A body not all
 * read within `timeoutMs` of the start of reading (not of the request's arrival: a guard may have
 * run first) is REQUEST_TIMEOUT, and its connection is closed with the answer.
 */
export function readRawBody(req: IncomingMessage, limit: number, timeoutMs?: number): Promise<Buffer> {
  // Read already (a host middleware consumed the stream without setting req.body): no 'end' would
  // ever come, so the request would hang. What is gone is gone: the body counts as empty.
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(new BcmsHttpError('BODY_TOO_LARGE', `Request body is larger than the limit of ${limit} bytes.`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(new BcmsHttpError('BODY_TOO_LARGE', `Request body is larger than the limit of ${limit} bytes.`));
        return;
      }
      chunks.push(chunk);
    };
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            cleanup();
            req.pause();
            reject(new BcmsHttpError('REQUEST_TIMEOUT', `The request body did not arrive within ${timeoutMs} ms.`));
          }, timeoutMs);
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    // A client that goes away mid-body may close the stream without an 'error': never wait forever.
    const onClose = (): void => onError(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    const cleanup = (): void => {
      if (timer !== undefined) clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** Parses a JSON body, decoded as its Content-Type declares; an empty body is `undefined`, as Express 5 leaves it. */
export function parseJsonBody(raw: Buffer, contentType: string | undefined): unknown {
  if (raw.length === 0) return undefined;
  return parseJsonText(decodeText(raw, contentType));
}

/**
 * How deep a request's JSON may nest arrays and objects. V8 parses any depth, but what the service
 * does with a value afterwards recurses (JSON.stringify of an answer or a log line, the wire to an
 * isolate, a schema's check, Postgres's JSONB), and 50,000 levels overflow the stack there: a 500
 * far from the cause. Content nests a few dozen levels at most; serde_json stops at 128.
 */
export const MAX_JSON_DEPTH = 256;

/**
 * A request's JSON text, parsed: 400 INVALID_JSON when it is not JSON, or nests arrays and objects
 * deeper than MAX_JSON_DEPTH (refused before it is parsed, so nothing after this ever meets it).
 */
export function parseJsonText(text: string): unknown {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new BcmsHttpError('INVALID_JSON', `Request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new BcmsHttpError('INVALID_JSON');
  }
}

/** Whether the character at `at` follows an odd run of backslashes. */
function escaped(text: string, at: number): boolean {
  let backslashes = 0;
  while (text.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes++;
  return backslashes % 2 === 1;
}

/**
 * A body a host's parser made (`express.json()` before the router: it has no depth limit) refused as
 * the router's own parse refuses it: 400 INVALID_JSON past MAX_JSON_DEPTH. Walked without recursion,
 * through arrays and plain objects only.
 */
export function refuseDeepBody(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop() as [unknown, number];
    if (depth > MAX_JSON_DEPTH) throw new BcmsHttpError('INVALID_JSON', `Request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.`);
    const children = Array.isArray(item) ? item : isPlainObject(item) ? Object.values(item) : undefined;
    if (children === undefined) continue;
    for (const child of children) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Whether JSON text opens more than `limit` arrays and objects inside each other (brackets in strings not counted). */
function nestsDeeperThan(text: string, limit: number): boolean {
  if (text.length <= limit) return false; // too short to open limit + 1 brackets: most bodies, at no cost
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: skipped to its closing quote (one not escaped: after an even run of backslashes).
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && escaped(text, end)) end = text.indexOf('"', end + 1);
      if (end === -1) return false; // not JSON: the parse says so
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** TextDecoders by charset label, made once each: only labels the WHATWG Encoding Standard knows get in. */
const decoders = new Map<string, TextDecoder>();

/**
 * A body as text, decoded by the charset its Content-Type declares (RFC 9110 §8.3.2). UTF-8 (no
 * charset, or any label of UTF-8) is read as Node reads it, as before; any other charset of the
 * WHATWG Encoding Standard is decoded as declared, a UTF-16 byte-order mark choosing the byte order.
 * A charset no decoder knows is 415 naming it; bytes that are not valid in it are 400.
 */
export function decodeText(raw: Buffer, contentType: string | undefined): string {
  const charset = charsetOf(contentType);
  if (charset === undefined || charset === 'utf-8' || charset === 'utf8') return raw.toString('utf8');
  let decoder = decoderOf(charset);
  if (decoder === undefined) {
    throw new BcmsHttpError('UNSUPPORTED_MEDIA_TYPE', `Charset "${charset.slice(0, 40)}" is not supported: send the body as UTF-8 (or another charset of the WHATWG Encoding Standard).`);
  }
  if (decoder.encoding === 'utf-8') return raw.toString('utf8');
  if (decoder.encoding === 'utf-16le' || decoder.encoding === 'utf-16be') decoder = utf16ByMark(raw) ?? decoder;
  try {
    return decoder.decode(raw);
  } catch {
    throw new BcmsHttpError('INVALID_JSON', `Request body is not valid ${charset} text.`);
  }
}

/**
 * The charset a Content-Type declares when `decodeText` would not read its body as UTF-8 (lower-cased,
 * at most 40 characters); undefined for UTF-8: no charset, a header that does not parse, or any label
 * of UTF-8. A signature over a body's bytes fixes its text only when they are read as UTF-8: in
 * another charset, the same bytes are other text (SECURITY.md).
 */
export function nonUtf8Charset(contentType: string | undefined): string | undefined {
  const charset = charsetOf(contentType);
  if (charset === undefined || charset === 'utf-8' || charset === 'utf8' || decoderOf(charset)?.encoding === 'utf-8') return undefined;
  return charset.slice(0, 40);
}

/** The UTF-16 decoder a byte-order mark names (`FE FF` big-endian, as Java's "UTF-16" writes): it wins over the label. */
function utf16ByMark(raw: Buffer): TextDecoder | undefined {
  if (raw.length < 2) return undefined;
  if (raw[0] === 0xfe && raw[1] === 0xff) return decoderOf('utf-16be');
  if (raw[0] === 0xff && raw[1] === 0xfe) return decoderOf('utf-16le');
  return undefined;
}

/** The (fatal) decoder of a charset label, made once; undefined for a label the Encoding Standard does not know. */
function decoderOf(label: string): TextDecoder | undefined {
  let decoder = decoders.get(label);
  if (decoder === undefined) {
    try {
      decoder = new TextDecoder(label, { fatal: true });
    } catch {
      return undefined; // an unknown label: not remembered, so the map holds known labels only
    }
    decoders.set(label, decoder);
  }
  return decoder;
}

/** The `charset` parameter of a Content-Type (by `content-type`), lower-cased; undefined when there is none or the header does not parse. */
function charsetOf(header: string | undefined): string | undefined {
  if (header === undefined || !header.includes(';')) return undefined;
  let charset: string | undefined;
  try {
    charset = parseContentType(header).parameters.charset;
  } catch {
    return undefined; // a malformed header names no charset: UTF-8, as before
  }
  return charset === undefined ? undefined : charset.toLowerCase();
}

/** Whether a Content-Type names JSON (`application/json`, `application/*+json`). */
export function isJsonType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  if (contentType === 'application/json') return true; // what nearly every client sends: no split, trim or case to undo
  const type = (contentType.split(';', 1)[0] as string).trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/**
 * Inside an isolate: the `request` and `response` a handler gets, made from the plain data the
 * service sent, with the members of Express's that BCMS code uses. The request is a readable
 * stream of its body; the response records a status, headers and, when the handler writes it
 * itself (`send`, `json`, `end`), the bytes, which go back to the service to be sent.
 */
import { validateHeaderName, validateHeaderValue, STATUS_CODES } from 'node:http';
import { Readable } from 'node:stream';
import { BcmsHttpError } from '../http/errors';
import type { WireAnswer, WireRequest } from './protocol';
import { answerBytes } from './wire';

export type IsolateRequest = Readable & WireRequest & { get(name: string): string | string[] | undefined; header(name: string): string | string[] | undefined };

/** The handler's `request`: Express's fields, `get`/`header`, and its body as a stream (for handlers that read one). */
export function makeRequest(wire: WireRequest): IsolateRequest {
  const raw = wire.raw === undefined ? undefined : Buffer.from(wire.raw, 'base64');
  const stream = new Readable({
    read() {
      if (raw !== undefined && raw.length > 0) this.push(raw);
      this.push(null);
    },
  });
  const { raw: _raw, bearer: _bearer, ...fields } = wire;
  const lookup = (name: string): string | string[] | undefined => {
    const lower = String(name).toLowerCase();
    if (lower === 'referer' || lower === 'referrer') return wire.headers.referer ?? wire.headers.referrer;
    return wire.headers[lower];
  };
  return Object.assign(stream, fields, { get: lookup, header: lookup }) as IsolateRequest;
}

/** The handler's `response`: what it sets and sends is recorded, then answered by the service. */
export class IsolateResponse {
  statusCode = 200;
  statusMessage = '';
  locals: Record<string, unknown> = {};
  headersSent = false;
  finished = false;
  private readonly headers = new Map<string, [string, string | string[]]>();
  private readonly chunks: Buffer[] = [];
  private ended: (() => void) | undefined;
  /** Settles once the handler ended its own answer. */
  readonly done = new Promise<void>((resolve) => (this.ended = resolve));

  status(code: number): this {
    this.statusCode = code;
    return this;
  }
  sendStatus(code: number): this {
    this.statusCode = code;
    if (!this.headers.has('content-type')) this.setHeader('Content-Type', 'text/plain; charset=utf-8');
    return this.end(STATUS_CODES[code] ?? String(code));
  }
  setHeader(name: string, value: string | number | readonly string[]): this {
    validateHeaderName(name);
    const text = Array.isArray(value) ? value.map(String) : String(value);
    validateHeaderValue(name, text as string);
    this.headers.set(name.toLowerCase(), [name, text]);
    return this;
  }
  getHeader(name: string): string | string[] | undefined {
    return this.headers.get(String(name).toLowerCase())?.[1];
  }
  getHeaders(): Record<string, string | string[]> {
    return Object.fromEntries([...this.headers].map(([lower, [, value]]) => [lower, value]));
  }
  getHeaderNames(): string[] {
    return [...this.headers.keys()];
  }
  hasHeader(name: string): boolean {
    return this.headers.has(String(name).toLowerCase());
  }
  removeHeader(name: string): void {
    this.headers.delete(String(name).toLowerCase());
  }
  /** Express's `set`/`header`: a name and value, or an object of them. */
  set(field: string | Record<string, string | number | string[]>, value?: string | number | string[]): this {
    if (typeof field === 'object') {
      for (const [name, each] of Object.entries(field)) this.setHeader(name, each);
      return this;
    }
    return this.setHeader(field, value as string);
  }
  header(field: string | Record<string, string | number | string[]>, value?: string | number | string[]): this {
    return this.set(field, value);
  }
  get(name: string): string | string[] | undefined {
    return this.getHeader(name);
  }
  append(name: string, value: string | string[]): this {
    const current = this.getHeader(name);
    const added = Array.isArray(value) ? value : [value];
    return this.setHeader(name, current === undefined ? added : [...(Array.isArray(current) ? current : [current]), ...added]);
  }
  type(type: string): this {
    return this.setHeader(
      'Content-Type',
      type.includes('/') ? type : type === 'json' ? 'application/json; charset=utf-8' : type === 'html' ? 'text/html; charset=utf-8' : `text/${type}; charset=utf-8`,
    );
  }
  contentType(type: string): this {
    return this.type(type);
  }
  location(url: string): this {
    return this.setHeader('Location', url);
  }
  redirect(statusOrUrl: number | string, url?: string): void {
    const [status, target] = typeof statusOrUrl === 'number' ? [statusOrUrl, url as string] : [302, statusOrUrl];
    this.statusCode = status;
    this.location(target).end();
  }
  json(value: unknown): this {
    if (!this.headers.has('content-type')) this.setHeader('Content-Type', 'application/json; charset=utf-8');
    return this.end(JSON.stringify(value) ?? '');
  }
  send(body?: unknown): this {
    if (body === undefined || body === null) return this.end();
    if (Buffer.isBuffer(body)) {
      if (!this.headers.has('content-type')) this.setHeader('Content-Type', 'application/octet-stream');
      return this.end(body);
    }
    if (typeof body === 'object' || typeof body === 'number' || typeof body === 'boolean') return this.json(body);
    // As Express: text goes out as UTF-8, and says so.
    const type = this.getHeader('content-type');
    if (type === undefined) this.setHeader('Content-Type', 'text/html; charset=utf-8');
    else if (typeof type === 'string' && !/;\s*charset=/i.test(type)) this.setHeader('Content-Type', `${type}; charset=utf-8`);
    return this.end(String(body));
  }
  writeHead(status: number, headers?: Record<string, string | number | string[]>): this {
    this.statusCode = status;
    if (headers !== undefined) this.set(headers);
    this.headersSent = true;
    return this;
  }
  write(chunk: string | Uint8Array, encoding?: BufferEncoding): boolean {
    this.headersSent = true;
    this.chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, encoding) : Buffer.from(chunk));
    return true;
  }
  end(chunk?: string | Uint8Array | (() => void), encoding?: BufferEncoding): this {
    if (this.finished) return this;
    if (chunk !== undefined && typeof chunk !== 'function') this.write(chunk, encoding);
    this.headersSent = true;
    this.finished = true;
    this.ended?.();
    return this;
  }
  /** Whether the handler began its own answer. */
  get started(): boolean {
    return this.headersSent;
  }
  /**
   * The answer: the handler's own bytes when it sent them, else `value` (JSON, or a Buffer's bytes).
   * Throws EXTENSION_ANSWER_TOO_LARGE past `limit` bytes (body and headers), before bytes are
   * copied into base64.
   */
  answer(value: unknown, limit = Infinity): WireAnswer {
    const headers = [...this.headers.values()];
    const headerBytes = answerBytes({ headers });
    const checked = (bodyBytes: number): void => {
      if (headerBytes + bodyBytes > limit) throw new BcmsHttpError('EXTENSION_ANSWER_TOO_LARGE');
    };
    if (this.headersSent) {
      checked(this.chunks.reduce((sum, chunk) => sum + chunk.length, 0));
      return { status: this.statusCode, headers, bytes: Buffer.concat(this.chunks).toString('base64'), sent: true };
    }
    if (Buffer.isBuffer(value)) {
      checked(value.length);
      return { status: this.statusCode, headers, bytes: value.toString('base64') };
    }
    const json = JSON.stringify(value) ?? 'null';
    // A UTF-8 text is at most three bytes a unit: only one that might be too long is measured.
    if (headerBytes + json.length * 3 > limit) checked(Buffer.byteLength(json));
    return { status: this.statusCode, headers, json };
  }
  /** What a stream piped into the response calls. */
  on(): this {
    return this;
  }
  once(): this {
    return this;
  }
  emit(): boolean {
    return false;
  }
}

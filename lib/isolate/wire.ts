/**
 * What crosses between the service and an isolate. Messages go as JSON (frames of JSON text on a
 * pipe, lib/isolate/channel.ts, as cheap as Node's IPC in `json` mode, measured as cheap as a
 * worker's `postMessage` on the service's side), so the few values
 * JSON cannot carry are tagged on the way: a `Date` (rows of timestamp columns), a `Buffer` (bytea,
 * a handler's bytes) and `undefined` inside arrays. Plain objects and arrays are copied only where
 * they hold such a value.
 */

import type { JWT } from '../security/token';

const DATE = '\u0000date';
const BYTES = '\u0000bytes';

/** A value with its Dates and Buffers tagged, fit for JSON. */
export function toWire(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Date) return { [DATE]: value.getTime() };
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return { [BYTES]: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item = value[i] as unknown;
      const wired = item === undefined ? null : toWire(item);
      if (wired !== item && copy === undefined) copy = value.slice(0, i);
      if (copy !== undefined) copy.push(wired);
    }
    return copy ?? value;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return value;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    const wired = toWire(item);
    if (wired !== item) copy ??= { ...(value as Record<string, unknown>) };
    if (copy !== undefined) copy[key] = wired;
  }
  return copy ?? value;
}

/** The value `toWire` tagged, with its Dates and Buffers back. */
export function fromWire(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = fromWire(value[i]);
    return value;
  }
  const record = value as Record<string, unknown>;
  if (DATE in record && typeof record[DATE] === 'number') return new Date(record[DATE]);
  if (BYTES in record && typeof record[BYTES] === 'string') return Buffer.from(record[BYTES], 'base64');
  for (const key of Object.keys(record)) record[key] = fromWire(record[key]);
  return record;
}

/** An error as it crosses: what `instanceof` checks, `code` tests and messages need on the other side. */
export interface WireError {
  name: string;
  message: string;
  stack?: string;
  /** Node's or Postgres's code (`ECONNREFUSED`, `23505`), or a BcmsHttpError's. */
  code?: string;
  /** A BcmsHttpError's answer. */
  http?: { status: number; headers?: Record<string, string>; body?: object };
  /** Postgres's fields that callers read (`constraint`, `detail`...). */
  fields?: Record<string, string>;
}

const PG_FIELDS = ['detail', 'hint', 'constraint', 'table', 'column', 'schema', 'severity'] as const;

/** Any thrown value, as a WireError. */
export function errorToWire(error: unknown): WireError {
  if (error === null || typeof error !== 'object') return { name: 'Error', message: String(error) };
  const { name, message, stack, code, status, headers, body } = error as Record<string, unknown>;
  const wired: WireError = { name: typeof name === 'string' ? name : 'Error', message: typeof message === 'string' ? message : String(message) };
  if (typeof stack === 'string') wired.stack = stack;
  if (typeof code === 'string') wired.code = code;
  if (wired.name === 'BcmsHttpError' && typeof status === 'number') {
    wired.http = { status };
    if (headers !== null && typeof headers === 'object') wired.http.headers = headers as Record<string, string>;
    if (body !== null && typeof body === 'object') wired.http.body = toWire(body) as object;
  }
  const fields: Record<string, string> = {};
  for (const field of PG_FIELDS) {
    const value = (error as Record<string, unknown>)[field];
    if (typeof value === 'string') fields[field] = value;
  }
  if (Object.keys(fields).length > 0) wired.fields = fields;
  return wired;
}

/**
 * A plain Error carrying what crossed (the BcmsHttpError case is the caller's, who knows its class),
 * with a stack of the receiving side's own: the other side's stack names its files.
 */
export function errorFromWire(wired: WireError): Error {
  const error = new Error(wired.message) as Error & Record<string, unknown>;
  error.name = wired.name;
  if (wired.code !== undefined) error.code = wired.code;
  if (wired.fields !== undefined) Object.assign(error, wired.fields);
  return error;
}

/**
 * Messages that leave in one write per turn of the event loop: under load a turn carries many
 * requests, and a write (and the other process's wake-up) per message cost more than the
 * messages themselves. A batch is an array of messages.
 */
export class Outbox<M> {
  private pending: M[] = [];
  private scheduled = false;

  constructor(private readonly write: (batch: M[]) => void) {}

  send(message: M): void {
    this.pending.push(message);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = [];
    this.write(batch);
  };
}

/**
 * An answer's size as the service would send it: its body (JSON text or bytes) and its headers.
 * Bytes cross as base64, whose decoded length is read off the text without decoding it.
 */
export function answerBytes(answer: { headers?: unknown; json?: unknown; bytes?: unknown }): number {
  let size = 0;
  if (typeof answer.json === 'string') size += Buffer.byteLength(answer.json);
  if (typeof answer.bytes === 'string') size += base64Bytes(answer.bytes);
  return size + headerBytes(answer.headers);
}

/** The headers' names and values, in characters. */
function headerBytes(headers: unknown): number {
  let size = 0;
  if (!Array.isArray(headers)) return size;
  for (const header of headers as unknown[]) {
    if (!Array.isArray(header)) continue;
    const [name, value] = header as unknown[];
    size += String(name).length;
    if (Array.isArray(value)) for (const each of value as unknown[]) size += String(each).length;
    else size += String(value).length;
  }
  return size;
}

/**
 * Whether an answer is larger than `limit` bytes (`answerBytes`): a JSON text short enough that
 * even three bytes a unit would fit is not measured (most answers).
 */
export function answerOverLimit(answer: { headers?: unknown; json?: unknown; bytes?: unknown }, limit: number): boolean {
  if (typeof answer.json === 'string' && typeof answer.bytes !== 'string' && answer.json.length * 3 + headerBytes(answer.headers) <= limit) return false;
  return answerBytes(answer) > limit;
}

/** The length of what a base64 text decodes to. */
function base64Bytes(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((text.length * 3) / 4) - padding);
}

/**
 * The largest frame an isolate may send (lib/isolate/channel.ts): an answer of `answerLimit`
 * bytes as base64 (the longest form it takes: see `jsonBytes` in protocol.ts), and a megabyte
 * for the rest of the message (its status, its headers, the batch around it).
 */
export function isolateFrameLimit(answerLimit: number): number {
  return Math.ceil(answerLimit / 3) * 4 + 1024 * 1024;
}

/**
 * The largest object of an extension's log line, as JSON: past it the line keeps its message and
 * level, and its fields are replaced by a note (`logObjectNote`).
 */
export const LOG_OBJECT_MAX_BYTES = 16 * 1024;

/** What a log line's fields become when they are too large to be logged. */
export function logObjectNote(bytes: number): { fields: string } {
  return { fields: `(${bytes} bytes of fields, past the cap of ${LOG_OBJECT_MAX_BYTES}: not logged)` };
}

/**
 * A verified token as it crosses into an isolate: its header and payload, which the handler reads,
 * without its signature, from which (with them) the token itself could be written out again and
 * replayed against the service.
 */
export function unsignedToken(token: JWT): JWT {
  return { header: token.header, payload: token.payload, signature: '' };
}

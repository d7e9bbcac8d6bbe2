import { validateHeaderName, validateHeaderValue, type ServerResponse } from 'node:http';
import { writeBytes, writeJson } from '../http/respond';
import type { AnswerHeaderCheck } from './answer-headers';
import type { WireAnswer } from './protocol';

/** Marks a stand-in of an isolated extension: its pool enforces its time-out (and ends the isolate), not the router's servers. */
export const ISOLATED = Symbol('bcms-extensions.isolated');

/** Whether a handler is such a stand-in. */
export function isIsolated(handler: unknown): boolean {
  return (handler as { [ISOLATED]?: true })[ISOLATED] === true;
}

/** Headers the service writes itself (the body's length, the connection): an isolate's are dropped. */
const SERVICE_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);

/**
 * Whether a header an isolate sent (on an answer, or on an error it threw) may be written: a valid
 * HTTP name and value (a newline in one would make `setHeader` throw where nothing catches it), and
 * not one of the service's own.
 */
export function writableHeader(name: unknown, value: unknown): name is string {
  if (typeof name !== 'string' || SERVICE_HEADERS.has(name.toLowerCase())) return false;
  const values = Array.isArray(value) ? value : [value];
  try {
    validateHeaderName(name);
    for (const each of values) {
      if (typeof each !== 'string') return false;
      validateHeaderValue(name, each);
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * What an isolated handler answered, as the service writes it: the plugin server and the function
 * server hand it to their writers like any handler's value. Its JSON was made in the isolate, so
 * the service's thread only copies it out.
 */
export class IsolateAnswer {
  constructor(
    private readonly answer: WireAnswer,
    /** Its extension (the label of its log lines), and the check of the headers it set. */
    private readonly extension: string,
    private readonly headerCheck: AnswerHeaderCheck,
  ) {}

  /** A plugin method's answer: its status, the headers it set (those the check allows), then its JSON or bytes. */
  write(res: ServerResponse): void {
    if (res.headersSent) return;
    const { status, headers, bytes, sent } = this.answer;
    if (Array.isArray(headers)) {
      for (const [name, value] of headers) {
        if (writableHeader(name, value) && this.headerCheck.allows(this.extension, name, value, res.req)) res.setHeader(name, value);
      }
    }
    const json = this.json();
    if (json !== undefined) {
      writeJson(res, status, json);
      return;
    }
    const body = Buffer.from(typeof bytes === 'string' ? bytes : '', 'base64');
    if (sent !== true) {
      writeBytes(res, status, body);
      return;
    }
    res.writeHead(status, { 'Content-Length': body.length });
    res.end(body);
  }

  /** A function's result, in its envelope. */
  writeResult(res: ServerResponse): void {
    writeJson(res, 200, this.resultBody());
  }

  /** The envelope of a function's result, as `writeResult` writes it (and an Idempotency-Key's record keeps it). */
  resultBody(): string {
    return `{"success":true,"result":${this.json() ?? 'null'}}`;
  }

  /** The handler's JSON text, when it answered a value: as it crossed, or from base64 (see `jsonBytes`). */
  private json(): string | undefined {
    const { json, bytes, jsonBytes } = this.answer;
    if (typeof json === 'string') return json;
    if (jsonBytes === true && typeof bytes === 'string') return Buffer.from(bytes, 'base64').toString('utf8');
    return undefined;
  }
}

import type { IncomingMessage } from 'node:http';
import { BcmsHttpError } from './errors';

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `bodyLimit` as bytes: a number of bytes or a string such as `'1mb'`, `'512kb'`. */
export function parseByteSize(value: number | string, name: string): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
    if (match) return Math.floor(Number(match[1]) * (UNITS[(match[2] ?? 'b').toLowerCase()] as number));
  }
  throw new TypeError(`option ${name} must be a byte count or a size such as "1mb", got ${JSON.stringify(value)}`);
}

/** Whether a request says it carries a body (RFC 9112: Content-Length or Transfer-Encoding). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Reads the raw body, refusing more than `limit` bytes with BODY_TOO_LARGE before reading it when
 * Content-Length says so, and as soon as the stream passes the limit otherwise.
 */
export function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
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

/** Parses a JSON body; an empty body is `undefined`, as Express 5 leaves it. */
export function parseJsonBody(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new BcmsHttpError('INVALID_JSON');
  }
}

/** Whether a Content-Type names JSON (`application/json`, `application/*+json`). */
export function isJsonType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const type = contentType.split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

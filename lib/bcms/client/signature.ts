import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { decodeText, hasBody, nonUtf8Charset, parseJsonText } from '../../http/body';
import { BcmsHttpError, type ErrorCode } from '../../http/errors';
import { isKeyId } from '../../security/api-keys';
import { refuseIfExpired, refuseUnlessAccepted, forbiddenMessage, keyPermits, type Permission } from '../../security/replay';
import { limitKeyCall, signatureAuthOf, type SignatureAuth, type SignatureSettings } from '../../security/signature';

/**
 * Sent with every 401 of a request signed the BCMS client's way: the scheme's parameters. (A
 * private function called with no signature at all gets the HTTP Signature challenge: that
 * scheme is the default.)
 */
export const BCMS_CLIENT_CHALLENGE = Object.freeze({ 'WWW-Authenticate': 'BCMS-Client realm="bcms",params="key nonce timestamp signature"' });

/** What a call signed the client's way may do: call a function or a plugin's route, or read the key's access list. */
export type ClientPermission = Exclude<Permission, { deploy: true }>;

export interface VerifiedClientRequest {
  auth: SignatureAuth;
  /** The JSON body, parsed from the text the signature covers; `{}` for an empty body, as the client signs it. */
  body: unknown;
}

/** `query`: the request's query string, as `clientSignatureQuery` found it. */
export type VerifyClientSignedRequest = (req: Request, query: string, permission: ClientPermission, readBody: () => Promise<Buffer>) => Promise<VerifiedClientRequest>;

const PARAMETERS = ['key', 'nonce', 'timestamp', 'signature'] as const;
type Parameter = (typeof PARAMETERS)[number];
const NONCE_MAX = 128;
const TIMESTAMP = /^\d{1,15}$/;
const SIGNATURE = /^[0-9a-fA-F]{64}$/;
/** An empty body is signed as `{}`: the client signs `{}` when it has no payload (and for its GETs). */
const EMPTY_BODY_SIGNED = Buffer.from(encodeURIComponent('{}')).toString('base64');
const NOTHING = Buffer.alloc(0);
/** What the ledger remembers is marked as this scheme's, apart from HTTP Signatures' signing strings. */
const LEDGER_PREFIX = 'bcms-client\n';

/**
 * The query string of a request signed the BCMS client's way (it has a `signature` parameter), or
 * undefined. Cheap for every other request: one search of the URL, no parsing.
 */
export function clientSignatureQuery(url: string): string | undefined {
  const start = url.indexOf('?');
  if (start === -1) return undefined;
  for (let at = url.indexOf('signature=', start); at !== -1; at = url.indexOf('signature=', at + 1)) {
    const before = url.charCodeAt(at - 1);
    // `?signature=` or `&signature=`, not `&xsignature=`.
    if (before === 0x3f || before === 0x26) return url.slice(start + 1);
  }
  return undefined;
}

/**
 * The BCMS client's signature (`@becomes/cms-client` 3.4.1, `util/security`): hex HMAC-SHA256 with
 * the secret over nonce + timestamp + key + base64(UTF-8(encodeURIComponent(body text))).
 *
 * @example
 * bcmsClientSignature({ secret, nonce: 'a1b2c3', timestamp: '1700000000000', key: id, body: '{"email":"a@example.com"}' });
 */
export function bcmsClientSignature(input: { secret: string | Buffer; nonce: string; timestamp: string; key: string; body: string }): string {
  return createHmac('sha256', input.secret)
    .update(signedText(input.nonce, input.timestamp, input.key, payloadOf(input.body)))
    .digest('hex');
}

/** base64(UTF-8(encodeURIComponent(text))), as the client encodes its payload. */
function payloadOf(text: string): string {
  return Buffer.from(encodeURIComponent(text)).toString('base64');
}

function signedText(nonce: string, timestamp: string, key: string, payload: string): string {
  return nonce + timestamp + key + payload;
}

function refuse(code: ErrorCode, message?: string): BcmsHttpError {
  return new BcmsHttpError(code, message, { ...BCMS_CLIENT_CHALLENGE });
}

/** The four parameters, each present once and of its shape; a 401 naming the first that is not. */
function readParameters(query: string): Record<Parameter, string> {
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(query);
  } catch {
    throw refuse('SIGNATURE_INVALID', 'Malformed query string.');
  }
  const found = {} as Record<Parameter, string>;
  for (const name of PARAMETERS) {
    const values = params.getAll(name);
    if (values.length > 1) throw refuse('SIGNATURE_INVALID', `The query parameter "${name}" appears ${values.length} times; send it once.`);
    const value = values[0];
    if (value === undefined || value === '') {
      throw refuse('SIGNATURE_INVALID', `The query parameter "${name}" is missing: a call signed the BCMS client's way carries key, nonce, timestamp and signature.`);
    }
    found[name] = value;
  }
  if (found.nonce.length > NONCE_MAX) throw refuse('SIGNATURE_INVALID', `The nonce is longer than ${NONCE_MAX} characters.`);
  if (!TIMESTAMP.test(found.timestamp)) throw refuse('SIGNATURE_INVALID', 'The timestamp must be the time in milliseconds since 1970, in digits (Date.now()).');
  if (!SIGNATURE.test(found.signature)) throw refuse('SIGNATURE_INVALID', 'The signature must be 64 hexadecimal digits (an HMAC-SHA256).');
  return found;
}

/**
 * Verifies calls signed as the BCMS client signs them (docs/signed-calls.md, "Calling from the BCMS client"):
 * the key opted in (`bcmsClient: true`), the timestamp within the clock skew either way, the HMAC
 * over the body exactly as received, compared in constant time, and the key's state and
 * permission; the signature is remembered in the ledger HTTP Signatures use, so it is accepted
 * once, on every instance, whichever route it is sent to.
 *
 * The body is the raw bytes, read as UTF-8 (another charset is refused: nothing signed fixes it):
 * the client signs `JSON.stringify(payload)` and sends that very text, and the handler gets what
 * the signature covers, never a re-serialisation of a parsed body (which many different bodies share).
 */
export function createClientSignatureVerifier(options: SignatureSettings): VerifyClientSignedRequest {
  const { memory, clockSkewSeconds, limitKey } = options;
  const skewMs = clockSkewSeconds * 1000;

  return async function verifyClientSignedRequest(req, query, permission, readBody) {
    const params = readParameters(query);
    const now = Date.now();
    const timestamp = Number(params.timestamp);
    const age = now - timestamp;
    if (Math.abs(age) > skewMs) {
      const off = age > 0 ? `${Math.floor(age / 1000)} s old` : `${Math.floor(-age / 1000)} s in the future`;
      throw refuse('SIGNATURE_EXPIRED', `Request timestamp is ${off}; this service accepts ${clockSkewSeconds} s either way. Its clock reads ${now} (${new Date(now).toISOString()}).`);
    }

    const key = isKeyId(params.key) ? await memory.keyFor(params.key.toLowerCase(), refuse) : null;
    if (key === null) throw refuse('SIGNATURE_INVALID', 'Unknown key.');
    if (!key.bcmsClient || key.secret === null) {
      throw refuse(
        'SIGNATURE_INVALID',
        "This API key does not accept the BCMS client's signed calls. Create a key that does with bcmsClient: true " + '(bcms-ext keys create --bcms-client), or sign with an HTTP Signature.',
      );
    }

    // The scheme signs no header, so nothing fixes a charset: a body it signs is read as UTF-8,
    // as the client sends it, and never as other text (SECURITY.md).
    const charset = hasBody(req) ? nonUtf8Charset(req.headers['content-type']) : undefined;
    if (charset !== undefined) {
      throw refuse(
        'SIGNATURE_INVALID',
        `The body's Content-Type declares charset "${charset}", and the BCMS client's signature cannot cover Content-Type: ` +
          'send the body as UTF-8 (no charset, or charset=utf-8), or sign with an HTTP Signature that covers content-type.',
      );
    }
    // No body (the client's GETs, and its POSTs without a payload, which axios types
    // application/x-www-form-urlencoded) is what the client signed as `{}`.
    const raw = hasBody(req) ? await readBody() : NOTHING;
    let text: string | undefined;
    let payload = EMPTY_BODY_SIGNED;
    if (raw.length > 0) {
      text = decodeText(raw, req.headers['content-type']);
      try {
        payload = payloadOf(text);
      } catch {
        throw refuse('SIGNATURE_INVALID', 'The signature does not verify with this key.'); // a lone surrogate: nothing the client signs
      }
    }
    const expected = createHmac('sha256', key.secret)
      .update(signedText(params.nonce, params.timestamp, params.key, payload))
      .digest();
    const given = Buffer.from(params.signature, 'hex');
    if (!timingSafeEqual(given, expected)) throw refuse('SIGNATURE_INVALID', 'The signature does not verify with this key.');
    refuseIfExpired(key, refuse, now);

    const body: unknown = text === undefined ? {} : parseJsonText(text);
    if (!keyPermits(key, permission)) throw new BcmsHttpError('KEY_FORBIDDEN', forbiddenMessage(permission));
    // The key's rate limit, once the signature verified, before the ledger records it (as HTTP Signatures).
    await limitKeyCall(limitKey, key.id, permission);

    // The signature's bytes (hex is case-insensitive, so not its text) name the request: its HMAC
    // covers nonce, timestamp, key and body. Remembered until the timestamp leaves the window.
    const expiresAt = new Date(timestamp + skewMs + 1000);
    const acceptance = await memory.ledger.accept(key.id, LEDGER_PREFIX + given.toString('hex'), permission, expiresAt);
    refuseUnlessAccepted(acceptance, { permission, forget: () => memory.forget(key.id), refuse, unknownKey: 'Unknown key.' });
    memory.purgeNowAndThen(now);
    return { auth: signatureAuthOf(key), body };
  };
}

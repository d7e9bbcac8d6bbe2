import { createHmac, timingSafeEqual, verify, type KeyObject } from 'node:crypto';
import type { ClientRequest } from 'node:http';
import type { Request } from 'express';
import type * as HttpSignature from 'http-signature';
import { hasBody, nonUtf8Charset } from '../http/body';
import { BcmsHttpError, type ErrorCode } from '../http/errors';
import { HEADER_ALGORITHM, type SignatureAlgorithm } from './algorithms';
import { isKeyId } from './api-keys';
import { bodyMatches, claimedSha256, type DigestHeader } from './digest';
import { refuseIfExpired, refuseUnlessAccepted, forbiddenMessage, keyPermits, type KeyMaterial, type Permission, type SignatureMemory } from './replay';

/** Sent with every signature 401: the scheme, and the headers a signature must cover. */
export const SIGNATURE_CHALLENGE = Object.freeze({ 'WWW-Authenticate': 'Signature realm="bcms",headers="(request-target) date digest"' });

/** The API key a verified request was signed with, as a handler's `auth` shows it (never its secret). */
export interface SignatureAuth {
  type: 'signature';
  key: { id: string; name: string; algorithm: SignatureAlgorithm; functions: readonly string[]; plugins: readonly string[] };
}

/** The key as a handler's `auth` shows it: what it may call, never its secret or public key. */
export function signatureAuthOf(key: KeyMaterial): SignatureAuth {
  return { type: 'signature', key: { id: key.id, name: key.name, algorithm: key.algorithm, functions: key.functions, plugins: key.plugins } };
}

/** What an HTTP Signature must allow: calling one function or one plugin's routes, or deploying. */
export type SignaturePermission = Exclude<Permission, { keyAccess: true }>;

export interface VerifiedRequest {
  auth: SignatureAuth;
  /** The raw body, whose digest was checked. */
  body: Buffer;
}

export type VerifySignedRequest = (req: Request, permission: SignaturePermission, readBody: () => Promise<Buffer>) => Promise<VerifiedRequest>;

const SIGNATURE_SCHEME = /^signature(?:\s|$)/i;
/** The errors http-signature's parser throws about a header (their messages are safe to show). */
const PARSER_ERRORS = new Set(['ExpiredRequestError', 'InvalidHeaderError', 'InvalidParamsError', 'MissingHeaderError', 'StrictParsingError', 'InvalidAlgorithmError']);

/**
 * What an error message echoes of the Authorization header (a parameter's value, a header name),
 * without anything long enough to be a credential: a client that sent two credentials in one
 * header (a token merged into a signature's parameter) must never get one of them back in the
 * answer. Names of algorithms and headers are short; tokens, secrets and signatures are not.
 */
export function withoutCredentials(text: string): string {
  return text.replace(/[\w\-+/=.~]{24,}/g, '[redacted]');
}

/** http-signature, loaded at the first signed request: 40 ms of every start saved for apps that never get one. */
let httpSignature: typeof HttpSignature | undefined;
function signatureParser(): typeof HttpSignature {
  httpSignature ??= require('http-signature') as typeof HttpSignature;
  return httpSignature;
}

/** Whether a request says it is signed (`Authorization: Signature ...`). */
export function isSignedRequest(req: Request): boolean {
  const header = req.headers.authorization;
  return header !== undefined && SIGNATURE_SCHEME.test(header);
}

function refuse(code: ErrorCode, message?: string): BcmsHttpError {
  return new BcmsHttpError(code, message, { ...SIGNATURE_CHALLENGE });
}

/** What every API-key signature scheme of a router shares (a layer's too: lib/layer.ts). */
export interface SignatureSettings {
  memory: SignatureMemory;
  clockSkewSeconds: number;
  /**
   * Counts a function call of the key (`key:<id>`) under `rateLimit.key`, rejecting with 429 once
   * its points are spent: called once the signature verified, before the ledger records it, so that
   * a flood of one key's calls leaves no row behind. Unset: no limit.
   */
  limitKey?: (subject: string) => Promise<void>;
}

/** Counts a verified call under the key's rate limit: function calls only (plugin routes and deploys are not limited). */
export function limitKeyCall(limitKey: SignatureSettings['limitKey'], keyId: string, permission: Permission): Promise<void> | undefined {
  return limitKey !== undefined && 'function' in permission ? limitKey(`key:${keyId}`) : undefined;
}

/**
 * Verifies signed requests (docs/signed-calls.md): the draft-cavage
 * signature over `(request-target)`, `date` and the body's digest (and `content-type`, for a body
 * not in UTF-8), the date within the clock skew, the digest against the raw body, and the key's
 * state and permission, remembering the signature in Postgres so that it is accepted once on
 * every instance.
 */
export function createSignatureVerifier(options: SignatureSettings): VerifySignedRequest {
  const { memory, clockSkewSeconds, limitKey } = options;

  return async function verifySignedRequest(req, permission, readBody) {
    let parsed: HttpSignature.ParseResponse;
    try {
      // http-signature signs `req.url`; behind app.use('/prefix', ...) Express has cut it, while
      // the client signed the whole path. Its own date check is off (`clockSkew: 0` would mean
      // 300 there): ours below works at the Date header's one-second resolution.
      const target = { method: req.method, url: req.originalUrl ?? req.url, headers: req.headers, httpVersion: req.httpVersion };
      parsed = signatureParser().parseRequest(target as unknown as ClientRequest, { clockSkew: Number.MAX_SAFE_INTEGER, headers: [] });
    } catch (error) {
      // http-signature's own errors say what is wrong with the header; anything else is internal.
      const known = PARSER_ERRORS.has((error as Error)?.name);
      throw refuse('SIGNATURE_INVALID', known ? `Malformed signature: ${withoutCredentials((error as Error).message)}.` : 'Malformed signature.');
    }
    const { keyId, algorithm: claimed, signature, headers: signed } = parsed.params;
    // The parser reads `name=123` as a number: every parameter must be the quoted string it should be.
    if (typeof keyId !== 'string' || typeof claimed !== 'string' || typeof signature !== 'string' || !signed.every((name) => typeof name === 'string')) {
      throw refuse('SIGNATURE_INVALID', 'Malformed signature: keyId, algorithm, headers and signature must be quoted strings.');
    }
    const digestHeader: DigestHeader | undefined = signed.includes('content-digest') ? 'content-digest' : signed.includes('digest') ? 'digest' : undefined;
    if (!signed.includes('(request-target)') || !signed.includes('date') || digestHeader === undefined) {
      throw refuse('SIGNATURE_INVALID', `The signature must cover (request-target), date and digest (or content-digest); it covers "${withoutCredentials(signed.join(' '))}".`);
    }
    // The digest fixes the bytes, the charset how they are read: unsigned, a charset other than
    // UTF-8 could be swapped in to make the same bytes other text (SECURITY.md).
    const charset = hasBody(req) && !signed.includes('content-type') ? nonUtf8Charset(req.headers['content-type']) : undefined;
    if (charset !== undefined) {
      throw refuse(
        'SIGNATURE_INVALID',
        `The body's Content-Type declares charset "${charset}", which the signature does not cover: sign content-type too ` +
          `(headers="(request-target) date digest content-type"), or send the body as UTF-8 (no charset, or charset=utf-8).`,
      );
    }

    const now = Date.now();
    const dateSeconds = Math.floor(Date.parse(req.headers.date as string) / 1000);
    if (!Number.isFinite(dateSeconds)) throw refuse('SIGNATURE_INVALID', 'The Date header is not a date: send an HTTP date (RFC 9110), such as "Sun, 22 Nov 2026 08:00:00 GMT".');
    const age = Math.floor(now / 1000) - dateSeconds;
    if (Math.abs(age) > clockSkewSeconds) {
      const off = age > 0 ? `${age} s old` : `${-age} s in the future`;
      throw refuse('SIGNATURE_EXPIRED', `Request Date is ${off}; this service accepts ${clockSkewSeconds} s either way. Its clock reads ${new Date(now).toUTCString()}.`);
    }

    const key = isKeyId(keyId) ? await memory.keyFor(keyId.toLowerCase(), refuse) : null;
    if (key === null) throw refuse('SIGNATURE_INVALID', 'Unknown keyId.');
    const algorithm = HEADER_ALGORITHM[key.algorithm];
    if (claimed !== algorithm) throw refuse('SIGNATURE_INVALID', `This key signs with algorithm "${algorithm}"; the request says "${withoutCredentials(claimed)}".`);
    if (!signatureVerifies(parsed.signingString, signature, key)) throw refuse('SIGNATURE_INVALID', 'The signature does not verify with this key.');
    refuseIfExpired(key, refuse, now);
    // What a key may do never changes: refuse before reading a body it may not send (the database
    // still has the last word below, on a key blocked or deleted meanwhile).
    if (!keyPermits(key, permission)) throw new BcmsHttpError('KEY_FORBIDDEN', forbiddenMessage(permission));
    // The key's rate limit, once the signature verified: before its body is read, before the ledger records it.
    await limitKeyCall(limitKey, key.id, permission);

    const body = await readBody();
    const claimedDigest = claimedSha256(digestHeader, req.headers[digestHeader] as string);
    if (claimedDigest === undefined) {
      const shape = digestHeader === 'digest' ? 'SHA-256=<base64>' : 'sha-256=:<base64>:';
      throw refuse('SIGNATURE_INVALID', `The ${digestHeader} header must carry ${shape}, the SHA-256 of the body.`);
    }
    if (!bodyMatches(body, claimedDigest)) throw refuse('DIGEST_MISMATCH');

    // What was signed, not how the signature is spelled: base64 has many spellings of one signature
    // (padding, whitespace), and the signing string, with its date and nonce, names the request.
    // Remembered until the date leaves the window: a copy sent later is refused as expired instead.
    const expiresAt = new Date((dateSeconds + clockSkewSeconds + 1) * 1000);
    const acceptance = await memory.ledger.accept(key.id, parsed.signingString, permission, expiresAt);
    refuseUnlessAccepted(acceptance, { permission, forget: () => memory.forget(key.id), refuse, unknownKey: 'Unknown keyId.' });
    memory.purgeNowAndThen(now);
    return { auth: signatureAuthOf(key), body };
  };
}

/**
 * HMAC compared in constant time (crypto.timingSafeEqual); public keys through node:crypto, which
 * (unlike the tweetnacl code http-signature verifies Ed25519 with) refuses a non-canonical Ed25519
 * signature, one more spelling of a signature already sent.
 */
function signatureVerifies(signingString: string, signature: string, key: KeyMaterial): boolean {
  const given = Buffer.from(signature, 'base64');
  if (key.secret !== null) {
    const expected = createHmac('sha256', key.secret).update(signingString).digest();
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
  try {
    return verify(key.algorithm === 'rsa-sha256' ? 'sha256' : null, Buffer.from(signingString), key.publicKey as KeyObject, given);
  } catch {
    return false; // a signature that is not even well-formed for the key
  }
}

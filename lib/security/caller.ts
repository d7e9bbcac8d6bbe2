import type { Request } from 'express';
import type { BcmsFunctionAuth, BcmsFunctionKeyAuth } from '../function/types';
import { bodyLimitOf, hasBody, isJsonType, parseJsonBody, RAW_BODY, readRawBody } from '../http/body';
import { BcmsHttpError } from '../http/errors';
import { type Logger, redactUrl } from '../logger';
import type { UserIdentifier } from './auth';
import { hasBearerToken } from './jwt';
import { tokenSubject } from './rate-limit';
import { isSignedRequest, SIGNATURE_CHALLENGE, type SignatureAuth, type VerifySignedRequest } from './signature';
import { type JWT, JWTPermissionName, tokenAllows } from './token';

/**
 * An API-key signature scheme besides HTTP Signatures (a layer's: the BCMS client's query string).
 * `find` returns what of the request it verifies, or `undefined` when the request carries none of
 * it; `verify` checks it for the permission against the body's bytes, and resolves to the key and
 * the body those bytes hold.
 */
export interface KeySignatureScheme {
  find(req: Request): unknown;
  verify(req: Request, found: unknown, permission: { function: string } | { plugin: string }, readBody: () => Promise<Buffer>): Promise<{ auth: SignatureAuth; body: unknown }>;
}

/** How a router verifies API-key signatures: HTTP Signatures, then the layers' schemes. */
export interface KeyVerifiers {
  verifySignedRequest: VerifySignedRequest;
  keySchemes: readonly KeySignatureScheme[];
}

/**
 * Who calls a private function: an HTTP Signature of an API key that lists it, a layer's scheme
 * (the BCMS client's query-string signature of a key that opted in), or a JWT whose role holds EXECUTE
 * (the app's user, `auth.fromRequest`, counts as one: tried after a bearer token and a signature). Rejects with
 * the 401 or 403 that says what is missing. A signed request's body is read and checked here, and
 * left parsed in `req.body`.
 */
export type IdentifyCaller = (req: Request, name: string) => Promise<BcmsFunctionAuth>;

export function createCallerCheck(
  deps: KeyVerifiers & {
    /** Who the request's user is: the app's (`auth.fromRequest`), then a bearer JWT. */
    verifyAccessToken: UserIdentifier;
    /** The function body, as the function route reads it (type and size checked). */
    readBody: (req: Request) => Promise<Buffer>;
    logger: Logger;
    /** `rateLimit.key` (a signature's is counted by its verifier): a bearer token's call counts as its user. */
    limitKey?: (subject: string) => Promise<void>;
  },
): IdentifyCaller {
  const { verifyAccessToken, readBody, logger, limitKey } = deps;

  /** A user's call (a bearer token, or the app's user): some role of theirs must hold EXECUTE. */
  async function userCall(req: Request): Promise<BcmsFunctionAuth> {
    let accessToken: JWT;
    try {
      accessToken = await verifyAccessToken(req);
    } catch (error) {
      if (!(error instanceof BcmsHttpError)) throw error;
      throw new BcmsHttpError('TOKEN_INVALID', error.code === 'TOKEN_MISSING' ? undefined : error.message, {
        'WWW-Authenticate': 'Bearer error="invalid_token"',
      });
    }
    if (!tokenAllows(accessToken.payload, undefined, JWTPermissionName.EXECUTE)) {
      throw new BcmsHttpError('TOKEN_FORBIDDEN', 'Token has no role with the EXECUTE permission.');
    }
    // Every token of one user shares the count, as an API key's signatures do.
    if (limitKey !== undefined) await limitKey(tokenSubject(accessToken));
    return { type: 'jwt', accessToken, ...accessToken };
  }

  return async function identifyCaller(req, name) {
    if (hasBearerToken(req)) return userCall(req);
    // Only now, for a private function without a token: an HTTP Signature, then a layer's scheme.
    // A host parser that ran first with `verify: keepRawBody` kept the bytes: the signature is checked over them.
    const kept = (req as { [RAW_BODY]?: Buffer })[RAW_BODY];
    const bytes = (): Promise<Buffer> => (kept === undefined ? readBody(req) : Promise.resolve(kept));
    const signed = await verifyKeySignature(deps, req, { function: name }, bytes, () => {
      if (kept === undefined && bodyWasRead(req)) throw refuseParsedBody(req, logger);
    });
    if (signed !== undefined) {
      req.body = signed.body(); // parsed from the bytes that were signed
      return signed.auth;
    }
    // Neither: the app's own user (auth.fromRequest: its session, its req.user) calls as a token's user would.
    if (verifyAccessToken.appUser !== undefined && (await verifyAccessToken.appUser(req)) !== null) return userCall(req);
    const scheme = req.headers.authorization?.trim().split(/\s/, 1)[0];
    const message = scheme
      ? `This function is private, and the ${scheme} scheme is not accepted: sign the request (Authorization: Signature) or send a bearer token whose role holds EXECUTE.`
      : undefined;
    throw new BcmsHttpError('SIGNATURE_REQUIRED', message, { ...SIGNATURE_CHALLENGE });
  };
}

/**
 * The API key that signed a request to a plugin route, checked for the plugin: an HTTP Signature,
 * or a layer's scheme, as a function call accepts them (the same ledger: a signature is accepted once, on every instance, on any route).
 * Resolves to `undefined` when the request carries neither, so that the guard answers the 401;
 * rejects with the 401 or 403 that says what is wrong. The body, which the plugin server read
 * and parsed before the guard ran, is checked as the bytes it kept (`RAW_BODY`).
 */
export type IdentifyPluginKey = (req: Request, plugin: string) => Promise<BcmsFunctionKeyAuth | undefined>;

export function createPluginKeyCheck(
  deps: KeyVerifiers & {
    bodyLimit: number;
    bodyTimeoutMs: number;
    logger: Logger;
  },
): IdentifyPluginKey {
  const { bodyLimit, bodyTimeoutMs, logger } = deps;

  /** The bytes to check: those the plugin server kept; else read now (a GET's body), unless a host parser took them. */
  function readBody(req: Request): Promise<Buffer> {
    const kept = (req as { [RAW_BODY]?: Buffer })[RAW_BODY];
    if (kept !== undefined) return Promise.resolve(kept);
    if (!hasBody(req)) return Promise.resolve(Buffer.alloc(0));
    if (bodyWasRead(req)) return Promise.reject(refuseParsedBody(req, logger));
    const type = req.headers['content-type'];
    if (type !== undefined && !isJsonType(type)) {
      // Verified, its bytes would be gone before the handler could read them: a signed body is JSON.
      return Promise.reject(new BcmsHttpError('UNSUPPORTED_MEDIA_TYPE', 'A signed request to a plugin carries a JSON body (Content-Type: application/json), or none.'));
    }
    return readRawBody(req, bodyLimitOf(req, bodyLimit), bodyTimeoutMs);
  }

  return async function identifyPluginKey(req, plugin) {
    const signed = await verifyKeySignature(deps, req, { plugin }, () => readBody(req));
    if (signed === undefined) return undefined;
    // The plugin server parsed the same bytes already, unless they arrived with a GET.
    if (req.body === undefined && hasBody(req)) req.body = signed.body();
    return signed.auth;
  };
}

/**
 * The API-key signature a request carries, whichever scheme: an HTTP Signature (`Authorization:
 * Signature`), else the first layer scheme that finds its part (looked for only then). Checked for
 * `permission` against `readBody()`'s bytes; resolves to the key in BCMS's shape and the body
 * those bytes hold (parsed when asked; `undefined` for an empty HTTP-Signature body), or to
 * `undefined` when the request carries none. `before` runs once a scheme is found, before
 * anything is verified.
 */
async function verifyKeySignature(
  verify: KeyVerifiers,
  req: Request,
  permission: { function: string } | { plugin: string },
  readBody: () => Promise<Buffer>,
  before?: () => void,
): Promise<{ auth: BcmsFunctionKeyAuth; body: () => unknown } | undefined> {
  if (isSignedRequest(req)) {
    before?.();
    const { auth, body } = await verify.verifySignedRequest(req, permission, readBody);
    return { auth: withBcmsShape(auth), body: () => parseJsonBody(body, req.headers['content-type']) };
  }
  for (const scheme of verify.keySchemes) {
    const found = scheme.find(req);
    if (found === undefined) continue;
    before?.();
    const { auth, body } = await scheme.verify(req, found, permission, readBody);
    return { auth: withBcmsShape(auth), body: () => body };
  }
  return undefined;
}

/**
 * The bytes a signature is checked over, for the router's own signed routes (deployments, the event
 * and job lists, the BCMS client's access list): those a host parser that ran first kept
 * (`verify: keepRawBody`), else `read()` of the stream. A body a host parser consumed without
 * keeping it is refused with 500 BODY_ALREADY_PARSED, the log saying what to change, rather than
 * checked as empty (which is a digest mismatch that no key or clock can fix).
 */
export function signedBodyOf(req: Request, read: () => Promise<Buffer>, logger: Logger): Promise<Buffer> {
  const kept = (req as { [RAW_BODY]?: Buffer })[RAW_BODY];
  if (kept !== undefined) return Promise.resolve(kept);
  if (hasBody(req) && bodyWasRead(req)) return Promise.reject(refuseParsedBody(req, logger));
  return read();
}

/** Signed bodies are checked against the raw bytes: a body parser that ran before the router took them. */
function refuseParsedBody(req: Request, logger: Logger): BcmsHttpError {
  logger.error(
    // The URL without the credentials a signed query carries (the BCMS client's signature, still good for a replay).
    { requestId: req.res?.getHeader('x-request-id'), path: redactUrl(req.originalUrl) },
    'bcms-extensions: a body parser ran before the router, so a signed body cannot be checked against its signature. ' +
      'Mount the router before express.json() and other body parsers: app.use(bcmsExtensions(...)) first; or give the parser verify: keepRawBody (express.json({ verify: keepRawBody })).',
  );
  return new BcmsHttpError('BODY_ALREADY_PARSED');
}

/** Whether a body parser already consumed the request (body-parser marks it `_body`). */
function bodyWasRead(req: Request): boolean {
  return req.body !== undefined || (req as { _body?: unknown })._body === true || req.readableEnded;
}

/** The key as BCMS hands it to a function or a plugin guard (`_id`, `name`, `blocked`, `access`), beside ours; never its secret. */
export function withBcmsShape(auth: SignatureAuth): BcmsFunctionKeyAuth {
  const { key } = auth;
  const access = { templates: [] as [], functions: key.functions.map((name) => ({ name })), plugins: key.plugins.map((name) => ({ name })) };
  return { ...auth, _id: key.id, name: key.name, blocked: false, access };
}

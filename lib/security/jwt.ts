import { createPublicKey, createSecretKey } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import type { Params as ExpressJwtParams } from 'express-jwt';
import type { Algorithm } from 'jsonwebtoken';
import { BcmsHttpError } from '../http/errors';
import { bearerToken, VerifiedTokenCache } from './token-cache';
import type { JWT } from './token';

/** The `jwt` option of the router. */
export interface JwtOptions {
  /** Verifies tokens: a string, a Buffer, or express-jwt's secret callback. */
  secret?: ExpressJwtParams['secret'];
  /** Accepted algorithms; `none` is always refused. Default `['HS256']`. */
  algorithms?: Algorithm[];
  issuer?: string | string[];
  audience?: string | string[];
}

/** Verifies the bearer token of a request, or throws TOKEN_MISSING / TOKEN_INVALID. */
export interface AccessTokenVerifier {
  (request: IncomingMessage): Promise<JWT>;
  /**
   * The request's token when it was verified before and is still valid, at once (no promise), as
   * the verifier would resolve it (`req.auth` set too); undefined when it must be verified.
   */
  known?(request: IncomingMessage): JWT | undefined;
}

const ALGORITHMS = new Set(['HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512']);
const INVALID = 'Invalid token.';
const EXPIRED = 'Token has expired.';
const BEARER_CHALLENGE = { 'WWW-Authenticate': 'Bearer' };
const INVALID_CHALLENGE = { 'WWW-Authenticate': 'Bearer error="invalid_token"' };

function tokenMissing(): BcmsHttpError {
  return new BcmsHttpError('TOKEN_MISSING', undefined, BEARER_CHALLENGE);
}

function tokenInvalid(message: string): BcmsHttpError {
  return new BcmsHttpError('TOKEN_INVALID', message, INVALID_CHALLENGE);
}

/** Whether the request's Authorization header uses the Bearer scheme. */
export function hasBearerToken(request: IncomingMessage): boolean {
  const header = request.headers.authorization;
  return header !== undefined && /^bearer\b/i.test(header);
}

/**
 * Builds the verifier of one router on express-jwt. express-jwt reports every failure as an
 * `UnauthorizedError` with a `code`; this maps them to the bodies docs/http.md gives, never to HTML.
 */
export function createAccessTokenVerifier(options: JwtOptions): AccessTokenVerifier {
  const algorithms = options.algorithms ?? ['HS256'];
  if (!Array.isArray(algorithms) || algorithms.length === 0) {
    throw new TypeError('option jwt.algorithms must be a non-empty array of JWT algorithms');
  }
  if (algorithms.some((name) => String(name).toLowerCase() === 'none')) {
    throw new TypeError('option jwt.algorithms must not contain "none": unsigned tokens are never accepted');
  }
  const unknown = algorithms.find((name) => !ALGORITHMS.has(name));
  if (unknown !== undefined) {
    throw new TypeError(`option jwt.algorithms: unknown algorithm ${JSON.stringify(unknown)} (known: ${[...ALGORITHMS].join(', ')})`);
  }
  const secret = options.secret;
  if (secret === undefined || secret === null || secret === '') {
    // No key: nothing can be verified, so every guarded endpoint answers 401.
    return async (request) => {
      throw hasBearerToken(request) ? tokenInvalid(INVALID) : tokenMissing();
    };
  }
  const verified = new WeakMap<object, JWT>();
  const params: ExpressJwtParams = {
    secret: toKeyObject(secret),
    algorithms: [...algorithms],
    credentialsRequired: true,
    // Called only after the signature and claims checked out: the one place express-jwt hands over
    // the whole decoded token (header, payload, signature), which the handler gets as `accessToken`.
    isRevoked: (req, token) => {
      if (token) verified.set(req, token as unknown as JWT);
      return false;
    },
  };
  if (options.issuer !== undefined) params.issuer = options.issuer as ExpressJwtParams['issuer'];
  if (options.audience !== undefined) params.audience = options.audience as ExpressJwtParams['audience'];
  // express-jwt (and jsonwebtoken under it) is loaded at the first token to verify, not at start:
  // 50 ms of every start, and never needed while verified tokens come from the cache.
  let middleware: ReturnType<typeof import('express-jwt').expressjwt> | undefined;
  const cache = typeof secret === 'function' ? undefined : new VerifiedTokenCache(TOKEN_CACHE_SIZE);

  const verifyWithExpressJwt = (request: IncomingMessage) =>
    new Promise<JWT>((resolve, reject) => {
      const settle = (error?: unknown): void => {
        if (error === undefined) {
          const token = verified.get(request);
          verified.delete(request);
          if (token === undefined) reject(tokenInvalid(INVALID));
          else resolve(token);
          return;
        }
        if (!(error instanceof expressJwt().UnauthorizedError)) {
          reject(error);
        } else if (error.code === 'credentials_required' || error.code === 'credentials_bad_scheme') {
          reject(tokenMissing());
        } else {
          reject(tokenInvalid(error.inner instanceof jsonWebToken().TokenExpiredError ? EXPIRED : INVALID));
        }
      };
      // express-jwt also sets `req.auth` (the payload); handlers read `accessToken` instead.
      middleware ??= expressJwt().expressjwt(params);
      void middleware(request as Request, undefined as never, settle);
    });

  if (cache === undefined) return verifyWithExpressJwt;
  /** The cached token, set as express-jwt would have set it: its convention is `req.auth`, the payload. */
  const cached = (request: IncomingMessage, token: string): JWT | undefined => {
    const hit = cache.get(token, Math.floor(Date.now() / 1000));
    if (hit !== undefined) (request as Request & { auth?: unknown }).auth = hit.payload;
    return hit;
  };
  const known = (request: IncomingMessage): JWT | undefined => {
    const token = bearerToken(request);
    return token === undefined ? undefined : cached(request, token);
  };
  const verify = async (request: IncomingMessage): Promise<JWT> => {
    const token = bearerToken(request);
    const hit = token === undefined ? undefined : cached(request, token);
    if (hit !== undefined) return hit;
    const accessToken = await verifyWithExpressJwt(request);
    return token === undefined ? accessToken : cache.set(token, accessToken);
  };
  return Object.assign(verify, { known });
}

const expressJwt = (): typeof import('express-jwt') => require('express-jwt') as typeof import('express-jwt');
const jsonWebToken = (): typeof import('jsonwebtoken') => require('jsonwebtoken') as typeof import('jsonwebtoken');

/** How many verified tokens one router remembers: a few MB at most. */
const TOKEN_CACHE_SIZE = 10_000;

/**
 * Turns a string or Buffer secret into a KeyObject once. Given a string, jsonwebtoken first tries
 * it as a public key on every request and only then as a secret: a thrown crypto error per request,
 * most of the guard's cost. A PEM text becomes a public key (RS*, ES*, PS*, EdDSA).
 */
function toKeyObject(secret: NonNullable<ExpressJwtParams['secret']>): ExpressJwtParams['secret'] {
  if (typeof secret !== 'string' && !Buffer.isBuffer(secret)) return secret;
  const bytes = Buffer.from(secret);
  if (!bytes.includes('-----BEGIN ')) return createSecretKey(bytes);
  try {
    return createPublicKey(bytes);
  } catch (error) {
    throw new TypeError(`option jwt.secret looks like a PEM key but cannot be read as one: ${(error as Error).message}`);
  }
}

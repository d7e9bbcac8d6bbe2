import type { IncomingMessage } from 'node:http';
import type { JWT } from './token';

/**
 * Tokens that express-jwt verified, remembered until they expire, so that a session's repeated
 * calls with one token pay for one verification (Envoy's jwt_authn keeps the same kind of cache).
 * Only for a fixed key: with a secret callback the key may change, so nothing is remembered.
 * Entries are frozen: every request that presents the token shares the one object.
 */
export class VerifiedTokenCache {
  private readonly entries = new Map<string, JWT>();

  constructor(private readonly capacity: number) {}

  get(token: string, nowSeconds: number): JWT | undefined {
    const hit = this.entries.get(token);
    if (hit === undefined) return undefined;
    const { exp, nbf } = hit.payload as { exp?: unknown; nbf?: unknown };
    // The same instants jsonwebtoken checks: expired once now >= exp, not yet valid while now < nbf.
    if ((typeof exp === 'number' && nowSeconds >= exp) || (typeof nbf === 'number' && nowSeconds < nbf)) {
      this.entries.delete(token);
      return undefined;
    }
    return hit;
  }

  set(token: string, verified: JWT): JWT {
    if (this.entries.size >= this.capacity) {
      // Oldest first: a Map iterates in insertion order.
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    const frozen = deepFreeze(verified);
    this.entries.set(token, frozen);
    return frozen;
  }

  get size(): number {
    return this.entries.size;
  }
}

/**
 * The token of `Authorization: Bearer <token>`, split as express-jwt splits it (the scheme in any
 * case, one space, a token with no space in it). By character codes: it runs on every guarded request.
 */
export function bearerToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined || header.length < 8 || header.charCodeAt(6) !== 32) return undefined;
  for (let i = 0; i < 6; i++) {
    // Lower-cased ASCII letters (| 32) against "bearer".
    if ((header.charCodeAt(i) | 32) !== BEARER.charCodeAt(i)) return undefined;
  }
  return header.indexOf(' ', 7) === -1 ? header.slice(7) : undefined;
}

const BEARER = 'bearer';

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

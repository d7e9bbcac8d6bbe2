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

/** The token of `Authorization: Bearer <token>`, split as express-jwt splits it. */
export function bearerToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const parts = header.split(' ');
  return parts.length === 2 && /^Bearer$/i.test(parts[0] as string) && parts[1] !== '' ? parts[1] : undefined;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

import { createHash, timingSafeEqual } from 'node:crypto';

/** The digest headers a signed request may carry; the one it signs is checked against the body. */
export type DigestHeader = 'digest' | 'content-digest';

/** SHA-256 in hex: what names a bundle's code, a signed request's signing string, a body. */
export function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** SHA-256 of the raw body, as `Digest: SHA-256=<base64>` (RFC 3230). */
export function digestHeader(body: Buffer | string): string {
  return `SHA-256=${createHash('sha256').update(body).digest('base64')}`;
}

/** SHA-256 of the raw body, as `Content-Digest: sha-256=:<base64>:` (RFC 9530). */
export function contentDigestHeader(body: Buffer | string): string {
  return `sha-256=:${createHash('sha256').update(body).digest('base64')}:`;
}

/**
 * The SHA-256 a digest header claims, as bytes; `undefined` when it carries none.
 * `Digest` is a list of `algorithm=base64` (RFC 3230); `Content-Digest` a dictionary of
 * `algorithm=:base64:` (RFC 9530). Algorithm names are case-insensitive.
 */
export function claimedSha256(header: DigestHeader, value: string): Buffer | undefined {
  for (const member of value.split(',')) {
    const equals = member.indexOf('=');
    if (equals === -1) continue;
    if (member.slice(0, equals).trim().toLowerCase() !== 'sha-256') continue;
    let encoded = member.slice(equals + 1).trim();
    if (header === 'content-digest') {
      if (encoded.length < 2 || !encoded.startsWith(':') || !encoded.endsWith(':')) return undefined;
      encoded = encoded.slice(1, -1);
    }
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) return undefined;
    return Buffer.from(encoded, 'base64');
  }
  return undefined;
}

/** Whether the body's SHA-256 equals the claimed one, compared in constant time. */
export function bodyMatches(body: Buffer, claimed: Buffer): boolean {
  const actual = createHash('sha256').update(body).digest();
  return claimed.length === actual.length && timingSafeEqual(claimed, actual);
}

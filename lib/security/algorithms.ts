/** The algorithms an API key can be bound to (docs/signed-calls.md). */
export const SIGNATURE_ALGORITHMS = ['hmac-sha256', 'rsa-sha256', 'ed25519'] as const;
/** An algorithm an API key is bound to: `hmac-sha256`, `rsa-sha256` or `ed25519`. */
export type SignatureAlgorithm = (typeof SIGNATURE_ALGORITHMS)[number];

/** The `algorithm` parameter a key's signatures carry (`ed25519` is `ed25519-sha512` in http-signature). */
export const HEADER_ALGORITHM: Readonly<Record<SignatureAlgorithm, string>> = Object.freeze({
  'hmac-sha256': 'hmac-sha256',
  'rsa-sha256': 'rsa-sha256',
  ed25519: 'ed25519-sha512',
});

import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { BcmsHttpError } from '../http/errors';
import { sha256Hex } from '../security/digest';

/**
 * Code signing of bundles (SECURITY.md). A deploy key proves who uploaded a bundle; its
 * sha256 proves the bundle is whole; neither says who wrote it, and every instance runs whatever
 * row is active in `bcms_deployments`. With `deploy.trustedKeys`, the author signs the bundle's
 * manifest with a private key of their own (`BCMS_SIGNING_KEY_FILE`, when `bcms-ext bundle` or
 * `deploy` runs), and the service pins the public keys it trusts: an upload that no pinned key
 * signed is refused (403 `BUNDLE_UNTRUSTED`), and every instance checks the signature again, against
 * its own pinned keys and never anything in the database, before it runs a version. A row put into
 * `bcms_deployments` by hand, or a version whose code, UI or name was changed there, never runs.
 */

/** A bundle's signature, as `bcms-bundle/*.json` and `bcms_deployments.signature` hold it. */
export interface BundleSignature {
  algorithm: 'ed25519' | 'rsa-sha256';
  /** The signing key's fingerprint (keyFingerprint): which pinned key to try. */
  keyId: string;
  /** base64 */
  value: string;
}

/** What the signature covers: everything that decides what runs, and where. */
export interface SignedContent {
  kind: string;
  name: string;
  version: string;
  project?: string | null;
  code: string;
  ui?: Record<string, string> | null;
}

/** The pinned public keys, by fingerprint. */
export type TrustedKeys = ReadonlyMap<string, KeyObject>;

/** The first 16 hex digits of the SHA-256 of a public key's SPKI (DER) bytes. */
export function keyFingerprint(key: KeyObject): string {
  return sha256Hex(key.export({ type: 'spki', format: 'der' })).slice(0, 16);
}

/**
 * The text that is signed: a version line, then the kind, name, version and project, the SHA-256 of
 * the code, and the SHA-256 of the UI's files (each path and its base64 contents, in path order).
 */
export function signedText(content: SignedContent): string {
  const files = content.ui;
  const ui =
    files == null
      ? '-'
      : sha256Hex(
          Object.keys(files)
            .sort()
            .map((file) => `${file}\u0000${files[file]}\n`)
            .join(''),
        );
  return ['bcms-bundle-signature-v1', content.kind, content.name, content.version, content.project ?? '', sha256Hex(content.code), ui].join('\n');
}

/** Signs with a PEM private key (Ed25519, or RSA of 2048 bits or more). Throws what is wrong with the key. */
export function signBundle(content: SignedContent, privateKeyPem: string): BundleSignature {
  let key: KeyObject;
  try {
    key = createPrivateKey(privateKeyPem);
  } catch {
    throw new TypeError('the signing key is not a PEM private key (Ed25519, or RSA)');
  }
  const algorithm = algorithmOf(key);
  const value = sign(algorithm === 'ed25519' ? null : 'sha256', Buffer.from(signedText(content)), key).toString('base64');
  return { algorithm, keyId: keyFingerprint(createPublicKey(key)), value };
}

function algorithmOf(key: KeyObject): BundleSignature['algorithm'] {
  if (key.asymmetricKeyType === 'ed25519') return 'ed25519';
  if (key.asymmetricKeyType === 'rsa' && (key.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048) return 'rsa-sha256';
  throw new TypeError(`a signing key must be Ed25519, or RSA of 2048 bits or more, not ${key.asymmetricKeyType ?? 'this'}`);
}

/** The option `deploy.trustedKeys` (PEM public keys), parsed; a key that is not one throws a TypeError naming it. */
export function resolveTrustedKeys(option: unknown): TrustedKeys | undefined {
  if (option === undefined) return undefined;
  if (!Array.isArray(option) || option.length === 0) throw new TypeError('option deploy.trustedKeys must be a non-empty array of PEM public keys');
  const keys = new Map<string, KeyObject>();
  option.forEach((pem, index) => {
    let key: KeyObject;
    try {
      if (typeof pem !== 'string' || !pem.includes('PUBLIC KEY')) throw new Error();
      key = createPublicKey(pem);
      algorithmOf(key);
    } catch (error) {
      const why = error instanceof TypeError ? `: ${error.message}` : '';
      throw new TypeError(`option deploy.trustedKeys[${index}] is not a PEM public key (Ed25519, or RSA of 2048 bits or more)${why}`);
    }
    keys.set(keyFingerprint(key), key);
  });
  return keys;
}

/** Whether a pinned key signed this content. */
export function isTrusted(content: SignedContent, signature: unknown, trusted: TrustedKeys): boolean {
  if (signature === null || typeof signature !== 'object') return false;
  const { keyId, value } = signature as Partial<BundleSignature>;
  const key = typeof keyId === 'string' ? trusted.get(keyId) : undefined;
  if (key === undefined || typeof value !== 'string') return false;
  try {
    return verify(key.asymmetricKeyType === 'ed25519' ? null : 'sha256', Buffer.from(signedText(content)), key, Buffer.from(value, 'base64'));
  } catch {
    return false;
  }
}

/** Throws 403 BUNDLE_UNTRUSTED unless a pinned key signed it (nothing is required without pinned keys). */
export function assertTrusted(content: SignedContent, signature: unknown, trusted: TrustedKeys | undefined, what = 'The bundle'): void {
  if (trusted === undefined || isTrusted(content, signature, trusted)) return;
  const why =
    signature == null
      ? 'is not signed'
      : typeof (signature as BundleSignature).keyId === 'string' && !trusted.has((signature as BundleSignature).keyId)
        ? `is signed by key ${(signature as BundleSignature).keyId}, which the service does not trust`
        : 'has a signature that does not match its content';
  throw new BcmsHttpError(
    'BUNDLE_UNTRUSTED',
    `${what} ${why}: this service runs only bundles signed by a key in its deploy.trustedKeys. Sign with BCMS_SIGNING_KEY_FILE set to your signing key (bcms-ext signing-key makes one), then bundle and deploy again.`,
  );
}

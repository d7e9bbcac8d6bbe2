import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { keyFingerprint, signBundle, type BundleSignature, type SignedContent } from '../deploy/signing';
import { parseArgs, UsageError, type Io } from './_io';
import { readDotEnv } from './dotenv';

export const SIGNING_KEY_USAGE = `  signing-key [--out FILE]                  Make an Ed25519 key pair for signing bundles: the private
                                            key to FILE (default bcms-signing-key.pem, mode 0600), the
                                            public key printed, for the service's deploy.trustedKeys.
                                            bundle and deploy sign with BCMS_SIGNING_KEY_FILE.
`;

/** A bundle as bcms-bundle/*.json holds it. */
interface SignableBundle {
  manifest: { kind: string; name: string; version: string; project?: string };
  code: string;
  ui?: Record<string, string>;
  signature?: BundleSignature;
}

/** The author's private key (PEM) from the file BCMS_SIGNING_KEY_FILE names (the environment, then .env), or undefined. */
export function signingKey(io: Io, cwd: string): { pem: string; file: string } | undefined {
  const file = io.env.BCMS_SIGNING_KEY_FILE || readDotEnv(cwd).BCMS_SIGNING_KEY_FILE;
  if (!file) return undefined;
  const resolved = path.resolve(cwd, file);
  try {
    return { pem: fs.readFileSync(resolved, 'utf8'), file: resolved };
  } catch (error) {
    throw new UsageError(`cannot read BCMS_SIGNING_KEY_FILE ${resolved}: ${(error as Error).message}`);
  }
}

/** The bundle with its manifest signed by `key`. */
export function signed<B extends SignableBundle>(bundle: B, key: { pem: string; file: string }): B {
  const content: SignedContent = { ...bundle.manifest, code: bundle.code, ui: bundle.ui ?? null };
  try {
    return { ...bundle, signature: signBundle(content, key.pem) };
  } catch (error) {
    throw new UsageError(`BCMS_SIGNING_KEY_FILE ${key.file}: ${(error as Error).message}`);
  }
}

/** `bcms-ext signing-key`: a new Ed25519 pair, the private key written (never over another file), the public key printed. */
export async function runSigningKey(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { flags, positionals } = parseArgs(args, { out: 'string' });
  if (positionals.length > 0) throw new UsageError('signing-key takes no name: bcms-ext signing-key [--out FILE]');
  const file = path.resolve(cwd, (flags.out as string | undefined) ?? 'bcms-signing-key.pem');
  const pair = generateKeyPairSync('ed25519');
  try {
    fs.writeFileSync(file, pair.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code === 'EEXIST' ? 'it exists (a signing key is never overwritten: give --out another file)' : (error as Error).message;
    throw new UsageError(`cannot write ${file}: ${why}`);
  }
  const publicPem = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  io.out(
    `Wrote the private key to ${path.relative(cwd, file) || file} (keep it to yourself; add it to .gitignore). Sign with it:\n` +
      `  BCMS_SIGNING_KEY_FILE=${path.relative(cwd, file) || file}   # in the environment or the project's .env\n\n` +
      `Its public key (fingerprint ${keyFingerprint(pair.publicKey)}), for the service's deploy.trustedKeys:\n\n${publicPem}`,
  );
  return 0;
}

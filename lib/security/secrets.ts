import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from '../logger';

/**
 * HMAC secrets at rest (SECURITY.md). An `hmac-sha256` key's secret must be kept where the
 * service can verify with it, so whoever reads `bcms_api_keys` (a backup, a replica) could sign as
 * any key. With `secretsKey` (or `BCMS_SECRETS_KEY`) given, each secret is stored sealed with
 * AES-256-GCM under it, bound to its key's id (the id is the cipher's additional data: a sealed
 * secret copied onto another row does not open), and a row whose secret is in clear is refused:
 * someone who can write to the database but does not hold `secretsKey` cannot make a key that works.
 *
 * Stored form: `enc:v1:<kid>:<base64url(iv | ciphertext | tag)>`, `kid` the first 8 hex digits of
 * the SHA-256 of the key that sealed it, so that after a rotation (`secretsKey: [new, old]`) each
 * secret is opened with its own key, and the next start seals it again under the new one.
 */

export const API_KEYS_TABLE = 'bcms_api_keys';
const PREFIX = 'enc:v1:';

/** The keys that open secrets; the first seals them. */
export interface SecretsKeys {
  readonly keys: readonly { id: string; key: Buffer }[];
}

const routers = new WeakMap<Knex, SecretsKeys>();

/** Remembers a router's keys for its database, so that `createApiKey(router.db, ...)` seals with them. */
export function rememberSecrets(knex: Knex, secrets: SecretsKeys | undefined): void {
  if (secrets !== undefined) routers.set(knex, secrets);
}

/** The keys of the router whose database this is, if it has any. */
export function secretsOf(knex: Knex): SecretsKeys | undefined {
  return routers.get(knex);
}

/** Whether a stored secret is sealed. */
export const isSealed = (stored: string): boolean => stored.startsWith(PREFIX);

/**
 * The `secretsKey` option, else `BCMS_SECRETS_KEY`: one key, or several (an array, or the variable's
 * comma-separated list), the first sealing and all opening. Each is 32 bytes, written as 64 hex
 * digits or in base64 (or base64url), or a Buffer. Undefined when neither is given; anything else
 * throws a TypeError that says what to give.
 */
export function resolveSecretsKeys(option: unknown, env: NodeJS.ProcessEnv = process.env): SecretsKeys | undefined {
  const given = option ?? (env.BCMS_SECRETS_KEY ? env.BCMS_SECRETS_KEY.split(',').map((part) => part.trim()) : undefined);
  if (given === undefined) return undefined;
  const list = Array.isArray(given) ? given : [given];
  const where = option === undefined ? 'BCMS_SECRETS_KEY' : 'option secretsKey';
  if (list.length === 0) throw new TypeError(`${where} lists no key`);
  return {
    keys: list.map((value, index) => {
      const key = keyBytes(value);
      if (key === undefined) {
        throw new TypeError(
          `${where}${list.length > 1 ? ` (key ${index + 1})` : ''} must be 32 bytes: 64 hex digits, 32 bytes in base64, or a Buffer. ` +
            "Make one with: node -e \"console.log(require('crypto').randomBytes(32).toString('base64'))\"",
        );
      }
      return { id: createHash('sha256').update(key).digest('hex').slice(0, 8), key };
    }),
  };
}

function keyBytes(value: unknown): Buffer | undefined {
  if (Buffer.isBuffer(value)) return value.length === 32 ? Buffer.from(value) : undefined;
  if (typeof value !== 'string') return undefined;
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex');
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) return undefined;
  const bytes = Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return bytes.length === 32 ? bytes : undefined;
}

/** The secret as it is stored: sealed under the first key when keys are given, else as it is. */
export function sealSecret(secret: string, keyId: string, secrets: SecretsKeys | undefined): string {
  const first = secrets?.keys[0];
  if (first === undefined) return secret;
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', first.key, iv);
  cipher.setAAD(Buffer.from(keyId, 'utf8'));
  const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `${PREFIX}${first.id}:${sealed.toString('base64url')}`;
}

/** Why a stored secret cannot be used: the service is set up wrong, or the row was not written by it. */
export class SecretUnusable extends Error {
  constructor(
    message: string,
    /** `clear`: a secret in clear while keys are given (not written by this service): the key is refused as unknown. */
    readonly reason: 'clear' | 'no-key' | 'cannot-open',
  ) {
    super(message);
    this.name = 'SecretUnusable';
  }
}

/**
 * The secret's bytes (UTF-8 of the secret string), opened when sealed. Throws SecretUnusable.
 * `acceptClear`: for sealing what is in clear (sealStoredSecrets), not for verifying.
 */
export function openSecret(stored: string, keyId: string, secrets: SecretsKeys | undefined, acceptClear = false): Buffer {
  if (!isSealed(stored)) {
    if (secrets !== undefined && !acceptClear) throw new SecretUnusable(`API key ${keyId} has its secret in clear, although secretsKey is set: the service did not write it`, 'clear');
    return Buffer.from(stored, 'utf8');
  }
  if (secrets === undefined) {
    throw new SecretUnusable(`API key ${keyId} has a sealed secret, and the service has no secretsKey: give the key it was sealed with (secretsKey or BCMS_SECRETS_KEY)`, 'no-key');
  }
  const [kid, payload] = stored.slice(PREFIX.length).split(':') as [string, string | undefined];
  const key = secrets.keys.find((candidate) => candidate.id === kid);
  const cannot = (why: string) =>
    new SecretUnusable(`API key ${keyId}'s secret cannot be opened: ${why}. After a rotation, give the old key after the new one (secretsKey: [new, old])`, 'cannot-open');
  if (key === undefined || payload === undefined) throw cannot(`it was sealed under a key (${kid}) the service was not given`);
  const sealed = Buffer.from(payload, 'base64url');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key.key, sealed.subarray(0, 12));
    decipher.setAAD(Buffer.from(keyId, 'utf8'));
    decipher.setAuthTag(sealed.subarray(sealed.length - 16));
    return Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
  } catch {
    throw cannot('it does not open with the key it names (altered, or moved from another key)');
  }
}

/**
 * Seals every secret in clear, and seals again under the first key each one sealed under another
 * (after a rotation), when keys are given; run at every start, after the migrations, and by
 * `bcms-ext migrate`. Each row is replaced only if it still holds what was read (two instances
 * starting at once do not undo each other). Resolves to how many were (re)sealed.
 */
export async function sealStoredSecrets(knex: Knex, secrets: SecretsKeys | undefined): Promise<number> {
  const first = secrets?.keys[0];
  if (first === undefined) return 0;
  const rows = (await knex(API_KEYS_TABLE).select('id', 'secret').whereNotNull('secret')) as { id: string; secret: string }[];
  let sealed = 0;
  for (const row of rows) {
    if (row.secret.startsWith(`${PREFIX}${first.id}:`)) continue;
    let secret: Buffer;
    try {
      secret = openSecret(row.secret, row.id, secrets, true);
    } catch (error) {
      if (error instanceof SecretUnusable) continue; // sealed under a key not given: said when the key is used
      throw error;
    }
    const updated = await knex(API_KEYS_TABLE)
      .where({ id: row.id, secret: row.secret })
      .update({ secret: sealSecret(secret.toString('utf8'), row.id, secrets) });
    sealed += Number(updated);
  }
  return sealed;
}

/** Once, at start: says that the secrets are in clear, and how to seal them. */
export function warnIfInClear(secrets: SecretsKeys | undefined, logger: Logger): void {
  if (secrets !== undefined) return;
  logger.warn(
    { table: API_KEYS_TABLE },
    'bcms-extensions: no secretsKey: the HMAC secrets of API keys are stored in clear in bcms_api_keys, so whoever reads the database can sign. ' +
      'Give secretsKey (32 bytes, base64 or hex) or BCMS_SECRETS_KEY to seal them (the next start seals the existing ones)',
  );
}

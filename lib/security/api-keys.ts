import { createPublicKey, KeyObject, randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { migrate } from '../db/migrate';
import { isUrlSafe } from '../names';
import { SIGNATURE_ALGORITHMS, type SignatureAlgorithm } from './algorithms';
import { API_KEYS_TABLE, resolveSecretsKeys, sealSecret, secretsOf, type SecretsKeys } from './secrets';

/** What `createApiKey` takes. */
export interface NewApiKey {
  /** For people: shown by `listApiKeys` and `bcms-ext keys list`. */
  name: string;
  /** The private functions this key may call, by name. */
  functions: string[];
  /**
   * The plugins whose routes this key may call, by name, where a route accepts API keys
   * (`BCMSRouteProtection.createJwtApiPreRequestHandler`). Default none.
   */
  plugins?: string[];
  /** Default `hmac-sha256`: the service issues a shared secret. */
  algorithm?: SignatureAlgorithm;
  /** `rsa-sha256` (2048 bits or more) and `ed25519`: the public key, PEM or a KeyObject. */
  publicKey?: string | KeyObject;
  /** May deploy bundles (the deploy workflow). Default false. */
  deploy?: boolean;
  /**
   * Also accepts the BCMS client's signed calls (`@becomes/cms-client`: `?key=&nonce=&timestamp=&signature=`),
   * which sign neither the method nor the path. `hmac-sha256` keys only. Default false.
   */
  bcmsClient?: boolean;
  /**
   * When the key stops working (its signatures are then refused with 401 KEY_EXPIRED): a Date,
   * epoch milliseconds, or an ISO 8601 date (`2027-01-31`, midnight UTC) or date-time with its
   * offset (`2027-01-31T12:00:00Z`). In the future. Default: never.
   */
  expiresAt?: Date | number | string;
}

/** What `createApiKey` resolves to. `secret` (hmac-sha256 only) is shown this once: it is not listed again. */
export interface CreatedApiKey {
  id: string;
  secret?: string;
}

/** A key as `listApiKeys` shows it: never its secret. Times are epoch milliseconds, as in BCMS. */
export interface ApiKey {
  id: string;
  name: string;
  algorithm: SignatureAlgorithm;
  /** SPKI PEM for public-key algorithms, else null. */
  publicKey: string | null;
  blocked: boolean;
  functions: string[];
  /** The plugins whose API-key routes it may call. */
  plugins: string[];
  deploy: boolean;
  /** Accepts the BCMS client's signed calls as well as HTTP Signatures. */
  bcmsClient: boolean;
  /** When it stops working (epoch milliseconds), or null: never. */
  expiresAt: number | null;
  createdAt: number;
  updatedAt: number;
}

export { API_KEYS_TABLE } from './secrets';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a string can be a key id; anything else names no key (and is never sent to the database). */
export function isKeyId(id: unknown): id is string {
  return typeof id === 'string' && UUID.test(id);
}

const migrated = new WeakMap<Knex, Promise<void>>();

/** The key functions work on a database the router never saw: migrate it once per Knex instance. */
function ensureMigrated(knex: Knex): Promise<void> {
  let done = migrated.get(knex);
  if (done === undefined) {
    done = migrate(knex).then(() => undefined);
    done.catch(() => migrated.delete(knex)); // tried again next time
    migrated.set(knex, done);
  }
  return done;
}

/** Checks a `NewApiKey`; throws a TypeError that says what to change. */
export function checkNewApiKey(input: unknown): asserts input is NewApiKey {
  if (input === null || typeof input !== 'object') throw new TypeError('an API key needs { name, functions }');
  const { name, functions, plugins, algorithm = 'hmac-sha256', publicKey, deploy, bcmsClient, expiresAt } = input as Partial<NewApiKey>;
  if (typeof name !== 'string' || name.trim() === '') throw new TypeError('API key name must be a non-empty string');
  if (!Array.isArray(functions)) throw new TypeError('API key functions must be an array of function names ([] for none)');
  for (const fn of functions) {
    if (!isUrlSafe(fn)) throw new TypeError(`API key functions: ${JSON.stringify(fn)} is not a function name`);
  }
  if (plugins !== undefined) {
    if (!Array.isArray(plugins)) throw new TypeError('API key plugins must be an array of plugin names ([] for none)');
    for (const plugin of plugins) {
      if (!isUrlSafe(plugin)) throw new TypeError(`API key plugins: ${JSON.stringify(plugin)} is not a plugin name (URL-safe, as in /api/plugin/<name>/)`);
    }
  }
  if (!(SIGNATURE_ALGORITHMS as readonly unknown[]).includes(algorithm)) {
    throw new TypeError(`API key algorithm must be one of ${SIGNATURE_ALGORITHMS.join(', ')}, got ${JSON.stringify(algorithm)}`);
  }
  if (deploy !== undefined && typeof deploy !== 'boolean') throw new TypeError('API key deploy must be true or false');
  if (bcmsClient !== undefined && typeof bcmsClient !== 'boolean') throw new TypeError('API key bcmsClient must be true or false');
  if (expiresAt !== undefined) expiryOf(expiresAt);
  if (bcmsClient === true && algorithm !== 'hmac-sha256') {
    throw new TypeError(`bcmsClient needs an hmac-sha256 key: the BCMS client signs with a shared secret, and an ${algorithm} key has none`);
  }
  if (algorithm === 'hmac-sha256') {
    if (publicKey !== undefined) throw new TypeError('an hmac-sha256 key takes no publicKey: the service issues its secret');
  } else {
    normalizePublicKey(publicKey, algorithm);
  }
}

const ISO_DATE = /^(\d{4}-\d{2}-\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/**
 * A key's `expiresAt` as a Date: a Date, epoch milliseconds, or an ISO 8601 date (midnight UTC) or
 * date-time with its offset (one without would mean the local time of whichever machine reads
 * it). Throws a TypeError that says what to give when it is none of these, or not after `now`.
 */
export function expiryOf(value: unknown, now = Date.now()): Date {
  let time = Number.NaN;
  if (value instanceof Date) time = value.getTime();
  else if (typeof value === 'number' && Number.isInteger(value)) time = value;
  else if (typeof value === 'string') {
    const match = ISO_DATE.exec(value);
    // A day that is not in the calendar (2027-02-30) is refused, not moved to the next month.
    if (match !== null && new Date(`${match[1] as string}T00:00:00Z`).toISOString().startsWith(match[1] as string)) time = Date.parse(value);
  }
  if (!Number.isFinite(time) || Math.abs(time) > 8.64e15) {
    throw new TypeError(
      `API key expiresAt must be a time: an ISO 8601 date ("2027-01-31", midnight UTC) or date-time with its offset ("2027-01-31T12:00:00Z"), ` +
        `or epoch milliseconds; got ${JSON.stringify(value) ?? String(value)}`,
    );
  }
  if (time <= now) throw new TypeError(`API key expiresAt must be in the future; ${new Date(time).toISOString()} has passed`);
  return new Date(time);
}

/** The public key as SPKI PEM, checked against the algorithm it is bound to. */
function normalizePublicKey(publicKey: unknown, algorithm: Exclude<SignatureAlgorithm, 'hmac-sha256'>): string {
  if (publicKey === undefined) throw new TypeError(`an ${algorithm} key needs publicKey (PEM)`);
  if (typeof publicKey === 'string' && publicKey.includes('PRIVATE KEY')) {
    throw new TypeError('publicKey is a private key: keep it with the caller and pass the public key');
  }
  if (typeof publicKey === 'object' && publicKey !== null && (publicKey as KeyObject).type === 'private') {
    throw new TypeError('publicKey is a private key: keep it with the caller and pass the public key');
  }
  let key: KeyObject;
  try {
    key = publicKey instanceof KeyObject ? publicKey : createPublicKey(publicKey as string);
    if (key.type !== 'public') throw new TypeError('not a public key');
  } catch {
    throw new TypeError('publicKey is not a PEM public key (-----BEGIN PUBLIC KEY-----)');
  }
  const type = key.asymmetricKeyType;
  if (algorithm === 'rsa-sha256') {
    if (type !== 'rsa') throw new TypeError(`an rsa-sha256 key needs an RSA public key, got ${String(type)}`);
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < 2048) throw new TypeError(`an rsa-sha256 key needs 2048 bits or more, got ${bits}`);
  } else if (type !== 'ed25519') {
    throw new TypeError(`an ed25519 key needs an Ed25519 public key, got ${String(type)}`);
  }
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

/**
 * Creates an API key. An `hmac-sha256` key (the default) gets a random secret, returned this once,
 * and stored sealed when there is a secrets key (on a router's `router.db`, the router's
 * `secretsKey`; else `options.secretsKey`, else `BCMS_SECRETS_KEY`); a public-key one keeps the
 * public key on file.
 *
 * @example
 * const { id, secret } = await createApiKey(router.db, { name: 'forms', functions: ['submit-form'] });
 * // a key for a plugin's routes guarded by BCMSRouteProtection.createJwtApiPreRequestHandler
 * await createApiKey(router.db, { name: 'site', functions: [], plugins: ['todo'], bcmsClient: true });
 * // refused with 401 KEY_EXPIRED from the first of February on
 * await createApiKey(router.db, { name: 'audit', functions: ['report'], expiresAt: '2027-02-01' });
 */
export async function createApiKey(knex: Knex, input: NewApiKey, options: { secretsKey?: unknown; secrets?: SecretsKeys } = {}): Promise<CreatedApiKey> {
  checkNewApiKey(input);
  // A router's own database (router.db) seals with the router's secretsKey; else the option, else BCMS_SECRETS_KEY.
  const secrets = options.secrets ?? (options.secretsKey === undefined ? secretsOf(knex) : undefined) ?? resolveSecretsKeys(options.secretsKey);
  const algorithm = input.algorithm ?? 'hmac-sha256';
  const secret = algorithm === 'hmac-sha256' ? randomBytes(32).toString('base64url') : undefined;
  const publicKey = algorithm === 'hmac-sha256' ? null : normalizePublicKey(input.publicKey, algorithm);
  await ensureMigrated(knex);
  // The id made here: a sealed secret is bound to it.
  const id = randomUUID();
  await knex(API_KEYS_TABLE).insert({
    id,
    name: input.name.trim(),
    algorithm,
    secret: secret === undefined ? null : sealSecret(secret, id, secrets),
    public_key: publicKey,
    functions: JSON.stringify([...new Set(input.functions)]),
    plugins: JSON.stringify([...new Set(input.plugins ?? [])]),
    deploy: input.deploy ?? false,
    bcms_client: input.bcmsClient ?? false,
    expires_at: input.expiresAt === undefined ? null : expiryOf(input.expiresAt),
  });
  return secret === undefined ? { id } : { id, secret };
}

interface ApiKeyRow {
  id: string;
  name: string;
  algorithm: SignatureAlgorithm;
  public_key: string | null;
  blocked: boolean;
  functions: string[];
  plugins: string[];
  deploy: boolean;
  bcms_client: boolean;
  expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

function toApiKey(row: ApiKeyRow): ApiKey {
  return {
    id: row.id,
    name: row.name,
    algorithm: row.algorithm,
    publicKey: row.public_key,
    blocked: row.blocked,
    functions: row.functions,
    plugins: row.plugins,
    deploy: row.deploy,
    bcmsClient: row.bcms_client,
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at).getTime(),
    createdAt: new Date(row.created_at).getTime(),
    updatedAt: new Date(row.updated_at).getTime(),
  };
}

/** Postgres's "undefined table": a database never migrated has no keys (and reading it should not migrate it). */
function noKeysTable(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '42P01';
}

/** Every key, oldest first, without secrets. */
export async function listApiKeys(knex: Knex): Promise<ApiKey[]> {
  try {
    const rows = (await knex(API_KEYS_TABLE)
      .select('id', 'name', 'algorithm', 'public_key', 'blocked', 'functions', 'plugins', 'deploy', 'bcms_client', 'expires_at', 'created_at', 'updated_at')
      .orderBy([{ column: 'created_at' }, { column: 'id' }])) as ApiKeyRow[];
    return rows.map(toApiKey);
  } catch (error) {
    if (noKeysTable(error)) return [];
    throw error;
  }
}

/** Blocks a key: its calls are refused with 403 KEY_FORBIDDEN on every instance. `false` when there is no such key. */
export async function blockApiKey(knex: Knex, id: string): Promise<boolean> {
  if (!isKeyId(id)) return false;
  try {
    const rows = await knex(API_KEYS_TABLE)
      .where({ id })
      .update({ blocked: true, updated_at: knex.raw('clock_timestamp()') })
      .returning('id');
    return rows.length > 0;
  } catch (error) {
    if (noKeysTable(error)) return false;
    throw error;
  }
}

/** Deletes a key and the signatures remembered for it. `false` when there is no such key. */
export async function deleteApiKey(knex: Knex, id: string): Promise<boolean> {
  if (!isKeyId(id)) return false;
  try {
    // `returning`: PGlite answers a delete without a row count.
    const rows = await knex(API_KEYS_TABLE).where({ id }).delete().returning('id');
    return rows.length > 0;
  } catch (error) {
    if (noKeysTable(error)) return false;
    throw error;
  }
}

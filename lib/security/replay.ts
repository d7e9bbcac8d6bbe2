import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Knex } from 'knex';
import type { ContentStore } from '../db/store';
import { BcmsHttpError } from '../http/errors';
import type { Logger } from '../logger';
import type { SignatureAlgorithm } from './algorithms';
import { API_KEYS_TABLE } from './api-keys';
import { sha256Hex } from './digest';
import { openSecret, rememberSecrets, SecretUnusable, warnIfInClear, type SecretsKeys } from './secrets';

export const REPLAYS_TABLE = 'bcms_signature_replays';

/** What a signature is checked with. A key's algorithm and material never change, so it may be cached. */
export interface KeyMaterial {
  id: string;
  name: string;
  algorithm: SignatureAlgorithm;
  functions: readonly string[];
  /** The plugins whose API-key routes it may call. */
  plugins: readonly string[];
  deploy: boolean;
  /** Accepts the BCMS client's query-string signatures too (a scheme of the BCMS layer). */
  bcmsClient: boolean;
  /** hmac-sha256: the shared secret's bytes (the secret string, UTF-8). */
  secret: Buffer | null;
  /** rsa-sha256, ed25519: the public key, parsed once. */
  publicKey: KeyObject | null;
  /** When the key stops working (epoch milliseconds), or null: never. Set at creation, never changed. */
  expiresAt: number | null;
}

/** The key a signature names, or null; its secret opened with `secrets` when sealed (throws SecretUnusable). */
export async function findKeyMaterial(knex: Knex, id: string, secrets?: SecretsKeys): Promise<KeyMaterial | null> {
  const row = (await knex(API_KEYS_TABLE).first('id', 'name', 'algorithm', 'secret', 'public_key', 'functions', 'plugins', 'deploy', 'bcms_client', 'expires_at').where({ id })) as
    | {
        id: string;
        name: string;
        algorithm: SignatureAlgorithm;
        secret: string | null;
        public_key: string | null;
        functions: string[];
        plugins: string[];
        deploy: boolean;
        bcms_client: boolean;
        expires_at: Date | null;
      }
    | undefined;
  if (row === undefined) return null;
  return {
    id: row.id,
    name: row.name,
    algorithm: row.algorithm,
    functions: Object.freeze([...row.functions]),
    plugins: Object.freeze([...row.plugins]),
    deploy: row.deploy,
    bcmsClient: row.bcms_client,
    secret: row.secret === null ? null : openSecret(row.secret, row.id, secrets),
    publicKey: row.public_key === null ? null : createPublicKey(row.public_key),
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at).getTime(),
  };
}

/** How the database answered a verified signature: `unknown` when the key is gone, `expired` past its `expires_at` (the database's clock). */
export type Acceptance = 'accepted' | 'replayed' | 'blocked' | 'expired' | 'not-permitted' | 'unknown';

/**
 * A function name the key must list, a plugin name it must list (a plugin route that accepts API
 * keys), `deploy`, which the key must hold, or `keyAccess`: reading what the key may call (the
 * BCMS client's access list), which any key that is not blocked may.
 */
export type Permission = { function: string } | { plugin: string } | { deploy: true } | { keyAccess: true };

/** What a key lists, as the key's row or its cached material holds it. */
interface Grants {
  functions: readonly string[];
  plugins: readonly string[];
  deploy: boolean;
}

/** Whether a key grants a permission (the ledger's SQL asks the same of the key's row). */
export function keyPermits(key: Grants, permission: Permission): boolean {
  if ('function' in permission) return key.functions.includes(permission.function);
  if ('plugin' in permission) return key.plugins.includes(permission.plugin);
  if ('deploy' in permission) return key.deploy;
  return true;
}

/** The 403's message for a key that does not grant a permission: it names what the key lacks. */
export function forbiddenMessage(permission: Permission): string {
  if ('function' in permission) return `This API key may not call function "${permission.function}": it does not list it.`;
  if ('plugin' in permission) return `This API key may not call plugin "${permission.plugin}": it does not list it.`;
  if ('deploy' in permission) return 'This API key may not deploy.';
  return 'This API key may not do this.';
}

export type Refuse = (code: 'SIGNATURE_INVALID' | 'SIGNATURE_REPLAYED' | 'KEY_EXPIRED', message?: string) => Error;

/**
 * Refuses a key past its expiry (401 KEY_EXPIRED, with the scheme's challenge), once its signature
 * verified: only the key's holder learns that it expired, and when. The ledger asks the database's
 * clock too, so an instance whose clock runs late still refuses it.
 */
export function refuseIfExpired(key: Pick<KeyMaterial, 'expiresAt'>, refuse: Refuse, now = Date.now()): void {
  if (key.expiresAt !== null && key.expiresAt <= now) {
    throw refuse('KEY_EXPIRED', `This API key expired at ${new Date(key.expiresAt).toISOString()}: sign with a key that has not (bcms-ext keys create).`);
  }
}

/**
 * Throws the answer for a signature the ledger did not accept (both schemes answer alike): an
 * unknown key is forgotten from the key memory and refused with `unknownKey`'s message.
 */
export function refuseUnlessAccepted(acceptance: Acceptance, options: { permission: Permission; forget: () => void; refuse: Refuse; unknownKey: string }): void {
  switch (acceptance) {
    case 'unknown':
      options.forget();
      throw options.refuse('SIGNATURE_INVALID', options.unknownKey);
    case 'blocked':
      throw new BcmsHttpError('KEY_FORBIDDEN', 'This API key is blocked.');
    case 'expired':
      throw options.refuse('KEY_EXPIRED');
    case 'not-permitted':
      throw new BcmsHttpError('KEY_FORBIDDEN', forbiddenMessage(options.permission));
    case 'replayed':
      throw options.refuse('SIGNATURE_REPLAYED');
    case 'accepted':
      return;
  }
}

interface Candidate {
  keyId: string;
  hash: string;
  permission: Permission;
  expiresAt: Date;
  resolve: (acceptance: Acceptance) => void;
  reject: (error: unknown) => void;
}

/** Most signatures recorded by one statement. */
const BATCH_SIZE = 200;

/**
 * Where verified signatures are recorded, once each, across every instance on the database: the
 * primary key (key_id, signed_hash) refuses a pair seen before. The statement that records a
 * signature also reads the key's current state, so a key blocked or deleted a moment ago, on any
 * instance, is refused at once, as is a key past its expiry by the database's clock.
 *
 * Signatures verified in the same turn of the event loop are recorded by one statement: under load
 * that is one round trip, and one plan, for many requests rather than one each.
 */
export class SignatureLedger {
  private pending: Candidate[] = [];

  constructor(
    private readonly knex: Knex,
    /** Runs a query as the router's store does: 503 while the database is unreachable. */
    private readonly run: <T>(query: () => Promise<T>) => Promise<T>,
  ) {}

  /** `signed`: what the signature covers (its signing string), which names the request. */
  accept(keyId: string, signed: string, permission: Permission, expiresAt: Date): Promise<Acceptance> {
    const hash = sha256Hex(signed);
    return new Promise((resolve, reject) => {
      if (this.pending.push({ keyId, hash, permission, expiresAt, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.pending.splice(0, BATCH_SIZE);
    if (this.pending.length > 0) setImmediate(() => this.flush());
    this.run(() => this.record(batch)).then(
      (outcomes) => {
        batch.forEach((candidate, i) => {
          candidate.resolve(outcomes[i] as Acceptance);
        });
      },
      (error: unknown) => {
        batch.forEach((candidate) => {
          candidate.reject(error);
        });
      },
    );
  }

  /** One insert for the whole batch; only the refused ones need a second look, to say why. */
  private async record(batch: readonly Candidate[]): Promise<Acceptance[]> {
    // The same pair twice in one batch: the first one decides, the second is a replay of it.
    const first = new Map<string, number>();
    const unique: Candidate[] = [];
    batch.forEach((candidate, i) => {
      const pair = `${candidate.keyId}:${candidate.hash}`;
      if (!first.has(pair)) {
        first.set(pair, i);
        unique.push(candidate);
      }
    });
    const rows = unique.map(() => '(?::uuid, ?::text, ?::timestamptz, ?::text, ?::text, ?::boolean)').join(', ');
    const bindings = unique.flatMap((c) => [
      c.keyId,
      c.hash,
      c.expiresAt,
      'function' in c.permission ? c.permission.function : null,
      'plugin' in c.permission ? c.permission.plugin : null,
      'deploy' in c.permission,
    ]);
    const inserted = (await this.knex.raw(
      `insert into ${REPLAYS_TABLE} (key_id, signed_hash, expires_at)
       select c.key_id, c.signed_hash, c.expires_at
       from (values ${rows}) as c (key_id, signed_hash, expires_at, fn, plugin, deploy)
       join ${API_KEYS_TABLE} k on k.id = c.key_id
       where not k.blocked and (k.expires_at is null or k.expires_at > now()) and case
         when c.fn is not null then k.functions @> jsonb_build_array(c.fn)
         when c.plugin is not null then k.plugins @> jsonb_build_array(c.plugin)
         when c.deploy then k.deploy
         else true end
       on conflict do nothing
       returning key_id, signed_hash`,
      bindings,
    )) as { rows: { key_id: string; signed_hash: string }[] };
    const accepted = new Set(inserted.rows.map((row) => `${row.key_id}:${row.signed_hash}`));

    const refused = unique.filter((c) => !accepted.has(`${c.keyId}:${c.hash}`));
    const keys = new Map<string, Grants & { blocked: boolean; expired: boolean }>();
    if (refused.length > 0) {
      const ids = [...new Set(refused.map((c) => c.keyId))];
      const found = (await this.knex(API_KEYS_TABLE)
        .select('id', 'blocked', 'functions', 'plugins', 'deploy', this.knex.raw('coalesce(expires_at <= now(), false) as expired'))
        .whereIn('id', ids)) as (Grants & { id: string; blocked: boolean; expired: boolean })[];
      for (const key of found) keys.set(key.id, key);
    }
    const outcomeOf = (c: Candidate): Acceptance => {
      if (accepted.has(`${c.keyId}:${c.hash}`)) return 'accepted';
      const key = keys.get(c.keyId);
      if (key === undefined) return 'unknown';
      if (key.blocked) return 'blocked';
      if (key.expired) return 'expired';
      return keyPermits(key, c.permission) ? 'replayed' : 'not-permitted';
    };
    return batch.map((c, i) => {
      const outcome = outcomeOf(c);
      return first.get(`${c.keyId}:${c.hash}`) === i || outcome !== 'accepted' ? outcome : 'replayed';
    });
  }
}

/**
 * Kept this long past their window, by the database's clock: an instance whose clock runs behind
 * another's still accepts a date the other has let go, and must still find it remembered.
 */
export const PURGE_MARGIN_SECONDS = 300;

/** Forgets signatures whose date left the clock-skew window (plus the margin): they would be refused as expired anyway. */
export async function purgeExpiredSignatures(knex: Knex): Promise<number> {
  const rows = await knex(REPLAYS_TABLE).whereRaw(`expires_at < now() - interval '${PURGE_MARGIN_SECONDS} seconds'`).delete().returning('key_id');
  return rows.length;
}

/** Keys kept in memory (their material never changes); a deleted key is dropped when the database says so. */
const KEY_CACHE_SIZE = 1000;
const PURGE_INTERVAL_MS = 60_000;

/**
 * What a router's signature schemes share (HTTP Signatures, and the BCMS client's query-string
 * signatures): the keys in memory, one ledger, so that a signature accepted under one scheme or
 * route is a replay under any other, and the purge of what expired.
 */
export class SignatureMemory {
  readonly ledger: SignatureLedger;
  private readonly knex: Knex;
  private readonly keys = new Map<string, KeyMaterial>();
  private lastPurge = 0;

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    private readonly secrets?: SecretsKeys,
  ) {
    this.knex = store.database.knex;
    this.ledger = new SignatureLedger(this.knex, (query) => store.run(query));
    // createApiKey(router.db, ...) seals with the router's key; without one, the start says the secrets are in clear.
    rememberSecrets(this.knex, secrets);
    warnIfInClear(secrets, logger);
  }

  /**
   * The key an id names, from memory when it was read before; null when there is none, or when its
   * secret is in clear while the service seals secrets (a row it did not write). A secret it cannot
   * open (altered in the database, sealed under a key the service was not given, or the service has
   * no secretsKey) is logged as an error for the operator, and the signature refused with `refuse`'s
   * 401 SIGNATURE_INVALID: the caller can do nothing about it, and a 500 would tell it nothing more.
   */
  async keyFor(id: string, refuse: Refuse): Promise<KeyMaterial | null> {
    const cached = this.keys.get(id);
    if (cached !== undefined) return cached;
    let key: KeyMaterial | null;
    try {
      key = await this.store.run(() => findKeyMaterial(this.knex, id, this.secrets));
    } catch (error) {
      if (!(error instanceof SecretUnusable)) throw error;
      this.logger[error.reason === 'clear' ? 'warn' : 'error']({ keyId: id }, `bcms-extensions: ${error.message}`);
      if (error.reason === 'clear') return null;
      throw refuse('SIGNATURE_INVALID', "This API key's secret cannot be used by this service (its log says why): sign with another key, or ask its operator.");
    }
    if (key === null) return null;
    if (this.keys.size >= KEY_CACHE_SIZE) this.keys.delete(this.keys.keys().next().value as string);
    this.keys.set(id, key);
    return key;
  }

  /** Drops a key the database no longer has. */
  forget(id: string): void {
    this.keys.delete(id);
  }

  /** After an accepted call: deletes what expired, at most once a minute, after the answer. */
  purgeNowAndThen(now: number): void {
    if (now - this.lastPurge < PURGE_INTERVAL_MS) return;
    this.lastPurge = now;
    this.store
      .run(() => purgeExpiredSignatures(this.knex))
      .then(
        (purged) => {
          if (purged > 0) this.logger.debug({ purged }, 'bcms-extensions: purged expired signatures');
        },
        (error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not purge expired signatures (tried again later)'),
      );
  }
}

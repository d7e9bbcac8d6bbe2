import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { SignatureAlgorithm } from './algorithms';
import { API_KEYS_TABLE } from './api-keys';

export const REPLAYS_TABLE = 'bcms_signature_replays';

/** What a signature is checked with. A key's algorithm and material never change, so it may be cached. */
export interface KeyMaterial {
  id: string;
  name: string;
  algorithm: SignatureAlgorithm;
  functions: readonly string[];
  deploy: boolean;
  /** hmac-sha256: the shared secret's bytes (the secret string, UTF-8). */
  secret: Buffer | null;
  /** rsa-sha256, ed25519: SPKI PEM. */
  publicKey: string | null;
}

/** The key a signature names, or null. */
export async function findKeyMaterial(knex: Knex, id: string): Promise<KeyMaterial | null> {
  const row = (await knex(API_KEYS_TABLE).first('id', 'name', 'algorithm', 'secret', 'public_key', 'functions', 'deploy').where({ id })) as
    | { id: string; name: string; algorithm: SignatureAlgorithm; secret: string | null; public_key: string | null; functions: string[]; deploy: boolean }
    | undefined;
  if (row === undefined) return null;
  return {
    id: row.id,
    name: row.name,
    algorithm: row.algorithm,
    functions: Object.freeze([...row.functions]),
    deploy: row.deploy,
    secret: row.secret === null ? null : Buffer.from(row.secret, 'utf8'),
    publicKey: row.public_key,
  };
}

/** How the database answered a verified signature: `unknown` when the key is gone. */
export type Acceptance = 'accepted' | 'replayed' | 'blocked' | 'not-permitted' | 'unknown';

/**
 * Records a verified (key, signature) pair, in one round trip that also reads the key's current
 * state: a key blocked or deleted a moment ago, on any instance, is refused at once. The primary
 * key makes the pair count once across every instance on the database.
 *
 * `permission` is a function name (the key must list it) or `deploy` (the key must hold it).
 */
export async function acceptSignature(
  knex: Knex,
  keyId: string,
  signature: string,
  permission: { function: string } | { deploy: true },
  expiresAt: Date,
): Promise<Acceptance> {
  const hash = createHash('sha256').update(signature).digest('hex');
  const [permitted, permittedBindings] = 'function' in permission ? ['functions @> ?::jsonb', [JSON.stringify([permission.function])]] : ['deploy', []];
  const result = await knex.raw(
    `with key as (
       select blocked, ${permitted} as permitted from ${API_KEYS_TABLE} where id = ?
     ), accepted as (
       insert into ${REPLAYS_TABLE} (key_id, signature_hash, expires_at)
       select ?, ?, ? from key where not key.blocked and key.permitted
       on conflict do nothing
       returning 1
     )
     select key.blocked, key.permitted, (select count(*) from accepted)::int as accepted from key`,
    [...permittedBindings, keyId, keyId, hash, expiresAt],
  );
  const row = (result as { rows: { blocked: boolean; permitted: boolean; accepted: number }[] }).rows[0];
  if (row === undefined) return 'unknown';
  if (row.blocked) return 'blocked';
  if (!row.permitted) return 'not-permitted';
  return Number(row.accepted) === 1 ? 'accepted' : 'replayed';
}

/** Forgets signatures whose date has left the clock-skew window: they would be refused as expired anyway. */
export async function purgeExpiredSignatures(knex: Knex, now: Date = new Date()): Promise<number> {
  const rows = await knex(REPLAYS_TABLE).where('expires_at', '<', now).delete().returning('key_id');
  return rows.length;
}

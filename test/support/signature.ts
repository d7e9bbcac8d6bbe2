import { generateKeyPairSync } from 'node:crypto';
import type { Knex } from 'knex';
import request from 'supertest';
import type { App } from 'supertest/types';
import { signRequest, type SignRequestOptions, type SigningKey } from '../../lib/client';
import { createApiKey, type NewApiKey } from '../../lib';

/** An HMAC key that may call `functions`, with what a caller needs to sign. */
export async function hmacKey(knex: Knex, functions: string[], extra: Partial<NewApiKey> = {}): Promise<{ keyId: string; secret: string }> {
  const { id, secret } = await createApiKey(knex, { name: 'test key', functions, ...extra });
  return { keyId: id, secret: secret as string };
}

/** A public-key key (RSA or Ed25519) that may call `functions`, with its private key for signing. */
export async function publicKeyKey(knex: Knex, algorithm: 'rsa-sha256' | 'ed25519', functions: string[]): Promise<{ keyId: string; privateKey: string }> {
  const pair = algorithm === 'rsa-sha256' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ed25519');
  const { id } = await createApiKey(knex, { name: `test ${algorithm} key`, functions, algorithm, publicKey: pair.publicKey.export({ type: 'spki', format: 'pem' }).toString() });
  return { keyId: id, privateKey: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** A signed JSON POST through supertest (no `body`: an empty one); `tamper` changes the headers after signing. */
export function signedPost(
  app: App,
  path: string,
  key: SigningKey,
  body?: unknown,
  options: Partial<Pick<SignRequestOptions, 'date' | 'digest'>> & { tamper?: (headers: Record<string, string>) => void; send?: string } = {},
): request.Test {
  const payload = body === undefined ? '' : JSON.stringify(body);
  const headers = signRequest({ ...key, method: 'POST', url: path, body: payload, date: options.date, digest: options.digest });
  options.tamper?.(headers);
  const test = request(app).post(path).set(headers).set('Content-Type', 'application/json');
  const sent = options.send ?? payload;
  return sent === '' ? test : test.send(sent);
}

/** An expiry an hour away, for a key that is good now. */
export const inAnHour = (): number => Date.now() + 3_600_000;

/** Makes key `id` expired a second ago, by the database's clock (which the service reads); answers when, as ISO text. */
export async function expireKey(knex: Knex, id: string): Promise<string> {
  const [row] = (await knex('bcms_api_keys')
    .where({ id })
    .update({ expires_at: knex.raw("now() - interval '1 second'") })
    .returning('expires_at')) as { expires_at: Date }[];
  return new Date(row!.expires_at).toISOString();
}

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { createBcmsClient } from '@becomes/cms-client';
import { createBcmsFunction } from '../../lib';
import { bcmsClientSignature } from '../../lib/bcms/client/signature';
import { buildApp, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';

// Keys with an expiry (issue 23), signed the BCMS client's way: past it, 401 KEY_EXPIRED with the
// scheme's challenge, on a function call and on the access list the client reads first.

const report = createBcmsFunction(async () => ({ config: { name: 'report', public: false }, handler: async () => ({ ok: true }) }));
const CHALLENGE = 'BCMS-Client realm="bcms",params="key nonce timestamp signature"';

/** A POST to a function, signed as the BCMS client signs it. */
async function clientCall(origin: string, name: string, key: { keyId: string; secret: string }, payload: unknown) {
  const body = JSON.stringify(payload);
  const nonce = randomBytes(3).toString('hex');
  const timestamp = String(Date.now());
  const signature = bcmsClientSignature({ secret: key.secret, nonce, timestamp, key: key.keyId, body });
  const query = new URLSearchParams({ key: key.keyId, nonce, timestamp, signature });
  const response = await fetch(`${origin}/api/function/${name}?${query}`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
  return { status: response.status, body: (await response.json()) as unknown, challenge: response.headers.get('www-authenticate') };
}

describe.each(backends())("the BCMS client's signed calls with a key past its expiry (%s)", (backend) => {
  let db: TestDatabase;
  let t: TestApp;
  let server: Server;
  let origin: string;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
    t = await buildApp({ functions: [report] }, { database: db.knex });
    server = t.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await t.router.close();
    await db.close();
  });

  const expire = async (id: string): Promise<string> => {
    const [row] = (await db
      .knex('bcms_api_keys')
      .where({ id })
      .update({ expires_at: db.knex.raw("now() - interval '1 second'") })
      .returning('expires_at')) as { expires_at: Date }[];
    return new Date(row!.expires_at).toISOString();
  };

  test('a function call: 200 before the expiry; after it, 401 KEY_EXPIRED with the BCMS-Client challenge', async () => {
    const live = await hmacKey(db.knex, ['report'], { bcmsClient: true, expiresAt: Date.now() + 3_600_000 });
    expect(await clientCall(origin, 'report', live, { a: 1 })).toMatchObject({ status: 200, body: { success: true, result: { ok: true } } });

    const key = await hmacKey(db.knex, ['report'], { bcmsClient: true, expiresAt: Date.now() + 3_600_000 });
    const when = await expire(key.keyId);
    expect(await clientCall(origin, 'report', key, { a: 1 })).toEqual({
      status: 401,
      body: { success: false, error: { code: 'KEY_EXPIRED', message: `This API key expired at ${when}: sign with a key that has not (bcms-ext keys create).` } },
      challenge: CHALLENGE,
    });
    // Held in memory by now, then past its expiry in the database: refused by the database's clock.
    await expire(live.keyId);
    expect(await clientCall(origin, 'report', live, { a: 2 })).toMatchObject({ status: 401, body: { success: false, error: { code: 'KEY_EXPIRED' } }, challenge: CHALLENGE });
  });

  test("@becomes/cms-client itself: its access list is refused, so its call rejects with the service's 401", async () => {
    const key = await hmacKey(db.knex, ['report'], { bcmsClient: true, expiresAt: Date.now() + 3_600_000 });
    await expire(key.keyId);
    const client = createBcmsClient({ cmsOrigin: origin, key: { id: key.keyId, secret: key.secret } });
    const errors = jest.spyOn(console, 'error').mockImplementation(() => {}); // the client logs what it rethrows
    let failure: { response?: { status: number; data: unknown } } | undefined;
    try {
      await client.function.call('report', { a: 1 });
    } catch (error) {
      failure = error as typeof failure;
    } finally {
      errors.mockRestore();
    }
    expect(failure?.response?.status).toBe(401);
    expect(failure?.response?.data).toMatchObject({ success: false, error: { code: 'KEY_EXPIRED' } });
  });
});

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import * as httpSignature from 'http-signature';
import request from 'supertest';
import { blockApiKey, bcmsExtensions, createBcmsFunction, deleteApiKey, keepRawBody } from '../../lib';
import { signRequest } from '../../lib/client';
import { digestHeader } from '../../lib/security/digest';
import { PURGE_MARGIN_SECONDS } from '../../lib/security/replay';
import { buildApp, memoryLogger, role, signToken, type TestApp } from '../support/app';
import { backends, openTestDatabase, serverSchema, type TestDatabase } from '../support/database';
import { hmacKey, publicKeyKey, signedPost } from '../support/signature';
import { until } from '../support/wait';

let lastAuth: unknown;
let lastBody: unknown;
const report = createBcmsFunction(async () => ({
  config: { name: 'report', public: false },
  handler: async ({ auth, request }) => {
    lastAuth = auth;
    lastBody = request.body;
    return { report: 42 };
  },
}));
const other = createBcmsFunction(async () => ({
  config: { name: 'other', public: false },
  handler: async () => 'other',
}));
const open = createBcmsFunction(async () => ({
  config: { name: 'open', public: true },
  handler: async ({ request }) => ({ body: request.body ?? null }),
}));

const PATH = '/api/function/report';
const failure = (code: string, message?: string | RegExp) => ({
  success: false,
  error: { code, message: message === undefined ? expect.any(String) : message instanceof RegExp ? expect.stringMatching(message) : message },
});

/** Waits, when needed, until early in a second: a request signed now is checked within that second. */
async function earlyInSecond(): Promise<void> {
  const ms = Date.now() % 1000;
  if (ms > 700) await new Promise((resolve) => setTimeout(resolve, 1010 - ms));
}

describe.each(backends())('signed calls to private functions (%s)', (backend) => {
  let db: TestDatabase;
  let t: TestApp;
  let key: { keyId: string; secret: string };

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    t = await buildApp({ functions: [report, other, open] }, { database: db.knex });
    key = await hmacKey(db.knex, ['report']);
  });
  afterAll(async () => {
    await t.router.close();
    await db.close();
  });

  describe('accepted', () => {
    test('hmac-sha256 with Digest: 200, the body reaches the handler, auth names the key (no secret)', async () => {
      const res = await signedPost(t.app, PATH, key, { email: 'a@example.com' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, result: { report: 42 } });
      expect(lastBody).toEqual({ email: 'a@example.com' });
      expect(lastAuth).toEqual({
        type: 'signature',
        key: { id: key.keyId, name: 'test key', algorithm: 'hmac-sha256', functions: ['report'], plugins: [] },
        // BCMS's shape of a key, beside ours
        _id: key.keyId,
        name: 'test key',
        blocked: false,
        access: { templates: [], functions: [{ name: 'report' }], plugins: [] },
      });
      expect(JSON.stringify(lastAuth)).not.toContain(key.secret);
    });

    test('Content-Digest (RFC 9530) instead of Digest', async () => {
      const res = await signedPost(t.app, PATH, key, { n: 1 }, { digest: 'content-digest' });
      expect(res.status).toBe(200);
      expect(lastBody).toEqual({ n: 1 });
    });

    test('an empty body is signed as the digest of no bytes', async () => {
      const res = await signedPost(t.app, PATH, key, undefined);
      expect(res.status).toBe(200);
      expect(lastBody).toEqual({}); // as BCMS reads a call without a body
    });

    test.each(['rsa-sha256', 'ed25519'] as const)('%s with a public key on file', async (algorithm) => {
      const pk = await publicKeyKey(db.knex, algorithm, ['report']);
      const res = await signedPost(t.app, PATH, pk, { algorithm });
      expect(res.status).toBe(200);
      expect(lastAuth).toMatchObject({ type: 'signature', key: { id: pk.keyId, algorithm } });
    });

    test('two identical calls in one second both pass: the nonce makes their signatures differ', async () => {
      const date = new Date();
      const first = await signedPost(t.app, PATH, key, { same: true }, { date });
      const second = await signedPost(t.app, PATH, key, { same: true }, { date });
      expect([first.status, second.status]).toEqual([200, 200]);
    });

    test('under a mount path: the signed (request-target) is the whole path', async () => {
      const app = express();
      app.use('/cms', t.router);
      const res = await signedPost(app, `/cms${PATH}`, key, { mounted: true });
      expect(res.status).toBe(200);
      expect(lastBody).toEqual({ mounted: true });
    });

    test('a body in windows-1252 with content-type signed: accepted, and decoded in that charset', async () => {
      const body = Buffer.from('{"name":"Zoë"}', 'latin1'); // ë: the one byte 0xEB, which UTF-8 would not read
      const contentType = 'application/json; charset=windows-1252';
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body, contentType });
      expect(headers.Authorization).toContain('headers="(request-target) date digest x-bcms-nonce content-type"');
      const send = (type: string) =>
        request(t.app)
          .post(PATH)
          .set(headers)
          .set('Content-Type', type)
          .serialize((bytes) => bytes)
          .send(body);
      // Signed, the charset cannot be changed: another one no longer verifies.
      const swapped = await send('application/json; charset=iso-8859-2');
      expect([swapped.status, swapped.body]).toEqual([401, failure('SIGNATURE_INVALID', 'The signature does not verify with this key.')]);
      const res = await send(contentType);
      expect(res.body).toEqual({ success: true, result: { report: 42 } });
      expect(lastBody).toEqual({ name: 'Zoë' });
    });

    test('a UTF-8 body needs no signed content-type: no charset, charset=utf-8, or any label of UTF-8', async () => {
      for (const type of ['application/json', 'application/json; charset=utf-8', 'application/json; charset="UTF-8"', 'application/json; charset=unicode-1-1-utf-8']) {
        const res = await signedPost(t.app, PATH, key, { name: 'Zoë ✓' }).set('Content-Type', type);
        expect([type, res.status]).toEqual([type, 200]);
        expect(lastBody).toEqual({ name: 'Zoë ✓' });
      }
    });

    test('a request signed with http-signature itself (not our client) is accepted', async () => {
      const server = t.app.listen(0);
      try {
        const { port } = server.address() as AddressInfo;
        const body = JSON.stringify({ from: 'http-signature' });
        const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = http.request(
            {
              host: '127.0.0.1',
              port,
              method: 'POST',
              path: PATH,
              headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Digest: digestHeader(body), Date: new Date().toUTCString() },
            },
            (response) => {
              let text = '';
              response.on('data', (chunk: Buffer) => (text += chunk));
              response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
            },
          );
          req.on('error', reject);
          httpSignature.sign(req, { keyId: key.keyId, key: key.secret, algorithm: 'hmac-sha256', headers: ['(request-target)', 'host', 'date', 'digest'] } as never);
          req.end(body);
        });
        expect(res.status).toBe(200);
        expect(JSON.parse(res.body)).toEqual({ success: true, result: { report: 42 } });
        expect(lastBody).toEqual({ from: 'http-signature' });
      } finally {
        server.close();
      }
    });
  });

  describe('refused', () => {
    const expectSignature401 = (res: request.Response): void => {
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Signature /);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.headers['access-control-allow-origin']).toBe('*');
    };

    test('missing: 401 SIGNATURE_REQUIRED', async () => {
      const res = await request(t.app).post(PATH).send({});
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_REQUIRED', /^This function is private/));
    });

    test('wrong scheme (Basic): 401 SIGNATURE_REQUIRED naming the scheme', async () => {
      const res = await request(t.app).post(PATH).set('Authorization', 'Basic dXNlcjpwYXNz').send({});
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_REQUIRED', /the Basic scheme is not accepted/));
    });

    test.each([
      ['no parameters', 'Signature'],
      ['bad parameter format', 'Signature keyId=abc'],
      ['no signature', 'Signature keyId="k",algorithm="hmac-sha256",headers="(request-target) date digest"'],
      ['an unsupported algorithm', 'Signature keyId="k",algorithm="md5-rot13",headers="date",signature="abc"'],
      ['a signed header that is not sent', 'Signature keyId="k",algorithm="hmac-sha256",headers="(request-target) date x-missing",signature="abc"'],
    ])('malformed (%s): 401 SIGNATURE_INVALID', async (_name, header) => {
      const res = await request(t.app).post(PATH).set('Authorization', header).set('Date', new Date().toUTCString()).send({});
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', /^Malformed signature: /));
    });

    test('two credentials joined in one header (a token inside a parameter): the message never echoes the token', async () => {
      const token = signToken([role('ADMIN', 'READ')]);
      for (const header of [
        // Echoed as the algorithm that is not supported.
        `Signature keyId="a",signature="s",algorithm=", Bearer ${token}, "`,
        // Echoed as the headers a signature covers.
        `Signature keyId="a",algorithm="hmac-sha256",signature="s",headers="(request-target) ${token} date digest"`,
        `Signature keyId="a",algorithm="hmac-sha256",signature="s",headers="(request-target) date, Bearer ${token}"`,
        `Signature keyId="a",algorithm="hmac-sha256",signature="s",headers=", Bearer ${token}"`,
      ]) {
        const res = await request(t.app).post(PATH).set('Authorization', header).set('Date', new Date().toUTCString()).set('Digest', digestHeader('{}')).send({});
        expectSignature401(res);
        for (const part of [token, ...token.split('.')]) expect(JSON.stringify(res.body).toLowerCase()).not.toContain(part.toLowerCase());
      }
    });

    test('unknown key: 401 SIGNATURE_INVALID', async () => {
      const res = await signedPost(t.app, PATH, { keyId: '7c0f3a52-0d0e-4c59-9a43-b6a2b5f0a111', secret: key.secret });
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'Unknown keyId.'));
      const notUuid = await signedPost(t.app, PATH, { keyId: "k'; drop table bcms_api_keys; --", secret: key.secret });
      expect(notUuid.body).toEqual(failure('SIGNATURE_INVALID', 'Unknown keyId.'));
    });

    test('bad signature (another secret): 401 SIGNATURE_INVALID', async () => {
      const res = await signedPost(t.app, PATH, { keyId: key.keyId, secret: 'not-the-secret' });
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
    });

    test('a header changed after signing: 401 SIGNATURE_INVALID', async () => {
      const res = await signedPost(t.app, PATH, key, {}, { tamper: (headers) => (headers['X-Bcms-Nonce'] = 'another') });
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
    });

    test('an algorithm the key is not bound to: 401 SIGNATURE_INVALID', async () => {
      const ed = await publicKeyKey(db.knex, 'ed25519', ['report']);
      const res = await signedPost(t.app, PATH, { keyId: ed.keyId, secret: key.secret });
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'This key signs with algorithm "ed25519-sha512"; the request says "hmac-sha256".'));
    });

    // Half a minute past the skew: a busy machine that checks a request seconds after it was signed
    // finds the one too new still past it (301 s ahead is 300 s ahead, within it, when checked a second later).
    test.each([
      ['too old', -330],
      ['too new', +330],
    ])('date %s (default skew 300 s): 401 SIGNATURE_EXPIRED', async (_name, offsetSeconds) => {
      const res = await signedPost(t.app, PATH, key, {}, { date: new Date(Date.now() + offsetSeconds * 1000) });
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_EXPIRED', offsetSeconds < 0 ? /^Request Date is 3\d\d s old; this service accepts 300 s/ : /^Request Date is 3\d\d s in the future/));
    });

    test('a date that is not an HTTP date: 401 SIGNATURE_INVALID', async () => {
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{}' });
      const authorization = headers.Authorization as string;
      const res = await request(t.app)
        .post(PATH)
        .set({ ...headers, Date: 'yesterday', Authorization: authorization })
        .set('Content-Type', 'application/json')
        .send('{}');
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', /^The Date header is not a date: send an HTTP date/));
    });

    test.each([
      ['date', '(request-target) digest'],
      ['(request-target)', 'date digest'],
      ['the digest', '(request-target) date'],
    ])('%s not signed: 401 SIGNATURE_INVALID saying what to cover', async (_name, covered) => {
      const date = new Date().toUTCString();
      const res = await request(t.app)
        .post(PATH)
        .set('Date', date)
        .set('Digest', digestHeader('{}'))
        .set('Authorization', `Signature keyId="${key.keyId}",algorithm="hmac-sha256",headers="${covered}",signature="abc"`)
        .set('Content-Type', 'application/json')
        .send('{}');
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', `The signature must cover (request-target), date and digest (or content-digest); it covers "${covered}".`));
    });

    test('a Digest without SHA-256: 401 SIGNATURE_INVALID', async () => {
      // Signed as it is, so only the digest's content is wrong.
      const res = await signedPostWithDigest('MD5=rL0Y20zC+Fzt72VPzMSk2A==');
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'The digest header must carry SHA-256=<base64>, the SHA-256 of the body.'));
    });

    async function signedPostWithDigest(digest: string): Promise<request.Response> {
      const { createHmac } = await import('node:crypto');
      const date = new Date().toUTCString();
      const signing = `(request-target): post ${PATH}\ndate: ${date}\ndigest: ${digest}`;
      const signature = createHmac('sha256', key.secret).update(signing).digest('base64');
      return request(t.app)
        .post(PATH)
        .set({ Date: date, Digest: digest, Authorization: `Signature keyId="${key.keyId}",algorithm="hmac-sha256",headers="(request-target) date digest",signature="${signature}"` })
        .set('Content-Type', 'application/json')
        .send('{}');
    }

    test('a captured UTF-8 call sent first with charset=windows-1252, content-type unsigned: 401 SIGNATURE_INVALID saying what to do; the original still passes', async () => {
      const body = JSON.stringify({ name: 'Zoë' }); // read as windows-1252, its UTF-8 bytes would be "ZoÃ«"
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body });
      lastBody = 'untouched';
      const replayed = await request(t.app).post(PATH).set(headers).set('Content-Type', 'application/json; charset=windows-1252').send(body);
      expectSignature401(replayed);
      expect(replayed.body).toEqual(
        failure(
          'SIGNATURE_INVALID',
          'The body\'s Content-Type declares charset "windows-1252", which the signature does not cover: sign content-type too ' +
            '(headers="(request-target) date digest content-type"), or send the body as UTF-8 (no charset, or charset=utf-8).',
        ),
      );
      expect(lastBody).toBe('untouched');
      // Refused before it was remembered: the signature is still the original's.
      const original = await request(t.app).post(PATH).set(headers).set('Content-Type', 'application/json').send(body);
      expect(original.status).toBe(200);
      expect(lastBody).toEqual({ name: 'Zoë' });
    });

    test('the body changed after signing: 401 DIGEST_MISMATCH, and the handler never runs', async () => {
      lastBody = 'untouched';
      const res = await signedPost(t.app, PATH, key, { amount: 1 }, { send: JSON.stringify({ amount: 1000 }) });
      expectSignature401(res);
      expect(res.body).toEqual(failure('DIGEST_MISMATCH', 'Body digest does not match the body.'));
      expect(lastBody).toBe('untouched');
    });

    test('body and Digest both changed: the signature no longer verifies', async () => {
      const changed = JSON.stringify({ amount: 1000 });
      const res = await signedPost(t.app, PATH, key, { amount: 1 }, { send: changed, tamper: (headers) => (headers.Digest = digestHeader(changed)) });
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
    });

    test('replay: the same signed request twice is refused the second time', async () => {
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{"n":1}' });
      const send = () => request(t.app).post(PATH).set(headers).set('Content-Type', 'application/json').send('{"n":1}');
      expect((await send()).status).toBe(200);
      const again = await send();
      expectSignature401(again);
      expect(again.body).toEqual(failure('SIGNATURE_REPLAYED', 'This signed request was already accepted once.'));
    });

    test('the same signed request five times at once: one is accepted, four are replays', async () => {
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{"race":1}' });
      const sends = Array.from({ length: 5 }, () => request(t.app).post(PATH).set(headers).set('Content-Type', 'application/json').send('{"race":1}'));
      const statuses = (await Promise.all(sends)).map((res) => (res.status === 200 ? 'ok' : res.body.error.code)).sort();
      expect(statuses).toEqual(['SIGNATURE_REPLAYED', 'SIGNATURE_REPLAYED', 'SIGNATURE_REPLAYED', 'SIGNATURE_REPLAYED', 'ok']);
    });

    test('a replay with the signature spelled another way (padding, whitespace) is still a replay', async () => {
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{"spelling":1}' });
      const send = (authorization: string) =>
        request(t.app)
          .post(PATH)
          .set({ ...headers, Authorization: authorization })
          .set('Content-Type', 'application/json')
          .send('{"spelling":1}');
      const original = headers.Authorization as string;
      expect((await send(original)).status).toBe(200);
      const signature = /signature="([^"]+)"/.exec(original)?.[1] as string;
      for (const spelling of [signature.replace(/=+$/, ''), `${signature}=`, `${signature.slice(0, 10)} ${signature.slice(10)}`]) {
        const res = await send(original.replace(signature, spelling));
        expect(res.body).toEqual(failure('SIGNATURE_REPLAYED'));
      }
    });

    test('an Ed25519 signature made non-canonical (S + the group order) is refused, not taken for a new request', async () => {
      const ed = await publicKeyKey(db.knex, 'ed25519', ['report']);
      const headers = signRequest({ ...ed, method: 'POST', url: PATH, body: '{}' });
      const send = (authorization: string) =>
        request(t.app)
          .post(PATH)
          .set({ ...headers, Authorization: authorization })
          .set('Content-Type', 'application/json')
          .send('{}');
      const original = headers.Authorization as string;
      expect((await send(original)).status).toBe(200);
      const signature = /signature="([^"]+)"/.exec(original)?.[1] as string;
      const bytes = Buffer.from(signature, 'base64');
      const order = 2n ** 252n + 27742317777372353535851937790883648493n;
      let s = 0n;
      for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(bytes[i] as number);
      s += order;
      for (let i = 32; i < 64; i++) {
        bytes[i] = Number(s & 0xffn);
        s >>= 8n;
      }
      const res = await send(original.replace(signature, bytes.toString('base64')));
      expect(res.status).toBe(401);
      expect(res.body.error.code).toMatch(/^SIGNATURE_(INVALID|REPLAYED)$/);
    });

    test('a signed digest header that is not sent: 401 SIGNATURE_INVALID', async () => {
      const res = await signedPost(t.app, PATH, key, {}, { tamper: (headers) => delete headers.Digest });
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'Malformed signature: digest was not in the request.'));
    });

    test.each([
      [
        'an unquoted signature',
        'Signature keyId="k",signature=123,algorithm="hmac-sha256",headers="(request-target) date digest"',
        /^Malformed signature: keyId, algorithm, headers and signature must be quoted strings\.$/,
      ],
      ['unquoted headers', 'Signature keyId="k",algorithm="hmac-sha256",headers=5,signature="abc"', /^Malformed signature\.$/],
    ])('%s: 401 SIGNATURE_INVALID, never a 500 or an internal message', async (_name, header, message) => {
      const res = await request(t.app).post(PATH).set('Authorization', header).set('Date', new Date().toUTCString()).set('Digest', digestHeader('{}')).send({});
      expectSignature401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', message));
    });

    test('a key that does not list the function: 403 KEY_FORBIDDEN', async () => {
      const res = await signedPost(t.app, '/api/function/other', key);
      expect(res.status).toBe(403);
      expect(res.body).toEqual(failure('KEY_FORBIDDEN', 'This API key may not call function "other": it does not list it.'));
      expect(res.headers['www-authenticate']).toBeUndefined();
    });

    test('a blocked key: 403 KEY_FORBIDDEN at once, though the router has it in memory', async () => {
      const blocked = await hmacKey(db.knex, ['report']);
      expect((await signedPost(t.app, PATH, blocked)).status).toBe(200);
      expect(await blockApiKey(db.knex, blocked.keyId)).toBe(true);
      const res = await signedPost(t.app, PATH, blocked);
      expect(res.status).toBe(403);
      expect(res.body).toEqual(failure('KEY_FORBIDDEN', 'This API key is blocked.'));
    });

    test('a deleted key: 401 SIGNATURE_INVALID at once, though the router has it in memory', async () => {
      const deleted = await hmacKey(db.knex, ['report']);
      expect((await signedPost(t.app, PATH, deleted)).status).toBe(200);
      expect(await deleteApiKey(db.knex, deleted.keyId)).toBe(true);
      const res = await signedPost(t.app, PATH, deleted);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'Unknown keyId.'));
      expect((await signedPost(t.app, PATH, deleted)).body).toEqual(failure('SIGNATURE_INVALID', 'Unknown keyId.'));
    });

    test('a signed body that is not JSON: 400 INVALID_JSON; not JSON typed: 415', async () => {
      const res = await signedPost(t.app, PATH, key, undefined, { send: '{broken', tamper: (h) => (h.Digest = digestHeader('{broken')) });
      // The digest header was changed after signing: refused before the body matters.
      expect(res.status).toBe(401);
      const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{broken' });
      const broken = await request(t.app).post(PATH).set(headers).set('Content-Type', 'application/json').send('{broken');
      expect(broken.status).toBe(400);
      expect(broken.body).toEqual(failure('INVALID_JSON'));
      const text = signRequest({ ...key, method: 'POST', url: PATH, body: 'hello' });
      const typed = await request(t.app).post(PATH).set(text).set('Content-Type', 'text/plain').send('hello');
      expect(typed.status).toBe(415);
      expect(typed.body).toEqual(failure('UNSUPPORTED_MEDIA_TYPE'));
    });
  });

  test('replays are refused across routers on one database, and expired ones purged', async () => {
    const second = bcmsExtensions({ functions: [report] }, { database: db.knex, logger: memoryLogger().logger });
    await second.ready;
    const app2 = express().use(second);
    const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{}' });
    const first = await request(t.app).post(PATH).set(headers).set('Content-Type', 'application/json').send('{}');
    expect(first.status).toBe(200);
    const replayed = await request(app2).post(PATH).set(headers).set('Content-Type', 'application/json').send('{}');
    expect(replayed.status).toBe(401);
    expect(replayed.body).toEqual(failure('SIGNATURE_REPLAYED'));

    // The pair is remembered until its date leaves the window (date + 300 s) and the margin, then
    // purged: a fresh router purges on its first accepted call.
    const longAgo = new Date(Date.now() - (PURGE_MARGIN_SECONDS + 10) * 1000);
    await db.knex('bcms_signature_replays').insert({ key_id: key.keyId, signed_hash: 'expired-one', expires_at: longAgo });
    const third = bcmsExtensions({ functions: [report] }, { database: db.knex, logger: memoryLogger().logger });
    await third.ready;
    expect((await signedPost(express().use(third), PATH, key)).status).toBe(200);
    // The purge runs after the answer, not before it: whenever a busy machine gets to it.
    await until(async () => Number((await db.knex('bcms_signature_replays').where({ signed_hash: 'expired-one' }).count({ n: '*' }))[0]?.n) === 0, 20);
    expect(await db.knex('bcms_signature_replays').where({ signed_hash: 'expired-one' })).toEqual([]);
    const kept = await db.knex('bcms_signature_replays').where({ key_id: key.keyId }).select('expires_at');
    expect(kept.length).toBeGreaterThan(0);
    for (const row of kept) expect(new Date(row.expires_at).getTime()).toBeGreaterThan(Date.now());
    await second.close();
    await third.close();
  });

  test('signature.clockSkewSeconds 0 means zero: this second passes, the last one does not', async () => {
    const strict = bcmsExtensions({ functions: [report] }, { database: db.knex, logger: memoryLogger().logger, signature: { clockSkewSeconds: 0 } });
    await strict.ready;
    const app = express().use(strict);
    // A request checked within the second it was signed in passes. A busy machine may check it in the
    // next: such a try tells nothing, and another is sent, until one went and came back within its second.
    let inItsSecond: request.Response | undefined;
    await until(async () => {
      await earlyInSecond();
      const signedAt = new Date();
      const res = await signedPost(app, PATH, key, {}, { date: signedAt });
      if (Math.floor(Date.now() / 1000) !== Math.floor(signedAt.getTime() / 1000)) return false;
      inItsSecond = res;
      return true;
    }, 1);
    expect(inItsSecond?.status).toBe(200);
    await earlyInSecond();
    // A second old, or more when a busy machine checks it later: refused all the same.
    const late = await signedPost(app, PATH, key, {}, { date: new Date(Date.now() - 1000) });
    expect(late.body).toEqual(failure('SIGNATURE_EXPIRED', /^Request Date is [1-9]\d* s old; this service accepts 0 s either way/));
    await strict.close();
  });
});

describe('a host body parser mounted before the router', () => {
  test('a signed call: 500 BODY_ALREADY_PARSED, and the log says to mount the router first, with no credential; unsigned routes keep working', async () => {
    const db = await openTestDatabase('pglite');
    const log = memoryLogger();
    const router = bcmsExtensions({ functions: [report, open] }, { database: db.knex, logger: log.logger });
    const app = express();
    app.use(express.json());
    app.use(router);
    await router.ready;
    const key = await hmacKey(db.knex, ['report']);
    const headers: Record<string, string> = {};
    const res = await signedPost(app, `${PATH}?access_token=query-secret&page=2`, key, { parsed: 'twice' }, { tamper: (signed) => Object.assign(headers, signed) });
    expect(res.status).toBe(500);
    expect(res.body).toEqual(
      failure(
        'BODY_ALREADY_PARSED',
        `A body parser ran before the router, so the signed body cannot be checked: mount the router first, or give the parser verify: keepRawBody. Request id: ${res.headers['x-request-id']}.`,
      ),
    );
    const logged = log.lines.find((line) => /Mount the router before express\.json\(\)/.test(String(line.msg)));
    expect(logged).toMatchObject({ level: 50, requestId: res.headers['x-request-id'], path: `${PATH}?access_token=[redacted]&page=2` });
    const signature = /signature="([^"]+)"/.exec(headers.Authorization as string)?.[1] as string;
    for (const secret of ['query-secret', signature, headers.Authorization as string, key.secret]) expect(log.text()).not.toContain(secret);
    const unsigned = await request(app).post('/api/function/open').send({ parsedBy: 'host' });
    expect(unsigned.body).toEqual({ success: true, result: { body: { parsedBy: 'host' } } });
    await router.close();
    await db.close();
  });

  test('with verify: keepRawBody, signed calls work: checked over the bytes the parser kept, a tampered body refused', async () => {
    const db = await openTestDatabase('pglite');
    const router = bcmsExtensions({ functions: [report, open] }, { database: db.knex, logger: memoryLogger().logger });
    const app = express();
    app.use(express.json({ verify: keepRawBody }));
    app.use(router);
    await router.ready;
    const key = await hmacKey(db.knex, ['report']);
    const ok = await signedPost(app, PATH, key, { parsed: 'once' });
    expect([ok.status, ok.body.success]).toEqual([200, true]);
    // Signed over one body, sent with another: the kept bytes are the sent ones, so the digest does not match.
    const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{"amount":1}' });
    const tampered = await request(app).post(PATH).set(headers).set('Content-Type', 'application/json').send('{"amount":1000}');
    expect([tampered.status, tampered.body.error?.code]).toEqual([401, 'DIGEST_MISMATCH']);
    await router.close();
    await db.close();
  });
});

// Two instances each with a pool of their own on one server: the replay memory is the database's.
(process.env.DATABASE_URL ? describe : describe.skip)('two instances, each with its own pool, on one Postgres server', () => {
  test('the same signed request sent to both at once, thirty times: exactly one is accepted each time', async () => {
    const { url, drop } = await serverSchema('bcms_two_pools');
    const first = bcmsExtensions({ functions: [report] }, { database: url, logger: memoryLogger().logger });
    const second = bcmsExtensions({ functions: [report] }, { database: url, logger: memoryLogger().logger });
    try {
      await Promise.all([first.ready, second.ready]);
      const apps = [express().use(first), express().use(second)];
      const key = await hmacKey(first.db, ['report']);
      for (let round = 0; round < 30; round++) {
        const headers = signRequest({ ...key, method: 'POST', url: PATH, body: '{}' });
        const sends = [0, 1, 0, 1].map((i) =>
          request(apps[i] as express.Express)
            .post(PATH)
            .set(headers)
            .set('Content-Type', 'application/json')
            .send('{}'),
        );
        const statuses = (await Promise.all(sends)).map((res) => res.status).sort();
        expect(statuses).toEqual([200, 401, 401, 401]);
      }
    } finally {
      await first.close();
      await second.close();
      await drop();
    }
  });
});

import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBcmsClient } from '@becomes/cms-client';
import { createBcmsClientSecurity } from '@becomes/cms-client/util';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, blockApiKey, createApiKey, createBcmsFunction, listApiKeys, type BcmsExtensionsRouter } from '../../lib';
import { signRequest } from '../../lib/client';
import { bcmsClientSignature, clientSignatureQuery } from '../../lib/bcms/client/signature';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, serverSchema, type TestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';

/** What the private `echo` function last saw. */
let lastEcho: { body: unknown; auth: unknown } | undefined;
const echo = createBcmsFunction(async () => ({
  config: { name: 'echo', public: false },
  handler: async ({ request, auth }) => {
    lastEcho = { body: request.body, auth };
    return { received: request.body };
  },
}));
/** Returns `request.body.value`: a falsy one pins the client's quirk. */
const value = createBcmsFunction(async () => ({
  config: { name: 'value', public: false },
  handler: async ({ request }) => (request.body as { value: unknown }).value,
}));
const other = createBcmsFunction(async () => ({ config: { name: 'other', public: false }, handler: async () => 'other' }));
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => ({ hello: 'world' }) }));
const FUNCTIONS = [echo, value, other, hello];

type Key = { id: string; secret: string };
type Seen = { method: string; url: string; contentType: string | undefined; contentLength: string | undefined; status?: number };

const failure = (code: string, message?: string | RegExp) => ({
  success: false,
  error: { code, message: message === undefined ? expect.any(String) : message instanceof RegExp ? expect.stringMatching(message) : message },
});

/** A router on a real port, behind a host middleware that notes every request (never its body) and the status it got. */
async function listen(router: BcmsExtensionsRouter): Promise<{ origin: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const app = express();
  app.use((req, res, next) => {
    const entry: Seen = { method: req.method, url: req.originalUrl, contentType: req.headers['content-type'], contentLength: req.headers['content-length'] };
    seen.push(entry);
    res.on('finish', () => (entry.status = res.statusCode));
    next();
  });
  app.use(router);
  await router.ready;
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A URL signed by the BCMS client's own signer (`@becomes/cms-client/util`), built as the client
 * builds it. `at`: the clock the signer reads (only its own Date.now call is changed).
 */
function clientSignedUrl(origin: string, path: string, key: Key, payload: unknown = {}, at?: number): string {
  const security = createBcmsClientSecurity({ apiKeyId: key.id, apiKeySecret: key.secret });
  let signature: ReturnType<typeof security.sign>;
  if (at === undefined) {
    signature = security.sign(payload);
  } else {
    const now = jest.spyOn(Date, 'now').mockReturnValueOnce(at);
    signature = security.sign(payload);
    now.mockRestore();
  }
  const query = `key=${encodeURIComponent(signature.k)}&nonce=${encodeURIComponent(signature.n)}&timestamp=${encodeURIComponent(String(signature.t))}&signature=${encodeURIComponent(signature.s)}`;
  return `${origin}${path}?${query}`;
}

/** POSTs `body` (text, sent as JSON) to a URL; resolves to the status, the parsed answer and its WWW-Authenticate. */
async function post(url: string, body?: string, type = 'application/json'): Promise<{ status: number; body: unknown; challenge: string | null }> {
  const response = await fetch(url, { method: 'POST', body, headers: body === undefined ? {} : { 'Content-Type': type } });
  return { status: response.status, body: await response.json(), challenge: response.headers.get('www-authenticate') };
}

/** What the client throws on an HTTP error: axios's error, with the service's answer. */
type AxiosFailure = { response?: { status: number; data: unknown; headers: Record<string, string> } };
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to reject');
}

describe('the BCMS client signature itself', () => {
  test('the reference test vector (bcms-v3-reference.md 1f), with a body and signed over {}', () => {
    const vector = { secret: 'secret', nonce: 'a1b2c3', timestamp: '1700000000000', key: '64f0c0ffee0000000000abcd' };
    expect(bcmsClientSignature({ ...vector, body: '{"email":"a@example.com"}' })).toBe('00a716fc58f8aa1f0e942b981abc259ea4ef58b27ff260aa2dda91cadb71b41d');
    expect(bcmsClientSignature({ ...vector, body: '{}' })).toBe('805b7037477e0e6919b12bebf30be3a1cc4e31af8cb2f2e0248b3525ba9ee2b9');
  });

  test("it agrees with the client's own signer (same nonce, timestamp and key)", () => {
    const key = { id: '7c0f3a52-0d0e-4c59-9a43-b6a2b5f0a111', secret: 'a-secret' };
    const signed = createBcmsClientSecurity({ apiKeyId: key.id, apiKeySecret: key.secret }).sign({ name: 'Ada ✓', list: [1, 'é'] });
    const ours = bcmsClientSignature({ secret: key.secret, nonce: signed.n, timestamp: String(signed.t), key: key.id, body: JSON.stringify({ name: 'Ada ✓', list: [1, 'é'] }) });
    expect(ours).toBe(signed.s);
  });
});

test("a request is taken for the client's only with a signature parameter, wherever it is in the query", () => {
  expect(clientSignatureQuery('/api/function/f?key=k&signature=ab')).toBe('key=k&signature=ab');
  expect(clientSignatureQuery('/api/function/f?xsignature=1&signature=ab')).toBe('xsignature=1&signature=ab');
  expect(clientSignatureQuery('/api/function/f?xsignature=1')).toBeUndefined();
  expect(clientSignatureQuery('/api/function/f/signature=1')).toBeUndefined();
  expect(clientSignatureQuery('/api/function/f')).toBeUndefined();
});

describe('keys that accept the BCMS client', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase('pglite');
  });
  afterAll(() => db.close());

  test('bcmsClient: true is kept and listed; false by default', async () => {
    const flagged = await createApiKey(db.knex, { name: 'site', functions: ['echo'], bcmsClient: true });
    const plain = await createApiKey(db.knex, { name: 'plain', functions: ['echo'] });
    const keys = await listApiKeys(db.knex);
    expect(keys.find((key) => key.id === flagged.id)).toMatchObject({ bcmsClient: true, algorithm: 'hmac-sha256' });
    expect(keys.find((key) => key.id === plain.id)).toMatchObject({ bcmsClient: false });
  });

  test('only an hmac-sha256 key can have it: the client signs with a shared secret', async () => {
    const { generateKeyPairSync } = await import('node:crypto');
    const publicKey = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
    await expect(createApiKey(db.knex, { name: 'x', functions: [], algorithm: 'ed25519', publicKey, bcmsClient: true })).rejects.toThrow(
      new TypeError('bcmsClient needs an hmac-sha256 key: the BCMS client signs with a shared secret, and an ed25519 key has none'),
    );
    await expect(createApiKey(db.knex, { name: 'x', functions: [], bcmsClient: 'yes' as never })).rejects.toThrow(new TypeError('API key bcmsClient must be true or false'));
    // The database refuses it too, whoever writes the row.
    await expect(db.knex('bcms_api_keys').insert({ name: 'raw', algorithm: 'ed25519', public_key: publicKey, bcms_client: true })).rejects.toThrow(/bcms_api_keys_bcms_client_hmac/);
  });
});

describe.each(backends())('the BCMS client (@becomes/cms-client 3.4.1) against a router on a real port (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let service: Awaited<ReturnType<typeof listen>>;
  let key: Key;
  let plain: Key;
  let consoleError: jest.SpyInstance;

  const client = (k: Key = key) => createBcmsClient({ cmsOrigin: service.origin, key: k });
  const newKey = async (extra: { functions?: string[]; bcmsClient?: boolean } = {}): Promise<Key> => {
    const { id, secret } = await createApiKey(db.knex, { name: 'site', functions: extra.functions ?? ['echo', 'value'], bcmsClient: extra.bcmsClient ?? true });
    return { id, secret: secret as string };
  };

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    router = bcmsExtensions({ functions: FUNCTIONS }, { database: db.knex, logger: memoryLogger().logger });
    service = await listen(router);
    key = await newKey();
    plain = await newKey({ bcmsClient: false });
  });
  afterAll(async () => {
    await service.close();
    await router.close();
    await db.close();
  });
  // The client logs every error it rethrows with console.error: kept out of the test output.
  beforeEach(() => {
    consoleError = jest.spyOn(console, 'error').mockImplementation(() => {});
  });
  afterEach(() => consoleError.mockRestore());

  const since = (mark: number) => service.seen.slice(mark);

  describe('accepted', () => {
    test('a public function: the client asks the access list first, then calls; call resolves to the whole { success, result } body', async () => {
      const mark = service.seen.length;
      await expect(client().function.call('hello')).resolves.toEqual({ success: true, result: { hello: 'world' } });
      const seen = since(mark);
      expect(seen.map((s) => `${s.method} ${s.url.split('?')[0]} ${s.status}`)).toEqual(['GET /api/key/access/list 200', 'POST /api/function/hello 200']);
      expect(seen[0]?.url).toMatch(new RegExp(`^/api/key/access/list\\?key=${key.id}&nonce=[0-9a-f]{6}&timestamp=\\d{13}&signature=[0-9a-f]{64}$`));
    });

    test('a private function with a payload: the handler gets the body as sent, auth names the key (no secret)', async () => {
      const payload = { email: 'a@example.com', note: 'é ✓ & = ?', nested: { list: [1, 2.5, null] } };
      await expect(client().function.call('echo', payload)).resolves.toEqual({ success: true, result: { received: payload } });
      expect(lastEcho?.body).toEqual(payload);
      expect(lastEcho?.auth).toEqual({
        type: 'signature',
        key: { id: key.id, name: 'site', algorithm: 'hmac-sha256', functions: ['echo', 'value'], plugins: [] },
        _id: key.id,
        name: 'site',
        blocked: false,
        access: { templates: [], functions: [{ name: 'echo' }, { name: 'value' }], plugins: [] },
      });
      expect(JSON.stringify(lastEcho?.auth)).not.toContain(key.secret);
    });

    test('an array payload', async () => {
      await expect(client().function.call('echo', [1, 'two'])).resolves.toEqual({ success: true, result: { received: [1, 'two'] } });
    });

    test('no payload: signed over {}, sent empty and typed application/x-www-form-urlencoded (axios); request.body is {}, not a 415', async () => {
      const mark = service.seen.length;
      await expect(client().function.call('echo')).resolves.toEqual({ success: true, result: { received: {} } });
      const call = since(mark).find((s) => s.url.startsWith('/api/function/echo'));
      expect(call).toMatchObject({ method: 'POST', contentType: 'application/x-www-form-urlencoded', contentLength: '0', status: 200 });
      expect(lastEcho?.body).toEqual({});
    });

    test('the access list: the functions the key lists, then every public one', async () => {
      expect(await client().getKeyAccess()).toEqual({ templates: [], functions: [{ name: 'echo' }, { name: 'value' }, { name: 'hello' }], plugins: [] });
    });
  });

  describe("the client's quirks, pinned", () => {
    test.each([
      ['null', null],
      ['0', 0],
      ['false', false],
      ["''", ''],
    ])('a function returning %s: a 200, yet call() throws the body', async (_name, result) => {
      const mark = service.seen.length;
      const thrown = await rejectionOf(client().function.call('value', { value: result }));
      expect(thrown).toEqual({ success: true, result });
      expect(since(mark).find((s) => s.url.startsWith('/api/function/value'))?.status).toBe(200);
    });

    test("a failing access list fails every call, a public function's too (here: a key without the flag)", async () => {
      const mark = service.seen.length;
      const thrown = (await rejectionOf(client(plain).function.call('hello'))) as AxiosFailure;
      expect(thrown.response?.status).toBe(401);
      expect(since(mark).map((s) => `${s.method} ${s.url.split('?')[0]}`)).toEqual(['GET /api/key/access/list']);
      expect(consoleError).toHaveBeenCalled(); // the client logs it, then rethrows
    });

    test('the list is asked once per client object, before its first call', async () => {
      const mark = service.seen.length;
      const one = client();
      await one.function.call('echo', { n: 1 });
      await one.function.call('hello');
      expect(since(mark).map((s) => `${s.method} ${s.url.split('?')[0]}`)).toEqual(['GET /api/key/access/list', 'POST /api/function/echo', 'POST /api/function/hello']);
    });

    test('a null payload (signed as "null", sent as no body) and a string payload (sent as a form body) are refused', async () => {
      const nothing = (await rejectionOf(client().function.call('echo', null))) as AxiosFailure;
      expect(nothing.response?.status).toBe(401);
      expect(nothing.response?.data).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
      const text = (await rejectionOf(client().function.call('echo', 'hello'))) as AxiosFailure;
      expect(text.response?.status).toBe(415);
      expect(text.response?.data).toEqual(failure('UNSUPPORTED_MEDIA_TYPE'));
    });

    test('a function the key does not list: the client answers itself, { success: false }, and never calls', async () => {
      const mark = service.seen.length;
      const answer = await client().function.call('other');
      expect(answer).toEqual({ success: false, result: { message: 'You do not have permission to call "other" function. Allowed functions: echo, value, hello' } });
      expect(since(mark).some((s) => s.url.startsWith('/api/function/other'))).toBe(false);
    });
  });

  describe('refused', () => {
    const expectClient401 = (res: { status: number; challenge: string | null }) => {
      expect(res.status).toBe(401);
      expect(res.challenge).toBe('BCMS-Client realm="bcms",params="key nonce timestamp signature"');
    };

    test('a function the key does not list, signed anyway: 403 KEY_FORBIDDEN', async () => {
      const res = await post(clientSignedUrl(service.origin, '/api/function/other', key), '{}');
      expect(res.status).toBe(403);
      expect(res.body).toEqual(failure('KEY_FORBIDDEN', 'This API key may not call function "other": it does not list it.'));
      expect(res.challenge).toBeNull();
    });

    test('a blocked key: its calls get 403 KEY_FORBIDDEN at once, through a client that already has the list, and a new client gets nothing', async () => {
      const blocked = await newKey();
      const before = client(blocked);
      await expect(before.function.call('echo', { n: 1 })).resolves.toEqual({ success: true, result: { received: { n: 1 } } });
      expect(await blockApiKey(db.knex, blocked.id)).toBe(true);
      const thrown = (await rejectionOf(before.function.call('echo', { n: 2 }))) as AxiosFailure;
      expect(thrown.response?.status).toBe(403);
      expect(thrown.response?.data).toEqual(failure('KEY_FORBIDDEN', 'This API key is blocked.'));
      const fresh = (await rejectionOf(client(blocked).function.call('hello'))) as AxiosFailure;
      expect(fresh.response?.status).toBe(403);
      expect(fresh.response?.data).toEqual(failure('KEY_FORBIDDEN', 'This API key is blocked.'));
    });

    test('a key without the flag: 401 saying how to enable it', async () => {
      const thrown = (await rejectionOf(client(plain).getKeyAccess())) as AxiosFailure;
      expect(thrown.response?.status).toBe(401);
      expect(thrown.response?.data).toEqual(failure('SIGNATURE_INVALID', /does not accept the BCMS client's signed calls\. .*bcmsClient: true \(bcms-ext keys create --bcms-client\)/));
      const res = await post(clientSignedUrl(service.origin, '/api/function/echo', plain, { n: 1 }), '{"n":1}');
      expectClient401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', /bcms-ext keys create --bcms-client/));
    });

    test('a replay: the URL and body of a call the client made, sent again, are refused', async () => {
      const mark = service.seen.length;
      await client().function.call('echo', { pay: 10 });
      const call = since(mark).find((s) => s.url.startsWith('/api/function/echo')) as Seen;
      const again = await post(service.origin + call.url, JSON.stringify({ pay: 10 }));
      expectClient401(again);
      expect(again.body).toEqual(failure('SIGNATURE_REPLAYED', 'This signed request was already accepted once.'));
    });

    test("the access list's signature (over {}) replayed on a function, whose path it never signed: refused as a replay", async () => {
      const mark = service.seen.length;
      await client().getKeyAccess();
      const list = since(mark).find((s) => s.url.startsWith('/api/key/access/list')) as Seen;
      const moved = await post(`${service.origin}/api/function/echo${list.url.slice(list.url.indexOf('?'))}`);
      expectClient401(moved);
      expect(moved.body).toEqual(failure('SIGNATURE_REPLAYED'));
    });

    test('the same signed request to two routers on one database: the second is a replay', async () => {
      const second = bcmsExtensions({ functions: FUNCTIONS }, { database: db.knex, logger: memoryLogger().logger });
      const other = await listen(second);
      try {
        const url = clientSignedUrl(service.origin, '/api/function/echo', key, { once: true });
        expect((await post(url, '{"once":true}')).status).toBe(200);
        const replayed = await post(url.replace(service.origin, other.origin), '{"once":true}');
        expectClient401(replayed);
        expect(replayed.body).toEqual(failure('SIGNATURE_REPLAYED'));
      } finally {
        await other.close();
        await second.close();
      }
    });

    test('the same signed request sent five times at once: one accepted', async () => {
      const url = clientSignedUrl(service.origin, '/api/function/echo', key, { race: 1 });
      const answers = await Promise.all(Array.from({ length: 5 }, () => post(url, '{"race":1}')));
      expect(answers.map((res) => (res.status === 200 ? 'ok' : (res.body as { error: { code: string } }).error.code)).sort()).toEqual([
        'SIGNATURE_REPLAYED',
        'SIGNATURE_REPLAYED',
        'SIGNATURE_REPLAYED',
        'SIGNATURE_REPLAYED',
        'ok',
      ]);
    });

    test('a tampered body: 401 SIGNATURE_INVALID, and the handler never runs', async () => {
      lastEcho = undefined;
      const url = clientSignedUrl(service.origin, '/api/function/echo', key, { amount: 1 });
      const res = await post(url, JSON.stringify({ amount: 1000 }));
      expectClient401(res);
      expect(res.body).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
      expect(lastEcho).toBeUndefined();
    });

    test('a body declared in a charset other than UTF-8: 401 SIGNATURE_INVALID, as the scheme signs no header; the same call in UTF-8 passes', async () => {
      lastEcho = undefined;
      const payload = { name: 'Zoë' };
      const url = clientSignedUrl(service.origin, '/api/function/echo', key, payload);
      const refused = await post(url, JSON.stringify(payload), 'application/json; charset=windows-1252');
      expectClient401(refused);
      expect(refused.body).toEqual(
        failure(
          'SIGNATURE_INVALID',
          'The body\'s Content-Type declares charset "windows-1252", and the BCMS client\'s signature cannot cover Content-Type: ' +
            'send the body as UTF-8 (no charset, or charset=utf-8), or sign with an HTTP Signature that covers content-type.',
        ),
      );
      expect(lastEcho).toBeUndefined();
      const sent = await post(url, JSON.stringify(payload), 'application/json; charset=utf-8');
      expect(sent).toMatchObject({ status: 200, body: { success: true, result: { received: payload } } });
    });

    test("behind a host body parser: 500 BODY_ALREADY_PARSED, logged with the URL's credentials [redacted]; no log line holds the signature", async () => {
      const log = memoryLogger();
      const behind = bcmsExtensions({ functions: FUNCTIONS }, { database: db.knex, logger: log.logger });
      await behind.ready;
      try {
        const signed = new URL(clientSignedUrl('http://x', '/api/function/echo', key, { n: 1 }));
        const target = signed.pathname + signed.search;
        const parsed = await request(express().use(express.json()).use(behind)).post(target).set('Content-Type', 'application/json').send('{"n":1}');
        expect([parsed.status, parsed.body]).toEqual([500, failure('BODY_ALREADY_PARSED')]);
        const logged = log.lines.find((line) => /Mount the router before express\.json\(\)/.test(String(line.msg)));
        expect(logged).toMatchObject({ level: 50, requestId: parsed.headers['x-request-id'], path: '/api/function/echo?key=[redacted]&nonce=[redacted]&timestamp=[redacted]&signature=[redacted]' });
        // The signature was still good: a log that held it would hand a call to whoever reads it.
        const direct = await request(express().use(behind)).post(target).set('Content-Type', 'application/json').send('{"n":1}');
        expect(direct.body).toEqual({ success: true, result: { received: { n: 1 } } });
        expect(log.lines.filter((line) => line.msg === 'request').map((line) => [line.path, line.status])).toEqual([
          ['/api/function/echo', 500],
          ['/api/function/echo', 200],
        ]);
        for (const credential of [signed.searchParams.get('signature') as string, key.secret]) expect(log.text()).not.toContain(credential);
      } finally {
        await behind.close();
      }
    });

    test('the same JSON value spelled another way (whitespace, key order) is not what was signed: refused', async () => {
      const url = clientSignedUrl(service.origin, '/api/function/echo', key, { a: 1, b: 2 });
      for (const spelling of ['{"a": 1, "b": 2}', '{"b":2,"a":1}', '{"a":1,"a":1,"b":2}']) {
        expect((await post(url, spelling)).body).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
      }
      expect((await post(url, '{"a":1,"b":2}')).status).toBe(200);
    });

    // Half a minute past the skew either way: a busy machine that checks a call seconds after it was
    // signed finds the one too new still past it (301 s ahead is 300 s ahead, within it, a second later).
    test.each([
      ['too old', -330_000, /^Request timestamp is 3\d\d s old; this service accepts 300 s either way\. Its clock reads \d+/],
      ['too new', +330_000, /^Request timestamp is 3\d\d s in the future/],
    ])('a timestamp %s (default skew 300 s): 401 SIGNATURE_EXPIRED', async (_name, offset, message) => {
      const res = await post(clientSignedUrl(service.origin, '/api/function/echo', key, { n: 1 }, Date.now() + offset), '{"n":1}');
      expectClient401(res);
      expect(res.body).toEqual(failure('SIGNATURE_EXPIRED', message));
    });

    test('a timestamp within the window either way is accepted', async () => {
      // Half a minute within it: a call checked seconds after it was signed is still inside.
      for (const offset of [-270_000, +270_000]) {
        expect((await post(clientSignedUrl(service.origin, '/api/function/echo', key, { offset }, Date.now() + offset), JSON.stringify({ offset }))).status).toBe(200);
      }
    });

    test('another secret, an unknown key: 401 SIGNATURE_INVALID', async () => {
      const wrong = await post(clientSignedUrl(service.origin, '/api/function/echo', { id: key.id, secret: 'not-the-secret' }), '{}');
      expectClient401(wrong);
      expect(wrong.body).toEqual(failure('SIGNATURE_INVALID', 'The signature does not verify with this key.'));
      const unknown = await post(clientSignedUrl(service.origin, '/api/function/echo', { id: '7c0f3a52-0d0e-4c59-9a43-b6a2b5f0a111', secret: key.secret }), '{}');
      expect(unknown.body).toEqual(failure('SIGNATURE_INVALID', 'Unknown key.'));
      const notUuid = await post(clientSignedUrl(service.origin, '/api/function/echo', { id: "k'; drop table bcms_api_keys; --", secret: key.secret }), '{}');
      expect(notUuid.body).toEqual(failure('SIGNATURE_INVALID', 'Unknown key.'));
    });

    describe('a malformed query: 401 SIGNATURE_INVALID, never a 500', () => {
      const big = 'a'.repeat(10_240);
      const cases: [string, (q: URLSearchParams) => void, RegExp][] = [
        ['key twice', (q) => q.append('key', q.get('key') as string), /^The query parameter "key" appears 2 times; send it once\.$/],
        ['signature twice', (q) => q.append('signature', q.get('signature') as string), /"signature" appears 2 times/],
        ['timestamp twice', (q) => q.append('timestamp', '1'), /"timestamp" appears 2 times/],
        ['a non-numeric timestamp', (q) => q.set('timestamp', 'yesterday'), /^The timestamp must be the time in milliseconds since 1970/],
        ['a negative timestamp', (q) => q.set('timestamp', '-1700000000000'), /^The timestamp must be/],
        ['a timestamp in exponent form', (q) => q.set('timestamp', '1.7e12'), /^The timestamp must be/],
        ['a 10 kB timestamp', (q) => q.set('timestamp', '1'.repeat(10_240)), /^The timestamp must be/],
        ['a 10 kB key', (q) => q.set('key', big), /^Unknown key\.$/],
        ['a 10 kB nonce', (q) => q.set('nonce', big), /^The nonce is longer than 128 characters\.$/],
        ['a 10 kB signature', (q) => q.set('signature', big), /^The signature must be 64 hexadecimal digits/],
        ['a signature that is not hex', (q) => q.set('signature', 'z'.repeat(64)), /^The signature must be 64 hexadecimal digits/],
        ['no key', (q) => q.delete('key'), /^The query parameter "key" is missing/],
        ['no nonce', (q) => q.delete('nonce'), /^The query parameter "nonce" is missing/],
        ['no timestamp', (q) => q.delete('timestamp'), /^The query parameter "timestamp" is missing/],
        ['an empty signature', (q) => q.set('signature', ''), /^The query parameter "signature" is missing/],
      ];
      test.each(cases)('%s', async (_name, change, message) => {
        for (const path of ['/api/function/echo', '/api/key/access/list']) {
          const url = new URL(clientSignedUrl(service.origin, path, key, {}));
          change(url.searchParams);
          const res = path.endsWith('list')
            ? await fetch(url).then(async (r) => ({ status: r.status, body: await r.json(), challenge: r.headers.get('www-authenticate') }))
            : await post(url.toString(), '{}');
          expectClient401(res);
          expect(res.body).toEqual(failure('SIGNATURE_INVALID', message));
        }
      });
    });

    test('a body that is not JSON, signed: 400 INVALID_JSON; a body of another type: 415', async () => {
      const text = '{broken';
      const security = createBcmsClientSecurity({ apiKeyId: key.id, apiKeySecret: key.secret });
      const signature = security.sign({});
      const ours = bcmsClientSignature({ secret: key.secret, nonce: signature.n, timestamp: String(signature.t), key: key.id, body: text });
      const url = `${service.origin}/api/function/echo?key=${key.id}&nonce=${signature.n}&timestamp=${signature.t}&signature=${ours}`;
      expect((await post(url, text)).body).toEqual(failure('INVALID_JSON'));
      const typed = await post(clientSignedUrl(service.origin, '/api/function/echo', key, { n: 1 }), 'n=1', 'application/x-www-form-urlencoded');
      expect(typed.status).toBe(415);
      expect(typed.body).toEqual(failure('UNSUPPORTED_MEDIA_TYPE'));
    });
  });

  describe('the access list route', () => {
    test('unsigned: 401 SIGNATURE_REQUIRED with the challenge; another method: 405; a preflight: 204', async () => {
      const unsigned = await request(service.origin).get('/api/key/access/list');
      expect(unsigned.status).toBe(401);
      expect(unsigned.headers['www-authenticate']).toBe('BCMS-Client realm="bcms",params="key nonce timestamp signature"');
      expect(unsigned.body).toEqual(failure('SIGNATURE_REQUIRED', /^The key's access list answers the BCMS client/));
      const posted = await request(service.origin).post('/api/key/access/list').send({});
      expect(posted.status).toBe(405);
      expect(posted.headers.allow).toBe('GET, OPTIONS');
      expect((await request(service.origin).options('/api/key/access/list')).status).toBe(204);
    });

    test('a key that lists nothing still gets every public function', async () => {
      const bare = await newKey({ functions: [] });
      expect(await client(bare).getKeyAccess()).toEqual({ templates: [], functions: [{ name: 'hello' }], plugins: [] });
    });

    test("other HTTP schemes still work for a flagged key, and the client's query is ignored on public functions", async () => {
      const res = await request(service.origin)
        .post('/api/function/echo')
        .set(signRequest({ keyId: key.id, secret: key.secret, method: 'POST', url: '/api/function/echo', body: '{"http":1}' }))
        .set('Content-Type', 'application/json')
        .send('{"http":1}');
      expect(res.body).toEqual({ success: true, result: { received: { http: 1 } } });
      const junk = await post(`${service.origin}/api/function/hello?key=x&signature=nonsense`);
      expect(junk).toMatchObject({ status: 200, body: { success: true, result: { hello: 'world' } } });
    });
  });

  // Last: the deployed function stays on the list for the rest of the file.
  test('a public function deployed while the service runs is on the access list too, by name', async () => {
    const deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
    const code = `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'deployed-public', public: true }, handler: async () => 'deployed' }));`;
    const bundle = JSON.stringify({ manifest: { kind: 'function', name: 'deployed-public', version: '1.0.0', sha256: createHash('sha256').update(code).digest('hex') }, code });
    const path = '/api/extensions/deployments';
    const deployed = await fetch(service.origin + path, {
      method: 'POST',
      body: bundle,
      headers: { ...signRequest({ ...deployer, method: 'POST', url: path, body: bundle }), 'Content-Type': 'application/json' },
    });
    expect(deployed.status).toBe(201);
    const access = await client().getKeyAccess();
    expect(access.functions).toEqual([{ name: 'echo' }, { name: 'value' }, { name: 'deployed-public' }, { name: 'hello' }]);
    await expect(client().function.call('deployed-public')).resolves.toEqual({ success: true, result: 'deployed' });
  });

  // Two instances, each with a pool of its own, on one server: the replay memory is the database's.
  if (backend === 'postgres') {
    test('the same signed request to two routers with separate pools on one server: one accepted, every time', async () => {
      const { url, drop } = await serverSchema('bcms_client_pools');
      const first = bcmsExtensions({ functions: FUNCTIONS }, { database: url, logger: memoryLogger().logger });
      const second = bcmsExtensions({ functions: FUNCTIONS }, { database: url, logger: memoryLogger().logger });
      const services = [await listen(first), await listen(second)];
      try {
        const { id, secret } = await createApiKey(first.db, { name: 'pools', functions: ['echo'], bcmsClient: true });
        const poolKey = { id, secret: secret as string };
        for (let round = 0; round < 10; round++) {
          const signed = new URL(clientSignedUrl('http://x', '/api/function/echo', poolKey, { round }));
          const sends = [0, 1, 0, 1].map((i) => post(`${services[i]?.origin}${signed.pathname}${signed.search}`, JSON.stringify({ round })));
          expect((await Promise.all(sends)).map((res) => res.status).sort()).toEqual([200, 401, 401, 401]);
        }
        // The real client through one instance, its URL replayed on the other.
        const mark = services[0]?.seen.length as number;
        const real = createBcmsClient({ cmsOrigin: services[0]?.origin as string, key: poolKey });
        await expect(real.function.call('echo', { real: true })).resolves.toEqual({ success: true, result: { received: { real: true } } });
        const call = services[0]?.seen.slice(mark).find((s) => s.url.startsWith('/api/function/echo')) as Seen;
        const replayed = await post(`${services[1]?.origin}${call.url}`, '{"real":true}');
        expect(replayed.body).toEqual(failure('SIGNATURE_REPLAYED'));
      } finally {
        for (const s of services) await s.close();
        await first.close();
        await second.close();
        await drop();
      }
    });
  }
});

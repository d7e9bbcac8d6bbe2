import { generateKeyPairSync } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createBcmsFunction } from '../../lib';
import { createFunctionClient, FunctionCallError, signRequest } from '../../lib/client';
import { buildApp, freePort, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { hmacKey, publicKeyKey } from '../support/signature';

const sum = createBcmsFunction(async () => ({
  config: { name: 'sum', public: false },
  handler: async ({ request }) => (request.body as number[]).reduce((a, b) => a + b, 0),
}));
const hello = createBcmsFunction(async () => ({
  config: { name: 'hello', public: true },
  handler: async ({ request }) => `hello ${request.body?.name ?? 'world'}`,
}));
const picky = createBcmsFunction(async () => ({
  config: { name: 'picky', public: true },
  handler: async ({ errorHandler }) => {
    throw errorHandler.occurred(422, 'Field "email" is required.');
  },
}));

let t: TestApp;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  t = await buildApp({ functions: [sum, hello, picky] });
  // Mounted under a prefix: the client keeps the base URL's path, and the signature covers it.
  const host = express().use('/cms', t.app);
  server = host.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/cms`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('createFunctionClient', () => {
  test('an HMAC key: call() signs, sends, and resolves to the result; with signHost too', async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['sum']);
    const client = createFunctionClient({ url: baseUrl, key });
    expect(await client.call('sum', [1, 2, 3])).toBe(6);
    expect(await createFunctionClient({ url: baseUrl, key, signHost: true }).call('sum', [2, 2])).toBe(4);
    // Two identical calls in one second: different nonces, both accepted.
    expect(await Promise.all([client.call('sum', [1]), client.call('sum', [1])])).toEqual([1, 1]);
  });

  test.each(['rsa-sha256', 'ed25519'] as const)('a %s private key, signing Content-Digest', async (algorithm) => {
    const key = await publicKeyKey((await sharedTestDatabase()).knex, algorithm, ['sum']);
    const client = createFunctionClient({ url: `${baseUrl}/`, key, digest: 'content-digest' });
    expect(await client.call('sum', [40, 2])).toBe(42);
  });

  test('no key: public functions, with or without a body', async () => {
    const client = createFunctionClient({ url: baseUrl });
    expect(await client.call('hello')).toBe('hello world');
    expect(await client.call('hello', { name: 'Ada' })).toBe('hello Ada');
  });

  test("the service's refusal rejects with its code, status, message and request id", async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['other']);
    const error = await createFunctionClient({ url: baseUrl, key })
      .call('sum', [1])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(FunctionCallError);
    expect(error).toMatchObject({ code: 'KEY_FORBIDDEN', status: 403, message: 'This API key may not call function "sum": it does not list it.', requestId: expect.any(String) });
    const unsigned = await createFunctionClient({ url: baseUrl })
      .call('sum', [1])
      .catch((caught: unknown) => caught);
    expect(unsigned).toMatchObject({ code: 'SIGNATURE_REQUIRED', status: 401 });
    const handled = await createFunctionClient({ url: baseUrl })
      .call('picky')
      .catch((caught: unknown) => caught);
    expect(handled).toMatchObject({ code: 'HANDLER_ERROR', status: 422, message: 'Field "email" is required.' });
  });

  test('idempotencyKey: sent as Idempotency-Key; the same key and body again gets the first outcome', async () => {
    const sent: (string | null)[] = [];
    const recording: typeof fetch = (input, init) => {
      sent.push(new Headers(init?.headers).get('idempotency-key'));
      return fetch(input, init);
    };
    const client = createFunctionClient({ url: baseUrl, key: await hmacKey((await sharedTestDatabase()).knex, ['sum']), fetch: recording });
    const key = `order-${Date.now()}`;
    expect(await client.call('sum', [1, 2], { idempotencyKey: key })).toBe(3);
    expect(await client.call('sum', [1, 2], { idempotencyKey: key })).toBe(3);
    await expect(client.call('sum', [1, 3], { idempotencyKey: key })).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 422 });
    await client.call('sum', [1]);
    expect(sent).toEqual([key, key, key, null]);
  });

  test('no service there: NETWORK_ERROR; something else there: INVALID_RESPONSE', async () => {
    const port = await freePort();
    const down = await createFunctionClient({ url: `http://127.0.0.1:${port}` })
      .call('hello')
      .catch((caught: unknown) => caught);
    expect(down).toMatchObject({ name: 'FunctionCallError', code: 'NETWORK_ERROR', status: 0, message: `Could not reach http://127.0.0.1:${port} (ECONNREFUSED).` });
    const elsewhere = await createFunctionClient({ url: baseUrl.replace('/cms', '/nothing') })
      .call('hello')
      .catch((caught: unknown) => caught);
    expect(elsewhere).toMatchObject({ code: 'INVALID_RESPONSE', status: 404 });
  });

  test('a key that cannot sign is refused when the client is made', () => {
    expect(() => createFunctionClient({ url: baseUrl, key: { keyId: 'k', privateKey: 'not a key' } })).toThrow();
    expect(() => createFunctionClient({ url: baseUrl, key: { keyId: 'k' } as never })).toThrow('signRequest: secret (hmac-sha256) or privateKey (rsa-sha256, ed25519) is required');
    expect(() => createFunctionClient({ url: 'not a url' })).toThrow('createFunctionClient: url must be a URL such as http://localhost:8080, got "not a url"');
    expect(() => createFunctionClient({ baseUrl, url: baseUrl } as never)).toThrow('createFunctionClient: give url, not both url and baseUrl');
    expect(() => createFunctionClient({ url: baseUrl, key: { keyId: 'a', secret: 's' }, keyId: 'b', secret: 's' } as never)).toThrow(
      'createFunctionClient: give key: { keyId, secret }, not both key and keyId',
    );
    const { privateKey } = generateKeyPairSync('ed25519');
    expect(() => createFunctionClient({ url: baseUrl, key: { keyId: 'k', secret: 's', privateKey } as never })).toThrow('signRequest: pass secret or privateKey, not both');
  });

  test('the shape of earlier releases (baseUrl, and keyId and secret beside it) still signs and calls', async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['sum']);
    expect(await createFunctionClient({ baseUrl, ...key }).call('sum', [2, 3])).toBe(5);
    expect(await createFunctionClient({ baseUrl }).call('hello')).toBe('hello world');
  });
});

describe('signRequest', () => {
  test('returns Date, Digest, X-Bcms-Nonce and an Authorization that covers them all; host only when asked', () => {
    const date = new Date('2026-11-22T08:00:00Z');
    const headers = signRequest({ method: 'POST', url: 'https://cms.example.com/api/function/sum?x=1', body: '[1]', keyId: 'id-1', secret: 's', date, signHost: true });
    expect(headers).toEqual({
      Date: 'Sun, 22 Nov 2026 08:00:00 GMT',
      Digest: 'SHA-256=CAqe1ChVnvYCZotMAPEU8aEcP2sCpDXwvcFUV45NfyI=',
      'X-Bcms-Nonce': expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      Authorization: expect.stringMatching(/^Signature keyId="id-1",algorithm="hmac-sha256",headers="\(request-target\) host date digest x-bcms-nonce",signature="[A-Za-z0-9+/]+=*"$/),
    });
    const pathOnly = signRequest({ method: 'POST', url: '/api/function/sum', keyId: 'id-1', secret: 's', date });
    expect(pathOnly.Authorization).toContain('headers="(request-target) date digest x-bcms-nonce"');
    expect(pathOnly.Digest).toBe('SHA-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=');
    const fullUrl = signRequest({ method: 'POST', url: 'https://cms.example.com/api/function/sum', keyId: 'id-1', secret: 's', date });
    expect(fullUrl.Authorization).toContain('headers="(request-target) date digest x-bcms-nonce"');
  });

  test('refuses a keyId that would break the header, signHost without a full URL, and a contentType that is no header value', () => {
    expect(() => signRequest({ method: 'POST', url: '/x', keyId: 'a",signature="b', secret: 's' })).toThrow('signRequest: keyId is required, without quotes');
    expect(() => signRequest({ method: 'POST', url: '/x', keyId: 'k', secret: 's', signHost: true })).toThrow('signRequest: signHost needs a full url');
    expect(() => signRequest({ method: 'POST', url: '/x', keyId: 'k', secret: 's', contentType: 'application/json\r\nX-Evil: 1' })).toThrow('signRequest: contentType must be a header value');
  });

  test('contentType: returned and signed, for a body that is not UTF-8', () => {
    const headers = signRequest({ method: 'POST', url: '/x', keyId: 'k', secret: 's', contentType: ' application/json; charset=utf-16le ' });
    expect(headers['Content-Type']).toBe('application/json; charset=utf-16le');
    expect(headers.Authorization).toContain('headers="(request-target) date digest x-bcms-nonce content-type"');
  });
});

import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod } from '../../lib';
import { signRequest } from '../../lib/client';
import { buildApp, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';

const echo = createBcmsFunction(async () => ({ config: { name: 'echo', public: true }, handler: async ({ request }) => request.body }));
const privateEcho = createBcmsFunction(async () => ({ config: { name: 'private-echo', public: false }, handler: async ({ request }) => request.body }));
const plugin = createBcmsPlugin({
  name: 'notes',
  controllers: [
    createController({
      name: 'Notes',
      path: '/notes',
      methods: () => ({
        create: createControllerMethod({ path: '/', type: 'post', handler: async ({ request }) => ({ received: request.body }) }),
      }),
    }),
  ],
});

const NOTE = { title: 'Grüße, Zoë', tags: ['naïve', '日本'] };
/** What a client that declares a charset sends: the JSON text in that charset's bytes. */
const utf16le = (value: unknown): Buffer => Buffer.from(JSON.stringify(value), 'utf16le');
const utf16be = (value: unknown): Buffer => {
  const bytes = utf16le(value);
  for (let i = 0; i < bytes.length; i += 2) [bytes[i], bytes[i + 1]] = [bytes[i + 1] as number, bytes[i] as number];
  return bytes;
};

let t: TestApp;
beforeAll(async () => {
  t = await buildApp({ plugins: [plugin], functions: [echo, privateEcho] });
});

describe('bodies are decoded by the charset their Content-Type declares', () => {
  // Bytes as they are: supertest would serialise a Buffer as JSON under a JSON type.
  const post = (path: string, type: string, body: Buffer) =>
    request(t.app)
      .post(path)
      .set('Content-Type', type)
      .serialize((bytes) => bytes)
      .send(body);

  test.each([
    ['utf-16le', 'application/json; charset=utf-16le', utf16le(NOTE)],
    ['UTF-16BE, quoted and upper case', 'application/json; charset="UTF-16BE"', utf16be(NOTE)],
    ['utf-8 declared', 'application/json; charset=utf-8', Buffer.from(JSON.stringify(NOTE))],
  ])('function: %s', async (_name, type, body) => {
    const res = await post('/api/function/echo', type, body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: NOTE });
  });

  test('function: latin1 (iso-8859-1) text, whose bytes are not UTF-8', async () => {
    const res = await post('/api/function/echo', 'application/json; charset=iso-8859-1', Buffer.from('{"name":"Zoë"}', 'latin1'));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: { name: 'Zoë' } });
  });

  test('charset=utf-16 with a big-endian byte-order mark (as Java writes "UTF-16"): the mark picks the byte order', async () => {
    const res = await post('/api/function/echo', 'application/json; charset=utf-16', Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be(NOTE)]));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: NOTE });
  });

  test('any label of UTF-8 reads as UTF-8 always did; a charset inside another quoted parameter is not the charset', async () => {
    const utf8 = Buffer.from(JSON.stringify(NOTE));
    for (const type of ['application/json; charset=unicode-1-1-utf-8', 'application/json; foo="x;charset=utf-16le"', 'application/json; charset="UTF-8"']) {
      const res = await post('/api/function/echo', type, utf8);
      expect([type, res.status, res.body]).toEqual([type, 200, { success: true, result: NOTE }]);
    }
  });

  test('plugin method: utf-16le', async () => {
    const res = await post('/api/plugin/notes/notes', 'application/json; charset=utf-16le', utf16le(NOTE));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: NOTE });
  });

  test('an unknown charset: 415 naming it (function and plugin families)', async () => {
    const fn = await post('/api/function/echo', 'application/json; charset=klingon-8', Buffer.from('{}'));
    expect(fn.status).toBe(415);
    expect(fn.body).toEqual({ success: false, error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('"klingon-8"') } });
    const method = await post('/api/plugin/notes/notes', 'application/json; charset=klingon-8', Buffer.from('{}'));
    expect(method.status).toBe(415);
    expect(method.body).toEqual({ message: expect.stringContaining('"klingon-8"') });
  });

  test('bytes that are not valid in the declared charset: 400, never read as UTF-8', async () => {
    // Three bytes cannot be UTF-16 (two bytes a unit); read as UTF-8 they would be the valid JSON `{}` plus a NUL.
    const res = await post('/api/function/echo', 'application/json; charset=utf-16le', Buffer.from([0x7b, 0x7d, 0x00]));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'INVALID_JSON', message: 'Request body is not valid utf-16le text.' } });
  });

  test('UTF-16 bytes sent without a charset are not valid JSON (UTF-8 is the default): 400', async () => {
    const res = await post('/api/function/echo', 'application/json', utf16le(NOTE));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_JSON');
  });

  test('a signed private call with a utf-16le body and content-type signed: the digest covers the bytes sent, the handler gets the decoded body', async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['private-echo']);
    const body = utf16le(NOTE);
    const type = 'application/json; charset=utf-16le';
    const headers = signRequest({ ...key, method: 'POST', url: '/api/function/private-echo', body, contentType: type });
    const res = await request(t.app)
      .post('/api/function/private-echo')
      .set(headers)
      .serialize((bytes) => bytes)
      .send(body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, result: NOTE });
    // Unsigned, the charset decides what the signed bytes say: refused (test/security/signature.test.ts).
    const unsigned = signRequest({ ...key, method: 'POST', url: '/api/function/private-echo', body });
    const refused = await request(t.app)
      .post('/api/function/private-echo')
      .set(unsigned)
      .set('Content-Type', type)
      .serialize((bytes) => bytes)
      .send(body);
    expect([refused.status, refused.body.error.code]).toEqual([401, 'SIGNATURE_INVALID']);
  });
});

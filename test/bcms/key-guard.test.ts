import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBcmsClient } from '@becomes/cms-client';
import express, { type Express } from 'express';
import request from 'supertest';
import {
  BCMSRouteProtection,
  bcmsExtensions,
  blockApiKey,
  createApiKey,
  createBcmsFunction,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  JWTPermissionName,
  JWTRoleName,
  keepRawBody,
  type BcmsExtensionsRouter,
} from '../../lib';
import { signRequest } from '../../lib/client';
import { bcmsClientSignature } from '../../lib/bcms/client/signature';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { hmacKey, signedPost } from '../support/signature';

// BCMSRouteProtection.createJwtApiPreRequestHandler on plugin routes: a bearer token, or an API
// key's signature (HTTP Signature, or the BCMS client's query string) for a key that lists the plugin.

const apiGuard = BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ });

/** What the last guarded handler saw. */
let seenByHandler: { token: unknown; key: unknown; body: unknown } | undefined;

const todo = createBcmsPlugin({
  name: 'todo',
  controllers: [
    createController({
      name: 'Todo',
      path: '/todo',
      methods: () => ({
        list: createControllerMethod({
          type: 'get',
          preRequestHandler: apiGuard,
          handler: async ({ token, key, request }) => {
            seenByHandler = { token, key, body: request.body };
            return { by: token?.payload.userId ?? key?.name };
          },
        }),
        create: createControllerMethod({
          type: 'post',
          preRequestHandler: apiGuard,
          handler: async ({ token, key, request }) => {
            seenByHandler = { token, key, body: request.body };
            return { by: token?.payload.userId ?? key?.name, body: request.body ?? null };
          },
        }),
        // An author's own pre-request handler that calls the guard with a context it built.
        own: createControllerMethod({
          path: '/own',
          type: 'get',
          async preRequestHandler({ name, request, response, errorHandler, logger }) {
            const { token, key } = await apiGuard({ name, request, response, errorHandler, logger } as never);
            return { who: token?.payload.userId ?? key?._id, method: name };
          },
          handler: async ({ who, method }) => ({ who, method }),
        }),
        // BCMS's JWT-only guard: a key's signature is no token.
        jwtOnly: createControllerMethod({
          path: '/jwt-only',
          type: 'get',
          preRequestHandler: BCMSRouteProtection.createJwtPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
          handler: async () => ({ ok: true }),
        }),
      }),
    }),
  ],
});
const other = createBcmsPlugin({
  name: 'other',
  controllers: [
    createController({ name: 'Other', path: '/', methods: () => ({ hi: createControllerMethod({ path: '/hi', type: 'post', preRequestHandler: apiGuard, handler: async () => ({ hi: true }) }) }) }),
  ],
});
const whoami = createBcmsFunction(async () => ({ config: { name: 'whoami', public: false }, handler: async ({ auth }) => ({ auth }) }));
const REGISTRY = { plugins: [todo, other], functions: [whoami] };

type Key = { id: string; secret: string };
type Answer = { status: number; data: unknown; headers: Record<string, string> };

/** A host app on a real port (the BCMS client needs an origin) that notes each request's URL. */
async function listen(router: BcmsExtensionsRouter, before?: (app: Express) => void): Promise<{ origin: string; urls: string[]; close(): Promise<void> }> {
  const urls: string[] = [];
  const app = express();
  app.use((req, _res, next) => {
    urls.push(req.originalUrl);
    next();
  });
  before?.(app);
  app.use(router);
  await router.ready;
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    urls,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const TOKEN_MISSING = { message: 'Token is `undefined`.' };
const REPLAYED = { message: 'This signed request was already accepted once.' };
const CLIENT_CHALLENGE = 'BCMS-Client realm="bcms",params="key nonce timestamp signature"';
const SIGNATURE_CHALLENGE = 'Signature realm="bcms",headers="(request-target) date digest"';

describe.each(backends())('createJwtApiPreRequestHandler on plugin routes (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let service: Awaited<ReturnType<typeof listen>>;
  /** Lists the plugin `todo` (and the function `whoami`), accepts the BCMS client. */
  let site: Key;

  const newKey = async (input: { plugins?: string[]; functions?: string[]; bcmsClient?: boolean; name?: string } = {}): Promise<Key> => {
    const { id, secret } = await createApiKey(db.knex, { name: input.name ?? 'site', functions: input.functions ?? [], plugins: input.plugins ?? ['todo'], bcmsClient: input.bcmsClient ?? true });
    return { id, secret: secret as string };
  };
  /** The real BCMS client's `send`; a refusal resolves to axios's response instead of throwing. */
  const send = (key: Key, config: { url: string; method: string; data?: unknown }, origin = service.origin): Promise<unknown> =>
    createBcmsClient({ cmsOrigin: origin, key }).send({
      ...config,
      onError: async (error) => {
        const { status, data, headers } = (error as { response: Answer }).response;
        return { refused: { status, data, headers } };
      },
    });
  const refusal = (answer: unknown): Answer => (answer as { refused: Answer }).refused;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    router = bcmsExtensions(REGISTRY, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
    service = await listen(router);
    site = await newKey({ functions: ['whoami'] });
  });
  afterAll(async () => {
    await service.close();
    await router.close();
    await db.close();
  });
  beforeEach(() => {
    seenByHandler = undefined;
  });

  describe('a bearer token', () => {
    test('with a listed role holding the permission: { token }, and no key', async () => {
      const res = await request(service.origin)
        .get('/api/plugin/todo/todo')
        .set('Authorization', `Bearer ${signToken([role('ADMIN', 'READ')], { payload: { userId: 'ada' } })}`);
      expect([res.status, res.body]).toEqual([200, { by: 'ada' }]);
      expect(seenByHandler).toMatchObject({ token: { payload: { userId: 'ada' } }, key: undefined });
    });

    test('without the permission: 403; invalid: 401, as the JWT guard answers', async () => {
      const forbidden = await request(service.origin)
        .get('/api/plugin/todo/todo')
        .set('Authorization', `Bearer ${signToken([role('ADMIN', 'WRITE')])}`);
      expect([forbidden.status, forbidden.body]).toEqual([403, { message: 'Token is not authorized for this action.' }]);
      const invalid = await request(service.origin).get('/api/plugin/todo/todo').set('Authorization', 'Bearer not.a.token');
      expect([invalid.status, invalid.body]).toEqual([401, { message: 'Invalid token.' }]);
      expect(invalid.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
      expect(seenByHandler).toBeUndefined();
    });
  });

  test('neither a token nor a signature: 401 in the plugin family, with a challenge for each scheme the route takes', async () => {
    for (const res of [await request(service.origin).get('/api/plugin/todo/todo'), await request(service.origin).post('/api/plugin/todo/todo').set('Authorization', 'Basic eDp5').send({})]) {
      expect([res.status, res.body]).toEqual([401, TOKEN_MISSING]);
      expect(res.headers['www-authenticate']).toBe(`Bearer, ${SIGNATURE_CHALLENGE}, ${CLIENT_CHALLENGE}`);
    }
    expect(seenByHandler).toBeUndefined();
  });

  describe("the BCMS client's signed calls (@becomes/cms-client 3.4.1, its own send)", () => {
    test("a key that lists the plugin: the handler gets { key } in BCMS's shape, never the secret, and the body as sent", async () => {
      const payload = { title: 'Buy milk ✓', tags: ['a', 'é'] };
      const answer = await send(site, { url: '/plugin/todo/todo', method: 'POST', data: payload });
      expect(answer).toEqual({ by: 'site', body: payload });
      const key = {
        type: 'signature',
        key: { id: site.id, name: 'site', algorithm: 'hmac-sha256', functions: ['whoami'], plugins: ['todo'] },
        _id: site.id,
        name: 'site',
        blocked: false,
        access: { templates: [], functions: [{ name: 'whoami' }], plugins: [{ name: 'todo' }] },
      };
      expect(seenByHandler).toEqual({ token: undefined, key, body: payload });
      expect(JSON.stringify(seenByHandler)).not.toContain(site.secret);
    });

    test('a GET without a payload (signed over {}): accepted, and the body stays unset', async () => {
      expect(await send(site, { url: '/plugin/todo/todo', method: 'GET' })).toEqual({ by: 'site' });
      expect(seenByHandler?.body).toBeUndefined();
    });

    test('a key that does not list the plugin: 403 KEY_FORBIDDEN naming it; the handler never runs', async () => {
      const answer = refusal(await send(site, { url: '/plugin/other/hi', method: 'POST', data: { n: 1 } }));
      expect([answer.status, answer.data]).toEqual([403, { message: 'This API key may not call plugin "other": it does not list it.' }]);
      const functionsOnly = await newKey({ plugins: [], functions: ['todo'] }); // a function named "todo" is no plugin
      const refused = refusal(await send(functionsOnly, { url: '/plugin/todo/todo', method: 'GET' }));
      expect([refused.status, refused.data]).toEqual([403, { message: 'This API key may not call plugin "todo": it does not list it.' }]);
      expect(seenByHandler).toBeUndefined();
    });

    test('a key without bcmsClient: 401 saying how to enable it', async () => {
      const plain = await newKey({ bcmsClient: false });
      const answer = refusal(await send(plain, { url: '/plugin/todo/todo', method: 'GET' }));
      expect(answer.status).toBe(401);
      expect(answer.data).toEqual({ message: expect.stringMatching(/does not accept the BCMS client's signed calls\. .*\(bcms-ext keys create --bcms-client\)/) });
      expect(answer.headers['www-authenticate']).toBe(CLIENT_CHALLENGE);
    });

    test('a blocked key: 403 at once', async () => {
      const blocked = await newKey();
      expect(await send(blocked, { url: '/plugin/todo/todo', method: 'GET' })).toEqual({ by: 'site' });
      await blockApiKey(db.knex, blocked.id);
      const answer = refusal(await send(blocked, { url: '/plugin/todo/todo', method: 'GET' }));
      expect([answer.status, answer.data]).toEqual([403, { message: 'This API key is blocked.' }]);
    });

    test('a replay: the URL and body of a call the client made, sent again, are refused; on another instance too', async () => {
      const mark = service.urls.length;
      await send(site, { url: '/plugin/todo/todo', method: 'POST', data: { pay: 10 } });
      const url = service.urls.slice(mark).find((u) => u.startsWith('/api/plugin/todo/todo?')) as string;
      const again = await request(service.origin).post(url).set('Content-Type', 'application/json').send('{"pay":10}');
      expect([again.status, again.body]).toEqual([401, REPLAYED]);
      expect(again.headers['www-authenticate']).toBe(CLIENT_CHALLENGE);

      const second = bcmsExtensions(REGISTRY, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
      const elsewhere = await listen(second);
      try {
        const signedHere = service.urls.length;
        await send(site, { url: '/plugin/todo/todo', method: 'GET' });
        const first = service.urls.slice(signedHere).find((u) => u.startsWith('/api/plugin/todo/todo?')) as string;
        const replayed = await request(elsewhere.origin).get(first);
        expect([replayed.status, replayed.body]).toEqual([401, REPLAYED]);
      } finally {
        await elsewhere.close();
        await second.close();
      }
    });

    test('a tampered body: 401 SIGNATURE_INVALID, the handler never runs', async () => {
      const nonce = 'a1b2c3';
      const timestamp = String(Date.now());
      const signature = bcmsClientSignature({ secret: site.secret, nonce, timestamp, key: site.id, body: '{"amount":1}' });
      const url = `/api/plugin/todo/todo?key=${site.id}&nonce=${nonce}&timestamp=${timestamp}&signature=${signature}`;
      const res = await request(service.origin).post(url).set('Content-Type', 'application/json').send('{"amount":1000}');
      expect([res.status, res.body]).toEqual([401, { message: 'The signature does not verify with this key.' }]);
      expect(seenByHandler).toBeUndefined();
      expect((await request(service.origin).post(url).set('Content-Type', 'application/json').send('{"amount":1}')).status).toBe(200);
    });

    test("an author's own pre-request handler calling the guard with a context it built", async () => {
      expect(await send(site, { url: '/plugin/todo/todo/own', method: 'GET' })).toEqual({ who: site.id, method: 'own' });
      const res = await request(service.origin)
        .get('/api/plugin/todo/todo/own')
        .set('Authorization', `Bearer ${signToken([role('ADMIN', 'READ')], { payload: { userId: 'ada' } })}`);
      expect(res.body).toEqual({ who: 'ada', method: 'own' });
      expect((await request(service.origin).get('/api/plugin/todo/todo/own')).status).toBe(401);
    });

    test('a route guarded by the JWT guard alone takes no key: 401', async () => {
      const answer = refusal(await send(site, { url: '/plugin/todo/todo/jwt-only', method: 'GET' }));
      expect([answer.status, answer.data]).toEqual([401, TOKEN_MISSING]);
    });

    test("the access list names the key's plugins; a function call's auth carries them too", async () => {
      const client = createBcmsClient({ cmsOrigin: service.origin, key: site });
      expect(await client.getKeyAccess()).toEqual({ templates: [], functions: [{ name: 'whoami' }], plugins: [{ name: 'todo' }] });
      const { result } = await client.function.call<undefined, { auth: { access: unknown } }>('whoami');
      expect(result.auth.access).toEqual({ templates: [], functions: [{ name: 'whoami' }], plugins: [{ name: 'todo' }] });
    });
  });

  describe('HTTP Signatures (bcms-extensions/client signRequest)', () => {
    let signer: { keyId: string; secret: string };
    beforeAll(async () => {
      // No bcmsClient: HTTP Signatures need no opt-in.
      signer = await hmacKey(db.knex, [], { plugins: ['todo'], name: 'signer' });
    });

    test('a JSON body: accepted, and the handler gets the bytes that were signed, parsed', async () => {
      const res = await signedPost(service.origin, '/api/plugin/todo/todo', signer, { title: 'signed', n: 1 });
      expect([res.status, res.body]).toEqual([200, { by: 'signer', body: { title: 'signed', n: 1 } }]);
      expect(seenByHandler?.key).toMatchObject({ _id: signer.keyId, access: { plugins: [{ name: 'todo' }] } });
    });

    test('a tampered body: 401 DIGEST_MISMATCH, the handler never runs', async () => {
      const res = await signedPost(service.origin, '/api/plugin/todo/todo', signer, { amount: 1 }, { send: JSON.stringify({ amount: 1000 }) });
      expect([res.status, res.body]).toEqual([401, { message: 'Body digest does not match the body.' }]);
      expect(res.headers['www-authenticate']).toBe(SIGNATURE_CHALLENGE);
      expect(seenByHandler).toBeUndefined();
    });

    test('a plugin the key does not list: 403 naming it; signed for one path, sent to another: 401', async () => {
      const res = await signedPost(service.origin, '/api/plugin/other/hi', signer, { n: 1 });
      expect([res.status, res.body]).toEqual([403, { message: 'This API key may not call plugin "other": it does not list it.' }]);
      const headers = signRequest({ ...signer, method: 'POST', url: '/api/plugin/todo/todo', body: '{}' });
      const moved = await request(service.origin).post('/api/plugin/other/hi').set(headers).set('Content-Type', 'application/json').send('{}');
      expect([moved.status, moved.body]).toEqual([401, { message: 'The signature does not verify with this key.' }]);
    });

    test('a body of another type: 415, never read into the void; a GET with a signed JSON body: verified, then parsed', async () => {
      const text = signedPost(service.origin, '/api/plugin/todo/todo', signer, undefined, { send: 'title=x' }).set('Content-Type', 'text/plain');
      const refused = await text;
      expect([refused.status, refused.body]).toEqual([415, { message: 'A signed request to a plugin carries a JSON body (Content-Type: application/json), or none.' }]);
      // The plugin server reads no GET body: the guard reads it, checks its digest, and parses it for the handler.
      const body = '{"filter":"open"}';
      const headers = signRequest({ ...signer, method: 'GET', url: '/api/plugin/todo/todo', body });
      const res = await request(service.origin).get('/api/plugin/todo/todo').set(headers).set('Content-Type', 'application/json').send(body);
      expect([res.status, res.body]).toEqual([200, { by: 'signer' }]);
      expect(seenByHandler?.body).toEqual({ filter: 'open' });
    });

    test('a body in a charset other than UTF-8: refused unless content-type is signed, then decoded in that charset', async () => {
      const body = Buffer.from(JSON.stringify({ title: 'Zoë' }), 'latin1'); // ë: the one byte 0xEB
      const type = 'application/json; charset=iso-8859-1';
      const unsigned = signRequest({ ...signer, method: 'POST', url: '/api/plugin/todo/todo', body });
      const refused = await request(service.origin)
        .post('/api/plugin/todo/todo')
        .set(unsigned)
        .set('Content-Type', type)
        .serialize((bytes) => bytes)
        .send(body);
      expect([refused.status, refused.body]).toEqual([
        401,
        { message: expect.stringMatching(/^The body's Content-Type declares charset "iso-8859-1", which the signature does not cover: sign content-type too/) },
      ]);
      expect(refused.headers['www-authenticate']).toBe(SIGNATURE_CHALLENGE);
      expect(seenByHandler).toBeUndefined();
      const signed = signRequest({ ...signer, method: 'POST', url: '/api/plugin/todo/todo', body, contentType: type });
      const res = await request(service.origin)
        .post('/api/plugin/todo/todo')
        .set(signed)
        .serialize((bytes) => bytes)
        .send(body);
      expect([res.status, res.body]).toEqual([200, { by: 'signer', body: { title: 'Zoë' } }]);
    });

    test('a replay: 401 SIGNATURE_REPLAYED', async () => {
      const body = JSON.stringify({ once: true });
      const headers = signRequest({ ...signer, method: 'POST', url: '/api/plugin/todo/todo', body });
      const post = () => request(service.origin).post('/api/plugin/todo/todo').set(headers).set('Content-Type', 'application/json').send(body);
      expect((await post()).status).toBe(200);
      const again = await post();
      expect([again.status, again.body]).toEqual([401, REPLAYED]);
    });

    test('a host body parser mounted before the router: 500 BODY_ALREADY_PARSED, and the log says why', async () => {
      const log = memoryLogger();
      const behind = bcmsExtensions(REGISTRY, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: log.logger });
      const parsed = await listen(behind, (app) => app.use(express.json()));
      try {
        const res = await signedPost(parsed.origin, '/api/plugin/todo/todo', signer, { n: 1 });
        expect(res.status).toBe(500);
        expect(res.body).toEqual({
          message: expect.stringMatching(
            /^A body parser ran before the router, so the signed body cannot be checked: mount the router first, or give the parser verify: keepRawBody\. Request id: \S+\.$/,
          ),
        });
        expect(log.text()).toContain('Mount the router before express.json()');
        expect(seenByHandler).toBeUndefined();
      } finally {
        await parsed.close();
        await behind.close();
      }
    });

    test('a host body parser with verify: keepRawBody: the signed call is checked over the bytes it kept, and the handler gets them', async () => {
      const behind = bcmsExtensions(REGISTRY, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
      const parsed = await listen(behind, (app) => app.use(express.json({ verify: keepRawBody })));
      try {
        const res = await signedPost(parsed.origin, '/api/plugin/todo/todo', signer, { n: 2 });
        expect(res.status).toBe(200);
        expect(seenByHandler?.body).toEqual({ n: 2 });
        expect(seenByHandler?.key).toMatchObject({ name: expect.any(String) });
      } finally {
        await parsed.close();
        await behind.close();
      }
    });
  });
});

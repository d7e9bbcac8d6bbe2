import request from 'supertest';
import { bcmsExtensions, createBcmsFunction } from '../../lib';
import { buildApp, role, signToken } from '../support/app';

// The openapi option: who may read GET /api/extensions/openapi.json.
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));
const DOCUMENT = '/api/extensions/openapi.json';

test("'public' (the default): anyone reads it", async () => {
  const t = await buildApp({ functions: [hello] });
  const res = await request(t.app).get(DOCUMENT);
  expect(res.status).toBe(200);
  expect(res.body.paths[DOCUMENT].get.security).toEqual([]);
});

test("'token': a bearer token of any role that holds READ; none, a bad one or one without READ is refused as by the JWT guard", async () => {
  const t = await buildApp({ functions: [hello] }, { openapi: 'token' });
  const none = await request(t.app).get(DOCUMENT);
  expect([none.status, none.headers['content-type'], none.headers['www-authenticate']]).toEqual([401, 'application/json; charset=utf-8', 'Bearer']);
  // The envelope the document says the package's own routes answer (its OwnUnauthorized answer).
  expect(none.body).toEqual({ success: false, error: { code: 'TOKEN_MISSING', message: 'Token is `undefined`.' } });
  const bad = await request(t.app).get(DOCUMENT).set('Authorization', 'Bearer nope');
  expect([bad.status, bad.body.error?.code]).toEqual([401, 'TOKEN_INVALID']);
  const forbidden = await request(t.app)
    .get(DOCUMENT)
    .set('Authorization', `Bearer ${signToken([role('USER', 'WRITE')])}`);
  expect([forbidden.status, forbidden.body]).toEqual([403, { success: false, error: { code: 'TOKEN_FORBIDDEN', message: 'Token is not authorized for this action.' } }]);
  const reader = await request(t.app)
    .get(DOCUMENT)
    .set('Authorization', `Bearer ${signToken([role('USER', 'READ')])}`);
  expect(reader.status).toBe(200);
  // The document says so of itself: bearer, for any role with READ; its 401 and 403 are the envelope.
  expect(reader.body.paths[DOCUMENT].get.security).toEqual([{ bearer: [] }]);
  const { responses } = reader.body.paths[DOCUMENT].get;
  expect([responses['401'].$ref, responses['403'].$ref]).toEqual(['#/components/responses/OwnUnauthorized', '#/components/responses/OwnForbidden']);
  expect(reader.body.components.responses.OwnUnauthorized.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ErrorEnvelope' });
  expect(reader.body.components.schemas.ErrorEnvelope.properties.error.properties.code.enum).toEqual(expect.arrayContaining(['TOKEN_MISSING', 'TOKEN_INVALID', 'TOKEN_FORBIDDEN']));
  // A conditional request needs the token too: a 304 would say the document exists and is unchanged.
  expect(
    (
      await request(t.app)
        .get(DOCUMENT)
        .set('If-None-Match', reader.headers.etag as string)
    ).status,
  ).toBe(401);
});

test("'off': not served (404), not in the document, and router.openapi() still builds it; another value is refused at start", async () => {
  const t = await buildApp({ functions: [hello] }, { openapi: 'off' });
  const res = await request(t.app).get(DOCUMENT);
  expect(res.status).toBe(404);
  const document = t.router.openapi() as { paths: Record<string, unknown> };
  expect(document.paths['/api/function/hello']).toBeDefined();
  expect(document.paths[DOCUMENT]).toBeUndefined();
  expect(() => bcmsExtensions({}, { openapi: 'private' as never })).toThrow("option openapi must be 'public', 'token' or 'off', got \"private\"");
});

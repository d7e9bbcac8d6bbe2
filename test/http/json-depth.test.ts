import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, keepRawBody } from '../../lib';
import { signRequest } from '../../lib/client';
import { MAX_JSON_DEPTH } from '../../lib/http/body';
import { buildApp, memoryLogger, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';

// A JSON body nested deeper than MAX_JSON_DEPTH (256) arrays and objects is 400 INVALID_JSON
// wherever a body is parsed: V8's parser takes 50,000 levels, but what follows it recursed (an
// answer's JSON.stringify, the wire to an isolate, a schema's check) and overflowed the stack: a 500.
// (The BCMS client's signed calls: test/bcms/client-limits.test.ts.)

const echo = createBcmsFunction(async () => ({ config: { name: 'echo', public: true }, handler: async ({ request }) => request.body }));
const privateEcho = createBcmsFunction(async () => ({ config: { name: 'private-echo', public: false }, handler: async ({ request }) => request.body }));
const plugin = createBcmsPlugin({
  name: 'notes',
  controllers: [createController({ name: 'Notes', path: '/notes', methods: () => ({ add: createControllerMethod({ type: 'post', handler: async ({ request }) => request.body }) }) })],
});
const registry = { functions: [echo, privateEcho], plugins: [plugin] };

/** `levels` arrays inside each other: `[[[...]]]`. */
const nested = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
const DEEP = nested(50_000); // 100,000 bytes: under the default bodyLimit of 100kb
const TOO_DEEP = { success: false, error: { code: 'INVALID_JSON', message: `Request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.` } };

describe.each(backends())('JSON nested too deep (%s)', (backend) => {
  let database: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    t = await buildApp(registry, { database: database.knex });
  }, 60_000);
  afterAll(async () => {
    await t.router.close();
    await database.close();
  });

  test('50,000 levels to a function: 400 INVALID_JSON saying why, not a 500', async () => {
    const res = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send(DEEP);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(TOO_DEEP);
    expect(t.log.lines.some((line) => line.level === 50)).toBe(false);
  });

  test('to a plugin route: 400 { message }', async () => {
    const res = await request(t.app).post('/api/plugin/notes/notes').set('Content-Type', 'application/json').send(DEEP);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: TOO_DEEP.error.message });
  });

  test('signed: 400 once the signature verified', async () => {
    const key = await hmacKey(database.knex, ['private-echo']);
    // Signed over the deep text itself (signedPost signs a value's JSON).
    const headers = signRequest({ ...key, method: 'POST', url: '/api/function/private-echo', body: DEEP });
    const res = await request(t.app).post('/api/function/private-echo').set(headers).set('Content-Type', 'application/json').send(DEEP);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(TOO_DEEP);
  });

  test(`${MAX_JSON_DEPTH} levels are taken and answered; one more is not; brackets inside strings do not count`, async () => {
    const atLimit = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send(nested(MAX_JSON_DEPTH));
    expect(atLimit.status).toBe(200);
    expect(JSON.stringify(atLimit.body.result)).toBe(nested(MAX_JSON_DEPTH));
    const over = await request(t.app)
      .post('/api/function/echo')
      .set('Content-Type', 'application/json')
      .send(nested(MAX_JSON_DEPTH + 1));
    expect(over.body).toEqual(TOO_DEEP);
    const text = JSON.stringify({ text: '['.repeat(1000), quoted: `\\"[[[[${'{'.repeat(500)}` });
    const strings = await request(t.app).post('/api/function/echo').set('Content-Type', 'application/json').send(text);
    expect(strings.status).toBe(200);
    expect(JSON.stringify(strings.body.result)).toBe(text);
  });

  test("a host's body parser that ran first (it has no depth limit): its body is refused alike, function and plugin", async () => {
    const log = memoryLogger();
    const router = bcmsExtensions(registry, { database: database.knex, logger: log.logger });
    try {
      const app = express();
      app.use(express.json({ limit: '1mb', verify: keepRawBody }));
      app.use(router);
      await router.ready;
      const deep = nested(1000);
      for (const path of ['/api/function/echo', '/api/plugin/notes/notes']) {
        const res = await request(app).post(path).set('Content-Type', 'application/json').send(deep);
        expect(res.status).toBe(400);
        expect(JSON.stringify(res.body)).toContain(`more than ${MAX_JSON_DEPTH} levels deep`);
      }
      expect(
        (
          await request(app)
            .post('/api/function/echo')
            .set('Content-Type', 'application/json')
            .send({ shallow: [[1]] })
        ).body,
      ).toEqual({ success: true, result: { shallow: [[1]] } });
    } finally {
      await router.close();
    }
  });
});

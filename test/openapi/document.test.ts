import express from 'express';
import request from 'supertest';
import { z } from 'zod';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, role, signToken, type TestApp } from '../support/app';
import { lintOpenApi, validateOpenApi } from '../support/openapi';
import { signedPost, hmacKey } from '../support/signature';
import { sharedTestDatabase } from '../support/database';
import { deploy, signed } from '../support/deploy';

// GET /api/extensions/openapi.json: the OpenAPI 3.1 document of what the router serves, valid
// against the 3.1 schema, with each endpoint's path, verb, doc, security, body and answer.

const Todo = z.object({ description: z.string().min(1), done: z.boolean().default(false) });
const todos = createBcmsPlugin({
  name: 'todos',
  controllers: [
    createController({
      name: 'Todo',
      path: '/todo',
      methods: () => ({
        all: createControllerMethod({
          path: '/all',
          type: 'get',
          doc: { summary: 'Every todo.', description: 'In the order added.', params: [{ type: 'query', name: 'done', description: 'Only done ones' }] },
          responseSchema: z.object({ items: z.array(Todo) }),
          handler: async () => ({ items: [] }),
        }),
        one: createControllerMethod({
          path: '/:id',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
          responseSchema: { description: { __type: 'string', __required: true }, tags: { __type: 'array', __required: false, __child: { __type: 'string' } } },
          handler: async ({ request: req }) => ({ description: String(req.params.id) }),
        }),
        remove: createControllerMethod({ path: '/:key', type: 'delete', handler: async () => ({ ok: true }) }),
        hidden: createControllerMethod({ path: '/hidden', type: 'get', doc: { summary: 'Not listed.', ignore: true }, handler: async () => 'x' }),
        custom: createControllerMethod({ path: '/custom', type: 'post', preRequestHandler: async () => ({ mine: true }), handler: async () => 'y' }),
      }),
    }),
  ],
});
const add = createBcmsFunction(async () => ({
  config: { name: 'add', public: true, bodySchema: z.object({ a: z.number(), b: z.number() }), responseSchema: z.number() },
  handler: async ({ request: req }) => (req.body as { a: number; b: number }).a + (req.body as { a: number; b: number }).b,
}));
const secret = createBcmsFunction(async () => ({ config: { name: 'secret' }, handler: async () => 'shh' }));

describe('the OpenAPI document', () => {
  let t: TestApp;
  // biome-ignore lint/suspicious/noExplicitAny: the served JSON document, read deep in every assertion
  let document: Record<string, any>;
  beforeAll(async () => {
    t = await buildApp({ plugins: [todos], functions: [add, secret] });
    const res = await request(t.app).get('/api/extensions/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    document = res.body;
  });

  test('is valid OpenAPI 3.1', () => {
    expect(validateOpenApi(document)).toEqual({ valid: true, version: '3.1', errors: [] });
    // The check can fail: a document without its paths' answers is refused.
    expect(validateOpenApi({ openapi: '3.1.0', info: { title: 'x', version: '1' }, paths: { '/x': { get: { responses: { '200': {} } } } } }).valid).toBe(false);
  });

  test("Redocly's recommended rules find no error (a guard of a plugin's own, a public route, functions public and private)", () => {
    expect(lintOpenApi(document).errors).toEqual([]);
    // The linter can fail: operation ids with spaces, and an operation with no security, are errors.
    const broken = structuredClone(document);
    broken.paths['/api/plugin/todos/todo/all'].get.operationId = 'Todo all';
    delete broken.paths['/api/plugin/todos/todo/all'].get.security;
    expect(lintOpenApi(broken).errors).toEqual([
      'operation-operationId-url-safe at #/paths/~1api~1plugin~1todos~1todo~1all/get/operationId: Operation `operationId` should not have URL invalid characters.',
      'security-defined at #/paths/~1api~1plugin~1todos~1todo~1all/get: Every operation should have security defined on it or on the root level.',
    ]);
  });

  test('a plugin endpoint: its path with parameters, verb, doc, query parameter and answer schema (zod)', () => {
    const all = document.paths['/api/plugin/todos/todo/all'].get;
    expect(all).toMatchObject({ operationId: 'plugin.todos.Todo.all', tags: ['todos'], summary: 'Every todo.', description: 'In the order added.', security: [] });
    expect(all.parameters).toEqual([{ name: 'done', in: 'query', required: false, schema: { type: 'string' }, description: 'Only done ones' }]);
    const answer = all.responses['200'].content['application/json'].schema;
    expect(answer.properties.items.items.properties.description).toEqual({ type: 'string', minLength: 1 });
    expect(answer.required).toEqual(['items']);
  });

  test('a JWT guard: bearer security, with its roles and permission said; an ObjectSchema answer', () => {
    const one = document.paths['/api/plugin/todos/todo/{id}'].get;
    expect(one.security).toEqual([{ bearer: [] }]);
    expect(one.description).toBe('Requires a bearer token with a role of ADMIN, USER holding READ.');
    expect(one.parameters).toEqual([{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }]);
    expect(one.responses['200'].content['application/json'].schema).toEqual({
      type: 'object',
      properties: { description: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } },
      required: ['description'],
    });
    expect(Object.keys(one.responses)).toEqual(['200', '401', '403', '500', '503', '504', '4XX']);
    // Another verb of the same path, with parameters named otherwise, is listed under the first one's names.
    expect(document.paths['/api/plugin/todos/todo/{id}'].delete.parameters[0].name).toBe('id');
  });

  test("doc.ignore leaves a method out; a guard of the plugin's own is said to be one", () => {
    expect(document.paths['/api/plugin/todos/todo/hidden']).toBeUndefined();
    const custom = document.paths['/api/plugin/todos/todo/custom'].post;
    // What it asks for is its own: a bearer token, perhaps, or nothing.
    expect(custom.security).toEqual([{ bearer: [] }, {}]);
    expect(custom.description).toBe("Guarded by a pre-request handler of the plugin's own.");
  });

  test('functions: the body schema (and its check), the result in its envelope, public or signed, error answers as components', async () => {
    const call = document.paths['/api/function/add'].post;
    expect(call.security).toEqual([]);
    expect(call.requestBody.content['application/json'].schema).toMatchObject({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] });
    expect(call.responses['200'].content['application/json'].schema.properties.result).toEqual({ type: 'number' });
    expect(call.responses['400']).toEqual({ $ref: '#/components/responses/BODY_INVALID' });
    const hidden = document.paths['/api/function/secret'].post;
    expect(hidden.security).toEqual([{ httpSignature: [] }, { bcmsClient: [] }, { bearer: [] }]);
    expect(hidden.responses['401']).toEqual({ $ref: '#/components/responses/SIGNATURE_REQUIRED' });
    expect(document.components.responses.FUNCTION_NOT_FOUND.content['application/json'].example).toEqual({ success: false, error: { code: 'FUNCTION_NOT_FOUND', message: 'Function not found.' } });
    expect(Object.keys(document.components.securitySchemes)).toEqual(['bearer', 'httpSignature', 'bcmsClient']);
    // The schema is checked: a body that does not fit is a 400 naming the field.
    const refused = await request(t.app).post('/api/function/add').send({ a: 1, b: 'two' });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({ success: false, error: { code: 'BODY_INVALID', message: expect.stringMatching(/^body\.b: /) } });
    expect((await request(t.app).post('/api/function/add').send({ a: 1, b: 2 })).body).toEqual({ success: true, result: 3 });
    const key = await hmacKey((await sharedTestDatabase()).knex, ['secret']);
    expect((await signedPost(t.app, '/api/function/secret', key, {})).body).toEqual({ success: true, result: 'shh' });
  });

  test("the package's own routes: API keys, the SDK's, deployments and this document", () => {
    expect(document.paths['/api/extensions/keys'].post.security).toEqual([{ bearer: [] }]);
    expect(document.paths['/api/extensions/templates'].get.tags).toEqual(['extensions']);
    expect(document.paths['/api/extensions/deployments'].post.security).toEqual([{ httpSignature: [] }]);
    expect(document.paths['/api/extensions/openapi.json'].get.security).toEqual([]);
  });

  test('deployed code appears (its schemas described in its isolate) and goes away, live; the ETag changes with it', async () => {
    const before = await request(t.app).get('/api/extensions/openapi.json');
    const deployer = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true });
    const plugin = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTRoleName, JWTPermissionName } = require('bcms-extensions');
exports.default = createBcmsPlugin({ name: 'shipped', controllers: [createController({ name: 'Box', path: '/box', methods: () => ({
  put: createControllerMethod({ path: '/:id', type: 'put', doc: { summary: 'Stores a box.', body: { jsonSchema: { label: { __type: 'string', __required: true } } } },
    preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.WRITE), handler: async () => ({ ok: true }) }),
}) })] });`;
    const fn = `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'shipped-fn', bodySchema: { n: { __type: 'number', __required: true } } }, handler: async ({ request }) => request.body.n * 2 }));`;
    await deploy(t.app, deployer, 'plugin', 'shipped', plugin);
    await deploy(t.app, deployer, 'function', 'shipped-fn', fn);
    const after = await request(t.app).get('/api/extensions/openapi.json').set('If-None-Match', String(before.headers.etag));
    expect(after.status).toBe(200);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    const put = after.body.paths['/api/plugin/shipped/box/{id}'].put;
    expect(put).toMatchObject({ summary: 'Stores a box.', security: [{ bearer: [] }], description: 'Requires a bearer token with a role of ADMIN holding WRITE.' });
    expect(put.requestBody.content['application/json'].schema).toEqual({ type: 'object', properties: { label: { type: 'string' } }, required: ['label'] });
    const call = after.body.paths['/api/function/shipped-fn'].post;
    expect(call.security).toEqual([{ httpSignature: [] }, { bcmsClient: [] }, { bearer: [] }]);
    expect(call.requestBody.content['application/json'].schema).toEqual({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] });
    expect(validateOpenApi(after.body).valid).toBe(true);
    // Its body schema is checked in its isolate.
    const caller = await hmacKey((await sharedTestDatabase()).knex, ['shipped-fn']);
    expect((await signedPost(t.app, '/api/function/shipped-fn', caller, { n: 'x' })).body.error.code).toBe('BODY_INVALID');
    expect((await signedPost(t.app, '/api/function/shipped-fn', caller, { n: 21 })).body).toEqual({ success: true, result: 42 });
    for (const [kind, name] of [
      ['plugin', 'shipped'],
      ['function', 'shipped-fn'],
    ]) {
      expect((await signed(t.app, 'DELETE', `/api/extensions/deployments/${kind}/${name}`, deployer)).status).toBe(200);
    }
    const gone = await request(t.app).get('/api/extensions/openapi.json');
    expect(gone.body.paths['/api/plugin/shipped/box/{id}']).toBeUndefined();
    expect(gone.body.paths['/api/function/shipped-fn']).toBeUndefined();
  }, 60_000);

  test("schemas with references of their own (zod's $defs, a recursive one) are moved into the components; a schema that is not JSON, or that throws, costs only its own entry", async () => {
    const Id = z.string().meta({ id: 'SharedId' });
    interface Node {
      name: string;
      children: Node[];
    }
    const NodeSchema: z.ZodType<Node> = z.lazy(() => z.object({ name: z.string(), children: z.array(NodeSchema) }));
    const broken = { '~standard': { version: 1, vendor: 'broken', validate: () => ({ value: 1 }), jsonSchema: { input: () => ({ big: BigInt(1) }), output: () => ({ big: BigInt(1) }) } } };
    const refs = createBcmsPlugin({
      name: 'refs',
      controllers: [
        createController({
          name: 'R',
          path: '/r',
          methods: () => ({
            pair: createControllerMethod({ path: '/pair', type: 'get', responseSchema: z.object({ a: Id, b: Id }), handler: async () => ({ a: 'x', b: 'y' }) }),
            tree: createControllerMethod({ path: '/tree', type: 'get', responseSchema: NodeSchema, handler: async () => ({ name: 'root', children: [] }) }),
            odd: createControllerMethod({ path: '/odd', type: 'get', responseSchema: broken as never, handler: async () => 1 }),
          }),
        }),
      ],
    });
    const other = await buildApp({ plugins: [refs] });
    const served = (await request(other.app).get('/api/extensions/openapi.json')).body;
    expect(validateOpenApi(served)).toEqual({ valid: true, version: '3.1', errors: [] });
    const pair = served.paths['/api/plugin/refs/r/pair'].get.responses['200'].content['application/json'].schema;
    expect(pair.properties.a.$ref).toMatch(/^#\/components\/schemas\/Schema\d+_SharedId$/);
    expect(served.components.schemas[pair.properties.a.$ref.split('/').pop()]).toEqual({ type: 'string' });
    const tree = served.paths['/api/plugin/refs/r/tree'].get.responses['200'].content['application/json'].schema;
    expect(tree.$ref).toMatch(/^#\/components\/schemas\/Schema\d+$/);
    expect(JSON.stringify(served.components.schemas[tree.$ref.split('/').pop()])).toContain(tree.$ref);
    expect(served.paths['/api/plugin/refs/r/odd'].get.responses['200'].content['application/json'].schema.description).toMatch(/^A schema that cannot be written as JSON Schema/);
    // Mounted under a prefix, the document says where its paths are.
    const mounted = await request(express().use('/cms', other.router)).get('/cms/api/extensions/openapi.json');
    expect(mounted.body.servers).toEqual([{ url: '/cms' }]);
    // A weak ETag, as a compressing proxy sends it back, is current too.
    expect((await request(other.app).get('/api/extensions/openapi.json').set('If-None-Match', `W/${mounted.headers.etag}, "other"`)).status).toBe(200);
    const current = await request(other.app).get('/api/extensions/openapi.json');
    expect(
      (
        await request(other.app)
          .get('/api/extensions/openapi.json')
          .set('If-None-Match', `"other", ${String(current.headers.etag)}`)
      ).status,
    ).toBe(304);
  });

  test("what an isolate sends is not trusted: a deployed method's security is the guard the service enforces, unknown fields and foreign $refs are dropped", async () => {
    const deployer = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true });
    const plugin = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod } = require('bcms-extensions');
const lying = createControllerMethod({ path: '/x', type: 'get', handler: async () => 1 });
// What a bundle could make its isolate send: the description is found by its symbol and replaced.
const symbol = Object.getOwnPropertySymbols(require('bcms-extensions')).length; void symbol;
exports.default = createBcmsPlugin({ name: 'liar', controllers: [createController({ name: 'L', path: '/l', methods: () => ({ lying }) })] });
// Its channel to the service (lib/isolate/channel.ts, beside the isolate's main module), rewritten on the way out.
const { Channel } = require(require('node:path').join(require('node:path').dirname(process.mainModule.filename), 'channel.js'));
const encode = Channel.prototype.encode;
Channel.prototype.encode = function (batch, ...rest) {
  for (const message of Array.isArray(batch) ? batch : [batch]) {
    for (const route of message?.extension?.routes ?? []) route.described = { security: { type: 'jwt' }, parameters: [{ in: 'cookie', name: 'c' }, { in: 'query', name: 'q' }], response: { $ref: 'https://evil.example/schema.json' }, extra: 'x'.repeat(10) };
  }
  return encode.call(this, batch, ...rest);
};`;
    await deploy(t.app, deployer, 'plugin', 'liar', plugin);
    const served = (await request(t.app).get('/api/extensions/openapi.json')).body;
    const op = served.paths['/api/plugin/liar/l/x'].get;
    expect(op.security).toEqual([]);
    expect(op.parameters).toEqual([{ name: 'q', in: 'query', required: false, schema: { type: 'string' } }]);
    expect(op.responses['200'].content['application/json'].schema).toEqual({ description: 'A schema with a $ref outside itself was left out.' });
    expect(validateOpenApi(served).valid).toBe(true);
    expect((await signed(t.app, 'DELETE', '/api/extensions/deployments/plugin/liar', deployer)).status).toBe(200);
  }, 60_000);

  test('an ETag: 304 for a copy that is current; router.openapi() gives the same document', async () => {
    const first = await request(t.app).get('/api/extensions/openapi.json');
    const again = await request(t.app).get('/api/extensions/openapi.json').set('If-None-Match', String(first.headers.etag));
    expect(again.status).toBe(304);
    // The served one says where its paths are (`servers`: the router's mount path).
    expect({ ...t.router.openapi(), servers: [{ url: '/' }] }).toEqual(document);
    expect(Object.isFrozen(t.router.openapi())).toBe(true);
    // A reader's token is not needed: the paths are public, their guards answer for them.
    expect(
      (
        await request(t.app)
          .get('/api/extensions/openapi.json')
          .set('Authorization', `Bearer ${signToken([role('USER', 'READ')])}`)
      ).status,
    ).toBe(200);
  });
});

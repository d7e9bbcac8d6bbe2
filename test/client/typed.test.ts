import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expectTypeOf } from 'expect-type';
import { z } from 'zod';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { BcmsClientError, createClient, FunctionCallError, type ClientErrorCode, type PluginPath } from '../../lib/client';
import type { ErrorCode } from '../../lib';
import { buildApp, role, signToken, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';

// createClient<typeof registry>: names, bodies and results of the registry's functions, checked
// by TypeScript (expectTypeOf and @ts-expect-error, type-checked by npm run typecheck), and calls
// over real HTTP.

const add = createBcmsFunction(async () => ({
  config: { name: 'add', public: true, bodySchema: z.object({ a: z.number(), b: z.number().default(0) }) },
  handler: async ({ request }) => request.body.a + request.body.b,
}));
const greet = createBcmsFunction(async () => ({
  config: { name: 'greet' },
  handler: async ({ request }: { request: { body: { name: string } } }) => ({ greeting: `Hello, ${request.body.name}!`, at: 1 }),
}));
const when = createBcmsFunction(async () => ({ config: { name: 'when', public: true }, handler: async () => ({ at: new Date(0), note: undefined as string | undefined, run: () => 1, tags: ['a'] }) }));
const loose = createBcmsFunction(async () => ({ config: { name: 'loose', public: true }, handler: async ({ request }) => String(request.body.anything) }));
interface Todo {
  id: string;
  done: boolean;
}
const todos = createBcmsPlugin({
  name: 'todos',
  controllers: [
    createController({
      name: 'Todo',
      path: '/todo',
      methods: () => ({
        all: createControllerMethod({ path: '/all', type: 'get', handler: async (): Promise<{ items: Todo[] }> => ({ items: [{ id: 't1', done: false }] }) }),
        one: createControllerMethod({
          path: '/:id',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
          handler: async ({ request: req }) => ({ id: String(req.params.id), by: 'token' as const }),
        }),
        add: createControllerMethod({ type: 'post', handler: async ({ request: req }) => ({ added: (req.body as { id: string }).id }) }),
        // A response schema wins over the handler's type; a trailing / and a doubled one are dropped, as the router does.
        count: createControllerMethod({ path: 'stats//count/', type: 'get', responseSchema: z.object({ count: z.number() }), handler: async () => ({ count: 2 }) as unknown }),
        tag: createControllerMethod({ path: '/:id/tag/:tag', type: 'put', handler: async ({ request: req }) => ({ id: req.params.id!, tag: req.params.tag!, at: new Date(0) }) }),
        // Answers as they arrive: a Buffer as its text (never parsed as JSON), nothing as null.
        raw: createControllerMethod({ path: '/raw', type: 'get', handler: async () => Buffer.from('42') }),
        maybe: createControllerMethod({ path: '/maybe', type: 'get', handler: async (): Promise<{ n: number } | undefined> => undefined }),
        // A body that may be left out; a readonly array in it.
        note: createControllerMethod({
          path: '/note',
          type: 'put',
          preRequestHandler: async ({ request: req }) => ({ body: req.body as { tags: readonly string[] } | undefined }),
          handler: async ({ body }) => ({ tags: body?.tags.length ?? 0 }),
        }),
        // A pre-request handler of one's own that yields `body`: its type is what a caller sends.
        rename: createControllerMethod({
          path: '/:id/name',
          type: 'patch',
          preRequestHandler: async ({ request: req }) => ({ body: req.body as { name: string; note?: string } }),
          handler: async ({ body, request: req }) => ({ id: req.params.id!, name: body.name }),
        }),
      }),
    }),
  ],
});
// BCMS's form (the guard's result and the answer as type arguments) keeps no route: its path is unknown to the types.
const legacy = createBcmsPlugin({
  name: 'legacy',
  controllers: [
    createController({ name: 'Old', path: '/old', methods: () => ({ ping: createControllerMethod<void, { pong: true }>({ path: '/ping', type: 'get', handler: () => ({ pong: true }) }) }) }),
  ],
});
const sized = createBcmsFunction(async () => ({
  config: { name: 'sized', public: true, responseSchema: z.object({ size: z.number() }) },
  handler: async (): Promise<unknown> => ({ size: 3 }),
}));
// A body that may be left out, and a result that may be absent.
const maybe = createBcmsFunction(async () => ({
  config: { name: 'maybe', public: true, bodySchema: z.object({ a: z.number() }).optional() },
  handler: async ({ request }) => (request.body === undefined ? undefined : { a: request.body.a }),
}));
// BCMS's type-argument form, with a response schema beside it.
const stated = createBcmsFunction<'stated', undefined, { a: number }, { n: number }>(async () => ({
  config: { name: 'stated', public: true, responseSchema: z.object({ n: z.number() }) },
  handler: async ({ request }) => ({ n: request.body.a }),
}));
const registry = { functions: [add, greet, loose, when, sized, maybe, stated], plugins: [todos, legacy] };

// The types: names, bodies (a schema's input: defaults may be left out) and results are inferred.
// Checked by the type-checker (npm run typecheck, in CI), never run: these calls would go out. An
// unused @ts-expect-error is itself an error, so each refusal below is proven.
function typedCalls(client: ReturnType<typeof createClient<typeof registry>>): void {
  // A failure's code: the service's codes and the client's own, named (a plugin's own code is a string still).
  expectTypeOf<BcmsClientError['code']>().toEqualTypeOf<ClientErrorCode>();
  expectTypeOf<'KEY_FORBIDDEN'>().toMatchTypeOf<ClientErrorCode>();
  expectTypeOf<ErrorCode | 'NETWORK_ERROR' | 'INVALID_RESPONSE'>().toMatchTypeOf<BcmsClientError['code']>();
  expectTypeOf<'MY_PLUGIN_CODE'>().toMatchTypeOf<FunctionCallError['code']>();
  expectTypeOf(client.function.call).parameter(0).toEqualTypeOf<'add' | 'greet' | 'loose' | 'when' | 'sized' | 'maybe' | 'stated'>();
  expectTypeOf(client.function.call('maybe')).resolves.toEqualTypeOf<{ a: number } | undefined>();
  void client.function.call('maybe', undefined);
  expectTypeOf(client.function.call('stated', { a: 1 })).resolves.toEqualTypeOf<{ n: number }>();
  // A response schema types the result, over the handler's unknown; a function without a body schema may be called without a body.
  expectTypeOf(client.function.call('sized')).resolves.toEqualTypeOf<{ size: number }>();
  // The result as JSON carries it: a Date is a string, a function is gone, an optional field stays optional.
  expectTypeOf(client.function.call('when', {})).resolves.toEqualTypeOf<{ at: string; note?: string; tags: string[] }>();
  expectTypeOf(client.function.call('add', { a: 1 })).resolves.toEqualTypeOf<number>();
  expectTypeOf(client.function.call('greet', { name: 'Ada' })).resolves.toEqualTypeOf<{ greeting: string; at: number }>();
  // Without a schema or a typed handler, the body is anything, as the handler reads it.
  expectTypeOf(client.function.call('loose', { anything: 1 })).resolves.toEqualTypeOf<string>();
  // @ts-expect-error: no function of that name
  void client.function.call('substract', {});
  // @ts-expect-error: b is a number
  void client.function.call('add', { a: 1, b: 'two' });
  // @ts-expect-error: greet takes a name
  void client.function.call('greet', {});
  // @ts-expect-error: the result is a number, not a string
  expectTypeOf(client.function.call('add', { a: 1 })).resolves.toEqualTypeOf<string>();

  // @ts-expect-error: add's body (a and b) cannot be left out
  void client.function.call('add');

  // Plugin endpoints, one method per verb: paths, their :params and answers come from the registry.
  expectTypeOf(client.plugin.get('/api/plugin/todos/todo/all')).resolves.toEqualTypeOf<{ items: { id: string; done: boolean }[] }>();
  expectTypeOf(client.plugin.get('/api/plugin/todos/todo/:id', { params: { id: 't1' } })).resolves.toEqualTypeOf<{ id: string; by: 'token' }>();
  // The values in place: a concrete path names the endpoint it fills in; a static one wins, as in the router.
  expectTypeOf(client.plugin.get('/api/plugin/todos/todo/t1')).resolves.toEqualTypeOf<{ id: string; by: 'token' }>();
  expectTypeOf(client.plugin.get('/api/plugin/todos/todo/stats/count')).resolves.toEqualTypeOf<{ count: number }>();
  expectTypeOf(client.plugin.post('/api/plugin/todos/todo', { body: { id: 'x' } })).resolves.toEqualTypeOf<{ added: string }>();
  // Two params; a Date answers as a string.
  expectTypeOf(client.plugin.put('/api/plugin/todos/todo/:id/tag/:tag', { params: { id: 't1', tag: 'home' } })).resolves.toEqualTypeOf<{ id: string; tag: string; at: string }>();
  // A body the endpoint says it takes is checked; one it does not say anything of is anything.
  expectTypeOf(client.plugin.patch('/api/plugin/todos/todo/:id/name', { params: { id: 't1' }, body: { name: 'x' } })).resolves.toEqualTypeOf<{ id: string; name: string }>();
  void client.plugin.patch('/api/plugin/todos/todo/t1/name', { body: { name: 'x', note: 'n' } });
  // @ts-expect-error: name is a string
  void client.plugin.patch('/api/plugin/todos/todo/t1/name', { body: { name: 1 } });
  // @ts-expect-error: the body is required
  void client.plugin.patch('/api/plugin/todos/todo/:id/name', { params: { id: 't1' } });
  void client.plugin.post('/api/plugin/todos/todo', { body: 'anything' });
  expectTypeOf(client.plugin.get('/api/plugin/todos/todo/raw')).resolves.toEqualTypeOf<string>();
  expectTypeOf(client.plugin.get('/api/plugin/todos/todo/maybe')).resolves.toEqualTypeOf<{ n: number } | null>();
  void client.plugin.put('/api/plugin/todos/todo/note');
  void client.plugin.put('/api/plugin/todos/todo/note', { body: { tags: ['a'] as readonly string[] } });
  // The declared paths, the editor's completions.
  expectTypeOf<PluginPath<typeof registry, 'get'>>().toEqualTypeOf<
    '/api/plugin/todos/todo/all' | '/api/plugin/todos/todo/:id' | '/api/plugin/todos/todo/stats/count' | '/api/plugin/todos/todo/raw' | '/api/plugin/todos/todo/maybe'
  >();
  // @ts-expect-error: a declared :param is required
  void client.plugin.get('/api/plugin/todos/todo/:id');
  // @ts-expect-error: a :param is one segment: no endpoint has two there
  void client.plugin.get('/api/plugin/todos/todo/t1/more');
  // @ts-expect-error: nor an empty one
  void client.plugin.get('/api/plugin/todos/todo/');
  // @ts-expect-error: a query goes in { query }, not in the path (the router would answer /all, not /:id)
  void client.plugin.get('/api/plugin/todos/todo/all?x=1');
  // @ts-expect-error: the params are the path's own
  void client.plugin.put('/api/plugin/todos/todo/:id/tag/:tag', { params: { id: 't1' } });
  // @ts-expect-error: no GET at that path (it is a POST)
  void client.plugin.get('/api/plugin/todos/todo');
  // @ts-expect-error: BCMS's type-argument form leaves the path unknown to the types
  void client.plugin.get('/api/plugin/legacy/old/ping');
  // @ts-expect-error: the answer is { added: string }
  expectTypeOf(client.plugin.post('/api/plugin/todos/todo')).resolves.toEqualTypeOf<{ added: number }>();
  // Any endpoint, typed by the caller: send.
  expectTypeOf(client.plugin.send<{ pong: true }>('get', '/api/plugin/legacy/old/ping')).resolves.toEqualTypeOf<{ pong: true }>();
  // @ts-expect-error: not a verb
  void client.plugin.send('fetch', '/api/plugin/todos/todo/all');
}
// Named, not called: the type-checker reads it all the same.
void typedCalls;

describe('createClient<typeof registry>', () => {
  let t: TestApp;
  let server: Server;
  let url: string;
  beforeAll(async () => {
    t = await buildApp(registry);
    server = t.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  test('plugin endpoints: a bearer token from the client or the call; a refusal is a BcmsClientError with status and code', async () => {
    const client = createClient<typeof registry>({ url });
    const all = await client.plugin.send<{ items: Todo[] }>('get', '/api/plugin/todos/todo/all');
    expect(all).toEqual({ items: [{ id: 't1', done: false }] });
    const unsigned = await client.plugin.send('get', '/api/plugin/todos/todo/t9').catch((error: unknown) => error);
    expect(unsigned).toMatchObject({ name: 'BcmsClientError', status: 401, code: 'HTTP_401', message: 'Token is `undefined`.' });
    const reader = createClient<typeof registry>({ url, token: signToken([role('ADMIN', 'READ')]) });
    expect(await reader.plugin.send('get', '/api/plugin/todos/todo/t9')).toEqual({ id: 't9', by: 'token' });
    const refused = await reader.plugin.send('get', '/api/plugin/todos/todo/t9', { token: signToken([role('USER', 'READ')]) }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 403, code: 'HTTP_403' });
    expect(await client.plugin.send('post', '/api/plugin/todos/todo', { body: { id: 'x' } })).toEqual({ added: 'x' });
  });

  test('typed verb methods: :params filled in and encoded, query added; a missing or unknown param throws before sending', async () => {
    const client = createClient<typeof registry>({ url, token: signToken([role('ADMIN', 'READ')]) });
    expect(await client.plugin.get('/api/plugin/todos/todo/:id', { params: { id: 'a b' } })).toEqual({ id: 'a b', by: 'token' });
    expect(await client.plugin.get('/api/plugin/todos/todo/t2')).toEqual({ id: 't2', by: 'token' });
    expect(await client.plugin.put('/api/plugin/todos/todo/:id/tag/:tag', { params: { id: 7, tag: 'é/x' } })).toEqual({ id: '7', tag: 'é/x', at: '1970-01-01T00:00:00.000Z' });
    expect(await client.plugin.get('/api/plugin/todos/todo/stats/count', { query: { fresh: true, skip: undefined } })).toEqual({ count: 2 });
    const seen: string[] = [];
    const spy = createClient<typeof registry>({
      url,
      fetch: async (input, init) => {
        seen.push(String(input));
        return fetch(input, init);
      },
    });
    await spy.plugin.get('/api/plugin/todos/todo/stats/count', { query: { fresh: true, skip: undefined, q: 'a&b' } });
    expect(seen).toEqual([`${url}/api/plugin/todos/todo/stats/count?fresh=true&q=a%26b`]);
    await expect(spy.plugin.get('/api/plugin/todos/todo/:id', { params: {} as { id: string } })).rejects.toThrow('params.id is required by /api/plugin/todos/todo/:id');
    await expect(spy.plugin.get('/api/plugin/todos/todo/:id', { params: { id: '1', other: 2 } as { id: string } })).rejects.toThrow('/api/plugin/todos/todo/:id has no :other');
    expect(seen).toHaveLength(1);
    await expect(client.function.call('sized')).resolves.toEqual({ size: 3 });
    expect(await client.plugin.patch('/api/plugin/todos/todo/:id/name', { params: { id: 't3' }, body: { name: 'Ada' } })).toEqual({ id: 't3', name: 'Ada' });
    // As the types say: a Buffer's text, not JSON parsed from it; nothing as null.
    expect(await client.plugin.get('/api/plugin/todos/todo/raw')).toBe('42');
    expect(await client.plugin.get('/api/plugin/todos/todo/maybe')).toBeNull();
    // A value that is no path segment would move the request to another endpoint: refused before sending.
    for (const id of ['', '.', '..']) {
      await expect(spy.plugin.get('/api/plugin/todos/todo/:id', { params: { id } })).rejects.toThrow(`plugin.get: params.id is ${JSON.stringify(id)}, which is no path segment`);
    }
    await expect(spy.plugin.get('/api/plugin/todos/todo/:id', undefined as never)).rejects.toThrow('plugin.get: /api/plugin/todos/todo/:id takes its :params in { params }');
    expect(seen).toHaveLength(1);
  });

  test('calls: public, and signed with a key; a refusal is a BcmsClientError with status and code', async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['greet']);
    const client = createClient<typeof registry>({ url, key });
    expect(await client.function.call('add', { a: 2 })).toBe(2);
    // As its type says: the Date arrives as a string, the function and the undefined field do not arrive.
    expect(await client.function.call('when', {})).toEqual({ at: '1970-01-01T00:00:00.000Z', tags: ['a'] });
    expect(await client.function.call('add', { a: 2, b: 3 })).toBe(5);
    expect(await client.function.call('greet', { name: 'Ada' })).toEqual({ greeting: 'Hello, Ada!', at: 1 });
    const refused = await client.function.call('add', { a: 'one' } as never).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BcmsClientError);
    expect(refused).toBeInstanceOf(FunctionCallError);
    expect(refused).toMatchObject({ name: 'BcmsClientError', status: 400, code: 'BODY_INVALID' });
    const unsigned = await createClient<typeof registry>({ url })
      .function.call('greet', { name: 'x' })
      .catch((error: unknown) => error);
    expect(unsigned).toMatchObject({ status: 401, code: 'SIGNATURE_REQUIRED' });
    const down = await createClient<typeof registry>({ url: 'http://127.0.0.1:1' })
      .function.call('add', { a: 1 })
      .catch((error: unknown) => error);
    expect(down).toMatchObject({ name: 'BcmsClientError', status: 0, code: 'NETWORK_ERROR' });
  });
});

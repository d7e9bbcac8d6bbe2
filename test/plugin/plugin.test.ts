import request from 'supertest';
import { createBcmsPlugin, createController, createControllerMethod } from '../../lib';
import { buildApp, type TestApp } from '../support/app';

const seen: Record<string, unknown> = {};

const blog = createBcmsPlugin({
  name: 'blog',
  controllers: [
    createController({
      name: 'Posts',
      path: '/posts',
      methods: () => ({
        list: createControllerMethod({ path: '/', type: 'get', handler: async () => ({ posts: ['a', 'b'] }) }),
        create: createControllerMethod({
          path: '/',
          type: 'post',
          handler: async ({ request }) => ({ created: request.body }),
        }),
        one: createControllerMethod({
          path: '/:id',
          type: 'get',
          handler: async ({ request }) => ({ id: request.params.id, q: request.query.q ?? null }),
        }),
        replace: createControllerMethod({ path: '/:id', type: 'put', handler: async ({ request }) => ({ put: request.params.id, body: request.body }) }),
        patch: createControllerMethod({ path: '/:id', type: 'patch', handler: async ({ request }) => ({ patched: request.params.id }) }),
        remove: createControllerMethod({ path: '/:id', type: 'delete', handler: async ({ request }) => ({ deleted: request.params.id }) }),
        context: createControllerMethod({
          path: '/debug/context',
          type: 'get',
          handler: async (context) => {
            seen.keys = Object.keys(context).sort();
            return { ok: true };
          },
        }),
        missing: createControllerMethod({
          path: '/debug/missing',
          type: 'get',
          handler: async ({ errorHandler }) => {
            throw errorHandler.occurred(404, 'No such post.');
          },
        }),
        teapot: createControllerMethod({
          path: '/debug/conflict',
          type: 'get',
          handler: async ({ errorHandler }) => {
            throw errorHandler.occurred(409, 'Already exists.');
          },
        }),
        crash: createControllerMethod({
          path: '/debug/crash',
          type: 'get',
          handler: async () => {
            throw new Error('secret internal detail: db password is hunter2');
          },
        }),
        unserialisable: createControllerMethod({
          path: '/debug/bigint',
          type: 'get',
          handler: async () => ({ n: BigInt(1) }),
        }),
        own: createControllerMethod({
          path: '/debug/own',
          type: 'get',
          handler: async ({ response }) => {
            response.status(201).type('text/plain').send('written by the handler');
          },
        }),
        nothing: createControllerMethod({ path: '/debug/nothing', type: 'get', handler: async () => undefined }),
        text: createControllerMethod({
          path: '/debug/text',
          type: 'post',
          handler: async ({ request }) => ({ body: request.body ?? null }),
        }),
      }),
    }),
    createController({
      name: 'Root',
      path: '/',
      methods: () => ({
        hello: createControllerMethod({ path: '/hello', type: 'get', handler: () => ({ message: 'Hello' }) }),
      }),
    }),
  ],
});

describe('plugin endpoints', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [blog] });
  });

  test('GET answers 200 with the handler object as it is, JSON with charset, CORS and a request id', async () => {
    const res = await request(t.app).get('/api/plugin/blog/posts');
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"posts":["a","b"]}');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/);
  });

  test('controller path and method path are joined with no extra segment; a trailing "/" is the same path', async () => {
    expect((await request(t.app).get('/api/plugin/blog/hello')).body).toEqual({ message: 'Hello' });
    expect((await request(t.app).get('/api/plugin/blog/posts/')).body).toEqual({ posts: ['a', 'b'] });
  });

  test('every verb: post, put, patch, delete, with a JSON body and path parameters', async () => {
    expect((await request(t.app).post('/api/plugin/blog/posts').send({ title: 'T' })).body).toEqual({ created: { title: 'T' } });
    expect((await request(t.app).put('/api/plugin/blog/posts/7').send([1, 2])).body).toEqual({ put: '7', body: [1, 2] });
    expect((await request(t.app).patch('/api/plugin/blog/posts/7')).body).toEqual({ patched: '7' });
    expect((await request(t.app).delete('/api/plugin/blog/posts/hello%20world')).body).toEqual({ deleted: 'hello world' });
  });

  test('query strings reach the handler and do not change the route', async () => {
    expect((await request(t.app).get('/api/plugin/blog/posts/3?q=x')).body).toEqual({ id: '3', q: 'x' });
  });

  test('HEAD on a GET path answers the headers without a body', async () => {
    const res = await request(t.app).head('/api/plugin/blog/posts');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.text).toBeUndefined();
  });

  test('the handler context holds name, request, response, logger, errorHandler and repo', async () => {
    await request(t.app).get('/api/plugin/blog/posts/debug/context').expect(200);
    expect(seen.keys).toEqual(['errorHandler', 'logger', 'name', 'repo', 'request', 'response']);
  });

  test('errorHandler.occurred(status, message) becomes that status and { message }', async () => {
    const missing = await request(t.app).get('/api/plugin/blog/posts/debug/missing');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: 'No such post.' });
    expect(missing.headers['access-control-allow-origin']).toBe('*');
    const conflict = await request(t.app).get('/api/plugin/blog/posts/debug/conflict');
    expect(conflict.status).toBe(409);
    expect(conflict.body).toEqual({ message: 'Already exists.' });
  });

  test('an unexpected throw is a bare 500 naming the request id, logged with that id, nothing internal leaked', async () => {
    const res = await request(t.app).get('/api/plugin/blog/posts/debug/crash');
    expect(res.status).toBe(500);
    const id = res.headers['x-request-id'];
    expect(res.body).toEqual({ message: `Internal error. Request id: ${id}.` });
    expect(res.text).not.toMatch(/hunter2|stack|Error:/);
    const logged = t.log.lines.find((line) => line.requestId === id && line.level === 50);
    expect(logged).toBeDefined();
    expect(JSON.stringify(logged)).toMatch(/hunter2/); // the log keeps what the client must not see
    // and the process still serves
    expect((await request(t.app).get('/api/plugin/blog/posts')).status).toBe(200);
  });

  test('a body that cannot be serialised is a 500 too', async () => {
    const res = await request(t.app).get('/api/plugin/blog/posts/debug/bigint');
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/^Internal error\. Request id: /);
  });

  test('a handler that answers through `response` itself is left alone', async () => {
    const res = await request(t.app).get('/api/plugin/blog/posts/debug/own');
    expect(res.status).toBe(201);
    expect(res.text).toBe('written by the handler');
  });

  test('a handler that returns nothing answers 200 null', async () => {
    const res = await request(t.app).get('/api/plugin/blog/posts/debug/nothing');
    expect(res.status).toBe(200);
    expect(res.text).toBe('null');
  });

  test('a non-JSON body is left unread for the handler', async () => {
    const res = await request(t.app).post('/api/plugin/blog/posts/debug/text').set('Content-Type', 'text/plain').send('hi');
    expect(res.body).toEqual({ body: null });
  });

  test('malformed JSON: 400 with { message }', async () => {
    const res = await request(t.app).post('/api/plugin/blog/posts').set('Content-Type', 'application/json').send('{"a":');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'Request body is not valid JSON.' });
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  test('wrong method on a known path: 405 with Allow', async () => {
    const res = await request(t.app).post('/api/plugin/blog/hello');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, OPTIONS');
    expect(res.body).toEqual({ message: 'POST is not allowed here.' });
    const many = await request(t.app).post('/api/plugin/blog/posts/1');
    expect(many.headers.allow).toBe('GET, PUT, PATCH, DELETE, OPTIONS');
  });

  test('a malformed percent-encoding in a parameter is a 400, not a crash', async () => {
    const res = await request(t.app).get('/api/plugin/blog/posts/%E0%A4%A');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'Request path is not a valid URL path.' });
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  test('paths no plugin serves fall through to the host, its routes and its 404', async () => {
    expect((await request(t.app).get('/host/health')).body).toEqual({ host: true });
    for (const path of ['/api/plugin/blog/unknown', '/api/plugin/nobody/posts', '/api/plugin/', '/api/other', '/api/functions/x']) {
      const res = await request(t.app).get(path);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: { host404: true } });
    }
  });
});

import request from 'supertest';
import { z } from 'zod';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod } from '../../lib';
import { createTestService, type TestService } from '../../lib/testing';

// responseSchema is checked in tests, through the kit (never on a request): signedCall checks a
// function's result, checkAnswer any answer, against what the OpenAPI document says of it.

let shape: unknown = { total: 3 };
const sum = createBcmsFunction(async () => ({
  config: { name: 'sum', responseSchema: z.object({ total: z.number() }) },
  handler: async () => shape,
}));
const free = createBcmsFunction(async () => ({ config: { name: 'free' }, handler: async () => 'anything' }));
const items = createBcmsPlugin({
  name: 'items',
  controllers: [
    createController({
      name: 'Items',
      path: '/items',
      methods: () => ({
        all: createControllerMethod({
          path: '/all',
          type: 'get',
          responseSchema: { items: { __type: 'array', __required: true, __child: { __type: 'string' } } },
          handler: async () => ({ items: ['a', 2] }),
        }),
        one: createControllerMethod({ path: '/:id', type: 'get', responseSchema: z.object({ id: z.string() }), handler: async ({ request: req }) => ({ id: req.params.id }) }),
      }),
    }),
  ],
});

describe('answers checked against responseSchema, through the kit', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await createTestService({ plugins: [items], functions: [sum, free] });
  });
  afterAll(() => service.close());

  test('signedCall: a result that fits passes; one that does not fails the test, naming the field', async () => {
    shape = { total: 3 };
    expect((await service.signedCall('sum')).body).toEqual({ success: true, result: { total: 3 } });
    shape = { total: 'three' };
    await expect(service.signedCall('sum')).rejects.toThrow(/^signedCall\("sum"\): POST \/api\/function\/sum: the answer's result\.total is "three", and its responseSchema says it must be number$/);
    // Without a responseSchema, nothing is checked.
    expect((await service.signedCall('free')).body).toEqual({ success: true, result: 'anything' });
  });

  test("checkAnswer: a plugin answer against its method's schema (ObjectSchema or zod), path parameters matched", async () => {
    const all = await request(service.app).get('/api/plugin/items/items/all');
    expect(() => service.checkAnswer('GET', '/api/plugin/items/items/all', all.body)).toThrow(
      /^checkAnswer: GET \/api\/plugin\/items\/items\/all: the answer's items\.1 is 2, and its responseSchema says it must be string$/,
    );
    const one = await request(service.app).get('/api/plugin/items/items/42');
    expect(() => service.checkAnswer('GET', '/api/plugin/items/items/42', one.body)).not.toThrow();
    expect(() => service.checkAnswer('GET', '/api/plugin/items/items/42', { id: 42 })).toThrow(/the answer's id is 42, and its responseSchema says it must be string/);
    // An answer the document has no schema for (another status, another path) is not checked.
    expect(() => service.checkAnswer('GET', '/api/plugin/items/items/42', { any: 1 }, 404)).not.toThrow();
    // No endpoint there (a misspelt path, another verb): a mistake in the test, said, never a pass.
    expect(() => service.checkAnswer('GET', '/api/elsewhere', { any: 1 })).toThrow(/^checkAnswer: no endpoint answers GET \/api\/elsewhere/);
    expect(() => service.checkAnswer('DELETE', '/api/plugin/items/items/42', {})).toThrow(/^checkAnswer: no endpoint answers DELETE/);
    expect(() => service.checkAnswer('GET', 'no-slash', {})).toThrow(/method and path such as 'GET', '\/api\/plugin\/x\/y'/);
  });
});

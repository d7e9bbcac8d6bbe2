import { compileObjectSchema, type ObjectSchema } from '../../lib/schema/object-schema';
import { compileBodyCheck } from '../../lib/schema/body';
import { z } from 'zod';

// BCMS's ObjectSchema as purple-cheetah checks it (plus null and __validate), and the body check
// that serves both it and Standard Schema validators.

const Project: ObjectSchema = {
  name: { __type: 'string', __required: true },
  repo: { __type: 'object', __required: true, __child: { url: { __type: 'string', __required: true }, branch: { __type: 'string', __required: false } } },
  vars: { __type: 'array', __required: false, __child: { __type: 'object', __content: { key: { __type: 'string', __required: true } } } },
  tags: { __type: 'array', __required: false, __child: { __type: 'string' } },
  rating: { __type: 'number', __required: false, __validate: (value: unknown) => typeof value === 'number' && value >= 1 && value <= 5 },
  done: { __type: 'boolean', __required: false },
};
const check = compileObjectSchema(Project);
const ok = { name: 'n', repo: { url: 'u' } };

describe('compileObjectSchema', () => {
  test.each<[string, unknown, string | null]>([
    ['a fitting object', { ...ok, vars: [{ key: 'a', extra: 1 }], tags: ['x'], rating: 3, done: false, other: 'kept' }, null],
    ['an empty array of objects', { ...ok, vars: [] }, null],
    ['nothing', undefined, 'body must be an object, got nothing.'],
    ['null', null, 'body must be an object, got null.'],
    ['a string', 'text', 'body must be an object, got a string.'],
    ['the first missing field, in the schema order', { repo: 5 }, 'body.name is required.'],
    ['a type before a later missing field', { name: 1 }, 'body.name must be a string, got a number.'],
    ['an undefined value counts as missing', { name: undefined, repo: { url: 'u' } }, 'body.name is required.'],
    ['null where an object goes', { name: 'n', repo: null }, 'body.repo must be an object, got null.'],
    ['an array where an object goes', { name: 'n', repo: [] }, 'body.repo must be an object, got an array.'],
    ['a nested field', { name: 'n', repo: { url: 'u', branch: 2 } }, 'body.repo.branch must be a string, got a number.'],
    ['an object where an array goes', { ...ok, tags: { 0: 'x' } }, 'body.tags must be an array, got an object.'],
    ['an item of the wrong type', { ...ok, tags: ['x', true] }, 'body.tags[1] must be a string, got a boolean.'],
    ['a field of an array item', { ...ok, vars: [{ key: 'a' }, {}] }, 'body.vars[1].key is required.'],
    ['__validate says no', { ...ok, rating: 9 }, 'body.rating is not valid.'],
  ])('%s', (_name, value, message) => {
    expect(check(value)).toBe(message);
  });

  test('a field whose name is not an identifier is quoted in the message', () => {
    const odd = compileObjectSchema({ 'first name': { __type: 'string', __required: true }, 'a/b~c': { __type: 'number', __required: false } });
    expect(odd({})).toBe('body["first name"] is required.');
    expect(odd({ 'first name': 'x', 'a/b~c': 'y' })).toBe('body["a/b~c"] must be a number, got a string.');
  });

  test('a field named __proto__ is refused where the schema is compiled (Ajv would not check it)', () => {
    expect(() => compileObjectSchema(JSON.parse('{"__proto__": {"__type": "string", "__required": true}}') as ObjectSchema)).toThrow('schema: "__proto__" cannot be a field name');
  });

  test('function fields check typeof function (documents in memory; JSON has none)', () => {
    const withFn = compileObjectSchema({ run: { __type: 'function', __required: true } });
    expect(withFn({ run: () => 1 })).toBeNull();
    expect(withFn({ run: 'x' })).toBe('body.run must be a function, got a string.');
  });

  test.each<[string, ObjectSchema, string]>([
    ['an unknown __type', { a: { __type: 'date' as 'string', __required: true } }, 'schema.a: __type must be one of'],
    ['an array without __child', { a: { __type: 'array', __required: true } }, 'schema.a: an array needs __child: { __type }'],
    ['a nested unknown __type', { a: { __type: 'object', __required: true, __child: { b: { __type: 'x' as 'string', __required: true } } } }, 'schema.a.__child.b: __type must be one of'],
  ])('a schema with %s throws where it is compiled', (_name, schema, message) => {
    expect(() => compileObjectSchema(schema)).toThrow(message);
  });
});

describe('compileBodyCheck', () => {
  test('an ObjectSchema: the body as it came, or the message', async () => {
    const body = compileBodyCheck(Project);
    expect(await body(ok)).toEqual({ ok: true, value: ok });
    expect(await body({})).toEqual({ ok: false, message: 'body.name is required.' });
  });

  test("a Standard Schema (zod): its output, or its first issue's path and message", async () => {
    const body = compileBodyCheck(z.object({ count: z.number().min(1), tags: z.array(z.string()).default([]) }));
    expect(await body({ count: 2 })).toEqual({ ok: true, value: { count: 2, tags: [] } });
    const bad = await body({ count: 1, tags: ['a', 2] });
    expect(bad.ok).toBe(false);
    expect((bad as { message: string }).message).toMatch(/^body\.tags\[1\]: /);
  });

  test('an asynchronous Standard Schema is awaited', async () => {
    const body = compileBodyCheck(z.object({ slug: z.string().refine(async (value) => value !== 'taken', 'is taken') }));
    expect(await body({ slug: 'free' })).toEqual({ ok: true, value: { slug: 'free' } });
    expect(await body({ slug: 'taken' })).toEqual({ ok: false, message: 'body.slug: is taken' });
  });
});

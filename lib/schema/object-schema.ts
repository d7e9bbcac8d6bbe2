import type { ErrorObject, ValidateFunction } from 'ajv';

/**
 * BCMS's body and document schemas (purple-cheetah's `ObjectSchema`, from `@banez/object-utility`),
 * checked by Ajv: each schema is turned into a JSON Schema once and compiled, so a check is one
 * generated function call.
 *
 * What purple-cheetah checks, checked the same way: a property whose value is `undefined` is missing
 * (refused when `__required`); `__type` is compared with `typeof`; `object` values are checked
 * against `__child`; arrays against `__child.__type` (and `__child.__content` for objects);
 * properties the schema does not name pass. Two departures, both stricter: `null` is never an
 * object (purple-cheetah's `typeof null === 'object'` let it through, and then crashed on it), and
 * `__validate`, which purple-cheetah declares but never calls, is called.
 */

/** The type of one array item. */
export interface ObjectPropSchemaArrayChild {
  __type?: 'string' | 'number' | 'boolean' | 'object' | 'function';
  /** The schema of each item, when items are objects. */
  __content?: ObjectSchema;
}

export type ObjectPropSchemaValidateType = string | string[] | number | number[] | boolean | boolean[];

/** One property of an {@link ObjectSchema}. */
export interface ObjectPropSchema {
  __type: 'string' | 'number' | 'boolean' | 'object' | 'array' | 'function';
  __required: boolean;
  __name?: string;
  /** Called with the value once its type fits; `false` refuses it. */
  __validate?<T>(value: T | ObjectPropSchemaValidateType): boolean;
  /** For `object`: the schema of the value. For `array`: the type (and schema) of its items. */
  __child?: ObjectPropSchemaArrayChild | ObjectSchema;
}

/**
 * A schema as BCMS plugins write them.
 *
 * @example
 * const CreateBody: ObjectSchema = {
 *   description: { __type: 'string', __required: true },
 *   tags: { __type: 'array', __required: false, __child: { __type: 'string' } },
 * };
 */
export interface ObjectSchema {
  [key: string]: ObjectPropSchema;
}

/** Checks a value: `null` when it fits, else a message naming the first field that does not. */
export type ObjectSchemaCheck = (value: unknown, root?: string) => string | null;

type JsonSchema = Record<string, unknown>;

const TYPES = new Set(['string', 'number', 'boolean', 'object', 'array', 'function']);
const ITEM_TYPES = new Set(['string', 'number', 'boolean', 'object', 'function']);

/** `__validate` functions and their places, found by the index the compiled schema holds. */
const validators: ((value: never) => boolean)[] = [];

let ajv: import('ajv').default | undefined;

/** One Ajv for every schema, made at the first compile (Ajv takes a while to load). */
function getAjv(): import('ajv').default {
  if (ajv !== undefined) return ajv;
  const Ajv = (require('ajv') as typeof import('ajv')).default;
  ajv = new Ajv({ allErrors: false, verbose: true, strict: true, code: { esm: false } });
  ajv.addKeyword({
    keyword: 'bcmsFunction',
    schemaType: 'boolean',
    validate: (_: boolean, data: unknown) => typeof data === 'function',
    errors: false,
  });
  ajv.addKeyword({
    keyword: 'bcmsValidate',
    schemaType: 'number',
    validate: (index: number, data: unknown) => (validators[index] as (value: unknown) => boolean)(data) === true,
    errors: false,
  });
  return ajv;
}

/**
 * Compiles a schema once (for Ajv, at its first check); the check it returns is cheap. A schema
 * that cannot be checked (an unknown `__type`, an array without `__child`) throws a `TypeError`
 * here, where its author sees it.
 *
 * @example
 * const check = compileObjectSchema({ name: { __type: 'string', __required: true } });
 * check({ name: 3 }); // 'body.name must be a string, got a number.'
 */
export function compileObjectSchema(schema: ObjectSchema): ObjectSchemaCheck {
  // The JSON Schema now, so that a schema that cannot be checked throws here; Ajv's compile at the
  // first check, so that a router whose guards are made at start does not load Ajv (0.1 s) for them.
  const json = objectToJsonSchema(schema, 'schema');
  let validate: ValidateFunction | undefined;
  return (value, root = 'body') => {
    validate ??= getAjv().compile(json);
    if (validate(value)) return null;
    return describe((validate.errors as ErrorObject[])[0] as ErrorObject, root);
  };
}

function objectToJsonSchema(schema: ObjectSchema | undefined, where: string): JsonSchema {
  if (schema === undefined) return { type: 'object' };
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    throw new TypeError(`${where} must be an ObjectSchema (an object of { __type, __required } properties)`);
  }
  // One step per property, in the schema's order, so the first field reported is the first that
  // fails as purple-cheetah walks them (Ajv would report every missing property before any type).
  const steps = Object.entries(schema).map(([key, prop]): JsonSchema => {
    // Ajv does not check a property of that name, and no document should have one.
    if (key === '__proto__') throw new TypeError(`${where}: "__proto__" cannot be a field name`);
    const step: JsonSchema = { properties: { [key]: propToJsonSchema(prop, `${where}.${key}`) } };
    if (prop.__required === true) step.required = [key];
    return step;
  });
  return steps.length === 0 ? { type: 'object' } : { type: 'object', allOf: steps };
}

function propToJsonSchema(prop: ObjectPropSchema, where: string): JsonSchema {
  if (prop === null || typeof prop !== 'object' || !TYPES.has(prop.__type)) {
    throw new TypeError(`${where}: __type must be one of ${[...TYPES].join(', ')}`);
  }
  let json: JsonSchema;
  if (prop.__type === 'object') {
    json = objectToJsonSchema(prop.__child as ObjectSchema | undefined, `${where}.__child`);
  } else if (prop.__type === 'array') {
    const child = prop.__child as ObjectPropSchemaArrayChild | undefined;
    if (child === undefined || child === null || typeof child !== 'object' || !ITEM_TYPES.has(child.__type as string)) {
      throw new TypeError(`${where}: an array needs __child: { __type } (one of ${[...ITEM_TYPES].join(', ')})`);
    }
    json = { type: 'array', items: itemToJsonSchema(child, `${where}.__child`) };
  } else if (prop.__type === 'function') {
    json = { bcmsFunction: true };
  } else {
    json = { type: prop.__type };
  }
  if (typeof prop.__validate === 'function') {
    json = { allOf: [json, { bcmsValidate: validators.push(prop.__validate.bind(prop) as (value: never) => boolean) - 1 }] };
  }
  return json;
}

function itemToJsonSchema(child: ObjectPropSchemaArrayChild, where: string): JsonSchema {
  if (child.__type === 'object') return objectToJsonSchema(child.__content, `${where}.__content`);
  if (child.__type === 'function') return { bcmsFunction: true };
  return { type: child.__type };
}

/** `['vars', 0, 'name']` → `body.vars[0].name`: how a message names a field. */
export function fieldName(root: string, keys: readonly PropertyKey[]): string {
  let name = root;
  for (const key of keys) {
    const part = String(key);
    name += /^\d+$/.test(part) ? `[${part}]` : /^[A-Za-z_$][\w$]*$/.test(part) ? `.${part}` : `[${JSON.stringify(part)}]`;
  }
  return name;
}

/** An Ajv instance path (`/vars/0/name`, a JSON pointer) as a field name. */
function pointerName(root: string, pointer: string): string {
  return fieldName(
    root,
    pointer
      .split('/')
      .slice(1)
      .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~')),
  );
}

function describe(error: ErrorObject, root: string): string {
  const field = pointerName(root, error.instancePath);
  switch (error.keyword) {
    case 'required':
      return `${fieldName(field, [(error.params as { missingProperty: string }).missingProperty])} is required.`;
    case 'type':
      return `${field} must be ${article((error.params as { type: string }).type)}, got ${kindOf(error.data)}.`;
    case 'bcmsFunction':
      return `${field} must be a function, got ${kindOf(error.data)}.`;
    default:
      // bcmsValidate: the author's own check said no.
      return `${field} is not valid.`;
  }
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  return article(typeof value);
}

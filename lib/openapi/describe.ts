import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { BcmsFunction } from '../function/types';
import { GUARD_DOC, JWT_GUARD_RULE, type GuardDoc, type JwtGuardRule } from '../plugin/guard';
import type { BcmsControllerMethod } from '../plugin/types';
import type { BodySchema } from '../schema/body';
import type { ObjectPropSchema, ObjectSchema } from '../schema/object-schema';

/**
 * What the OpenAPI document says of one plugin method or function, as plain JSON: made where the
 * code runs (in the service's process, or in an isolate, which sends it with the routes it
 * serves), so that the document covers deployed code without the service holding its schemas.
 */

export type JsonSchema = Record<string, unknown>;

/** How a request proves who sent it. */
export type OperationSecurity =
  | { type: 'none' }
  /** A bearer token with one of `roles` holding `permission`; `keys`: an API key's signature passes too. */
  | { type: 'jwt'; roles: string[]; permission: string; keys?: boolean }
  /** A pre-request handler of the plugin's own: what it checks is its own business. */
  | { type: 'custom' };

export interface OperationParameter {
  in: 'query' | 'header';
  name: string;
  required: boolean;
  description?: string;
}

export interface OperationDescription {
  summary?: string;
  description?: string;
  /** Query and header parameters (the path's come from its pattern). */
  parameters?: OperationParameter[];
  /** The JSON body's schema; `'file'` for a file upload. */
  requestBody?: JsonSchema | 'file';
  /** The answer's schema; `'file'` for a file (a Buffer answer). */
  response?: JsonSchema | 'file';
  security: OperationSecurity;
  /** BCMS's `doc.ignore`: left out of the document. */
  ignore?: boolean;
}

export interface FunctionDescription {
  public: boolean;
  requestBody?: JsonSchema;
  response?: JsonSchema;
}

/** On a method stand-in of a deployed plugin (or a function's): the description its isolate made. */
export const DESCRIBED = Symbol('bcms-extensions.described');

const methodDescriptions = new WeakMap<object, OperationDescription>();
const functionDescriptions = new WeakMap<object, FunctionDescription>();

/** BCMS's `doc` object (purple-cheetah's DocObject), as far as the document uses it. */
interface BcmsDoc {
  summary?: unknown;
  description?: unknown;
  ignore?: unknown;
  params?: { type?: unknown; name?: unknown; required?: unknown; description?: unknown }[];
  body?: { jsonSchema?: ObjectSchema; file?: unknown };
  response?: { jsonSchema?: ObjectSchema; file?: unknown };
}

/** A method's description: its stand-in's, or made from its `doc`, guard and `responseSchema` (once per method). */
export function describeMethod(method: BcmsControllerMethod<unknown, unknown>): OperationDescription {
  const described = (method as { [DESCRIBED]?: OperationDescription })[DESCRIBED];
  if (described !== undefined) return described;
  let description = methodDescriptions.get(method);
  if (description === undefined) {
    description = makeMethodDescription(method);
    methodDescriptions.set(method, description);
  }
  return description;
}

function makeMethodDescription(method: BcmsControllerMethod<unknown, unknown>): OperationDescription {
  const doc = (method.doc !== null && typeof method.doc === 'object' ? method.doc : {}) as BcmsDoc;
  const guard = method.preRequestHandler as ({ [JWT_GUARD_RULE]?: JwtGuardRule; [GUARD_DOC]?: GuardDoc } & object) | undefined;
  const guardDoc = guard?.[GUARD_DOC];
  const rule = guard?.[JWT_GUARD_RULE] ?? guardDoc?.rule;
  const security: OperationSecurity =
    guard === undefined ? { type: 'none' } : rule === undefined ? { type: 'custom' } : { type: 'jwt', roles: [...rule.roles], permission: rule.permission, ...(guardDoc?.keys ? { keys: true } : {}) };
  const description: OperationDescription = { security };
  if (typeof doc.summary === 'string' && doc.summary !== '') description.summary = doc.summary;
  if (typeof doc.description === 'string' && doc.description !== '') description.description = doc.description;
  if (doc.ignore === true) description.ignore = true;
  const parameters = (Array.isArray(doc.params) ? doc.params : []).flatMap((param): OperationParameter[] =>
    (param?.type === 'query' || param?.type === 'header') && typeof param.name === 'string' && param.name !== ''
      ? [{ in: param.type, name: param.name, required: param.required === true, ...(typeof param.description === 'string' ? { description: param.description } : {}) }]
      : [],
  );
  if (parameters.length > 0) description.parameters = parameters;
  const requestBody =
    guardDoc?.body !== undefined ? toJsonSchema(guardDoc.body, 'input') : doc.body?.file ? 'file' : doc.body?.jsonSchema !== undefined ? toJsonSchema(doc.body.jsonSchema, 'input') : undefined;
  if (requestBody !== undefined) description.requestBody = requestBody;
  const responseSchema = (method as { responseSchema?: BodySchema }).responseSchema;
  const response =
    responseSchema !== undefined
      ? toJsonSchema(responseSchema, 'output')
      : doc.response?.file
        ? 'file'
        : doc.response?.jsonSchema !== undefined
          ? toJsonSchema(doc.response.jsonSchema, 'output')
          : undefined;
  if (response !== undefined) description.response = response;
  return description;
}

/** A function's description (once per function). */
export function describeFunction(definition: BcmsFunction): FunctionDescription {
  const described = (definition as { [DESCRIBED]?: FunctionDescription })[DESCRIBED];
  if (described !== undefined) return described;
  let description = functionDescriptions.get(definition);
  if (description === undefined) {
    const { bodySchema, responseSchema } = definition.config;
    description = { public: definition.config.public === true };
    const requestBody = bodySchema === undefined ? undefined : toJsonSchema(bodySchema, 'input');
    if (requestBody !== undefined) description.requestBody = requestBody;
    const response = responseSchema === undefined ? undefined : toJsonSchema(responseSchema, 'output');
    if (response !== undefined) description.response = response;
    functionDescriptions.set(definition, description);
  }
  return description;
}

/**
 * A body schema as JSON Schema (2020-12, OpenAPI 3.1's dialect): a Standard Schema through its
 * JSON Schema converter (`~standard.jsonSchema`: zod 4, arktype, valibot through
 * `toStandardJsonSchema`), BCMS's ObjectSchema by its own rules. A validator without a converter,
 * or one that cannot convert this schema, says so in the description rather than guess.
 */
export function toJsonSchema(schema: BodySchema, direction: 'input' | 'output'): JsonSchema {
  // One schema often serves several methods (a plugin's item type): written once per direction.
  const known = converted[direction].get(schema);
  if (known !== undefined) return known;
  let json: JsonSchema;
  try {
    // Through JSON and back: what a converter gives must be JSON (no cycle, no BigInt), as the document is.
    json = JSON.parse(JSON.stringify(convert(schema, direction))) as JsonSchema;
  } catch (error) {
    json = { description: `A schema that cannot be written as JSON Schema: ${String((error as Error)?.message ?? error).slice(0, 200)}` };
  }
  if (schema !== null && typeof schema === 'object') converted[direction].set(schema, json);
  return json;
}

const converted = { input: new WeakMap<object, JsonSchema>(), output: new WeakMap<object, JsonSchema>() };

function convert(schema: BodySchema, direction: 'input' | 'output'): JsonSchema {
  const standard = (schema as Partial<StandardSchemaV1>)['~standard'] as (StandardSchemaV1.Props & { jsonSchema?: { input?: unknown; output?: unknown } }) | undefined;
  if (standard !== undefined && typeof standard === 'object') {
    const convert = standard.jsonSchema?.[direction];
    if (typeof convert !== 'function') return { description: `Checked by a ${String(standard.vendor)} schema that has no JSON Schema converter.` };
    try {
      const { $schema: _dialect, ...json } = (convert as (options: { target: string }) => JsonSchema)({ target: 'draft-2020-12' });
      return json;
    } catch (error) {
      return { description: `Checked by a ${String(standard.vendor)} schema that cannot be written as JSON Schema: ${(error as Error).message}` };
    }
  }
  return objectSchemaToJson(schema as ObjectSchema);
}

/** BCMS's ObjectSchema: an object of its properties, `__required` ones required; a function property is no JSON and is left out. */
function objectSchemaToJson(schema: ObjectSchema | undefined): JsonSchema {
  if (schema === null || typeof schema !== 'object') return { type: 'object' };
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [key, prop] of Object.entries(schema)) {
    const json = propToJson(prop);
    if (json === undefined) continue;
    properties[key] = json;
    if (prop.__required === true) required.push(key);
  }
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}

function propToJson(prop: ObjectPropSchema): JsonSchema | undefined {
  if (prop === null || typeof prop !== 'object' || prop.__type === 'function') return undefined;
  let json: JsonSchema;
  if (prop.__type === 'object') json = objectSchemaToJson(prop.__child as ObjectSchema | undefined);
  else if (prop.__type === 'array') {
    const child = (prop.__child ?? {}) as { __type?: string; __content?: ObjectSchema };
    json = { type: 'array', items: child.__type === 'object' ? objectSchemaToJson(child.__content) : child.__type === undefined || child.__type === 'function' ? {} : { type: child.__type } };
  } else json = { type: prop.__type };
  if (typeof prop.__validate === 'function') json.description = 'Also checked by a function of its own.';
  return json;
}

// ---------------------------------------------------------------------------------------------
// What an isolate sends is not trusted: deployed code may send anything in its place.

const MAX_TEXT = 2000;
const MAX_SCHEMA_BYTES = 64 * 1024;
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value.slice(0, MAX_TEXT) : undefined);

/**
 * A schema from an isolate: JSON, at most 64 KB, and with no `$ref` outside itself (a code
 * generator would fetch an external one); else a description that says it was left out.
 */
function untrustedSchema(value: unknown): JsonSchema | 'file' | undefined {
  if (value === undefined) return undefined;
  if (value === 'file') return 'file';
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { description: 'A schema that was not an object was left out.' };
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch {
    return { description: 'A schema that was not JSON was left out.' };
  }
  if (json.length > MAX_SCHEMA_BYTES) return { description: `A schema larger than ${MAX_SCHEMA_BYTES / 1024} KB was left out.` };
  if (/"\$ref":"(?!#)/.test(json)) return { description: 'A schema with a $ref outside itself was left out.' };
  return JSON.parse(json) as JsonSchema;
}

/**
 * A plugin method's description as an isolate sent it, kept to its known fields and sizes; its
 * security is what the service enforces (`guard`: the route the service routes), never what the
 * isolate says.
 */
export function trustedOperation(value: unknown, guard: OperationSecurity): OperationDescription {
  const sent = (value !== null && typeof value === 'object' ? value : {}) as Record<string, unknown>;
  const description: OperationDescription = { security: guard };
  const summary = text(sent.summary);
  if (summary !== undefined) description.summary = summary;
  const about = text(sent.description);
  if (about !== undefined) description.description = about;
  if (sent.ignore === true) description.ignore = true;
  const parameters = (Array.isArray(sent.parameters) ? sent.parameters.slice(0, 50) : []).flatMap((param): OperationParameter[] => {
    const { in: place, name, required, description: what } = (param ?? {}) as Record<string, unknown>;
    if ((place !== 'query' && place !== 'header') || text(name) === undefined) return [];
    return [{ in: place, name: (name as string).slice(0, 200), required: required === true, ...(text(what) === undefined ? {} : { description: text(what) }) }];
  });
  if (parameters.length > 0) description.parameters = parameters;
  const requestBody = untrustedSchema(sent.requestBody);
  if (requestBody !== undefined) description.requestBody = requestBody;
  const response = untrustedSchema(sent.response);
  if (response !== undefined) description.response = response;
  return description;
}

/** A function's description as an isolate sent it: its schemas checked, `public` the service's own. */
export function trustedFunction(value: unknown, isPublic: boolean): FunctionDescription {
  const sent = (value !== null && typeof value === 'object' ? value : {}) as Record<string, unknown>;
  const description: FunctionDescription = { public: isPublic };
  const requestBody = untrustedSchema(sent.requestBody);
  if (requestBody !== undefined && requestBody !== 'file') description.requestBody = requestBody;
  const response = untrustedSchema(sent.response);
  if (response !== undefined && response !== 'file') description.response = response;
  return description;
}

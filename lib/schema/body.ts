import type { StandardSchemaV1 } from '@standard-schema/spec';
import { compileObjectSchema, fieldName, type ObjectSchema } from './object-schema';

/** A body schema: BCMS's `ObjectSchema`, or any Standard Schema validator (zod, valibot, arktype). */
export type BodySchema = ObjectSchema | StandardSchemaV1;

/** The body's type a schema gives: a Standard Schema's output; `Fallback` for an ObjectSchema (BCMS's type argument). */
export type BodyOf<Schema, Fallback = unknown> = Schema extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<Schema> : Fallback;

/** The checked body, or the message naming the first field that does not fit. */
export type BodyCheckResult = { ok: true; value: unknown } | { ok: false; message: string };

/**
 * Compiles a body check once, when the guard is made (a schema that cannot be checked throws
 * there). A Standard Schema's output (with its defaults and coercions) is the body handed on; an
 * ObjectSchema hands the body on as it came.
 */
export function compileBodyCheck(schema: BodySchema): (body: unknown) => BodyCheckResult | Promise<BodyCheckResult> {
  if (isStandardSchema(schema)) {
    const standard = schema['~standard'];
    return (body) => {
      const result = standard.validate(body);
      return result instanceof Promise ? result.then(toCheckResult) : toCheckResult(result);
    };
  }
  const check = compileObjectSchema(schema);
  return (body) => {
    const message = check(body, 'body');
    return message === null ? { ok: true, value: body } : { ok: false, message };
  };
}

function isStandardSchema(schema: unknown): schema is StandardSchemaV1 {
  const standard = (schema as { '~standard'?: { version?: unknown; validate?: unknown } } | null)?.['~standard'];
  return typeof standard === 'object' && standard !== null && standard.version === 1 && typeof standard.validate === 'function';
}

function toCheckResult(result: StandardSchemaV1.Result<unknown>): BodyCheckResult {
  if (result.issues === undefined) return { ok: true, value: result.value };
  const issue = result.issues[0];
  if (issue === undefined) return { ok: false, message: 'body is not valid.' };
  const path = (issue.path ?? []).map((segment) => (typeof segment === 'object' ? segment.key : segment));
  const field = fieldName('body', path);
  return { ok: false, message: `${field}: ${issue.message}` };
}

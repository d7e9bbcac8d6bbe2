import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { JsonOrAbsent } from '../json';
import type { BodySchema } from '../schema/body';
import type { BcmsFunction, BcmsFunctionConfig, BcmsFunctionModule } from './types';

/** The body a handler gets: a Standard Schema's output; `any` without one (as BCMS function files use it). */
// biome-ignore lint/suspicious/noExplicitAny: public type: BCMS function files read an unschema'd body without a cast
type HandlerBody<Schema> = Schema extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<Schema> : any;
/** The body a caller sends: a Standard Schema's input; else what the handler takes. */
type CallerBody<Schema, Body> = Schema extends StandardSchemaV1 ? StandardSchemaV1.InferInput<Schema> : Body;

/** A function as its factory returns it, with its name and body schema kept for the types. */
type FunctionDefinition<Name extends string, Schema, Body, Result, Response = undefined> = Omit<BcmsFunction<Body, Result>, 'config'> & {
  config: Omit<BcmsFunctionConfig, 'name' | 'bodySchema' | 'responseSchema'> & { name: Name; bodySchema?: Schema; responseSchema?: Response };
};
/**
 * The result a caller gets: a Standard Schema response schema's output, else what the handler
 * returns; as JSON carries it (a type written out in full, so that declaration emit never has to
 * name an interface the function's file does not export).
 */
type CallerResult<Response, Result> = JsonOrAbsent<[Response] extends [StandardSchemaV1] ? StandardSchemaV1.InferOutput<Response> : Awaited<Result>>;

/**
 * Declares a function, as a BCMS function file does: the factory runs once when the router starts.
 *
 * @example
 * export default createBcmsFunction(async () => ({
 *   config: { name: 'hello', public: true },
 *   handler: async ({ request }) => ({ greeting: `Hello, ${request.body?.name ?? "world"}!` }),
 * }));
 */
export function createBcmsFunction<
  Name extends string,
  Schema extends BodySchema | undefined = undefined,
  Body = HandlerBody<Schema>,
  Result = unknown,
  // Not `undefined`: BCMS's type-argument form gives the first four and may still pass a responseSchema.
  Response extends BodySchema | undefined = BodySchema | undefined,
>(
  factory: () => FunctionDefinition<Name, Schema, Body, Result, Response> | Promise<FunctionDefinition<Name, Schema, Body, Result, Response>>,
  // The module's own `create` is typed loosely (only the router calls it): its handler's types, named,
  // would have to be named wherever the module is exported (a registry file); `~types` has them written out.
  // biome-ignore lint/suspicious/noExplicitAny: public type: the module's create() is typed loosely on purpose (see above)
): BcmsFunctionModule<any, unknown, Name, JsonOrAbsent<CallerBody<Schema, Body>>, CallerResult<Response, Result>> {
  if (typeof factory !== 'function') {
    throw new TypeError('createBcmsFunction: argument factory must be a function returning { config, handler }');
  }
  return Object.freeze({ kind: 'bcms-function' as const, create: async () => factory() });
}

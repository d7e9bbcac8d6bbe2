import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { BodySchema } from '../schema/body';
import type { BcmsFunction, BcmsFunctionConfig, BcmsFunctionModule } from './types';

/** The body a handler gets: a Standard Schema's output; `any` without one (as BCMS function files use it). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type HandlerBody<Schema> = Schema extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<Schema> : any;
/** The body a caller sends: a Standard Schema's input; else what the handler takes. */
type CallerBody<Schema, Body> = Schema extends StandardSchemaV1 ? StandardSchemaV1.InferInput<Schema> : Body;

/** A function as its factory returns it, with its name and body schema kept for the types. */
type FunctionDefinition<Name extends string, Schema, Body, Result> = Omit<BcmsFunction<Body, Result>, 'config'> & {
  config: Omit<BcmsFunctionConfig, 'name' | 'bodySchema'> & { name: Name; bodySchema?: Schema };
};

/**
 * Declares a function, as a BCMS function file does: the factory runs once when the router starts.
 *
 * @example
 * export default createBcmsFunction(async () => ({
 *   config: { name: 'hello', public: true },
 *   handler: async ({ request }) => ({ greeting: `Hello, ${request.body?.name ?? "world"}!` }),
 * }));
 */
export function createBcmsFunction<Name extends string, Schema extends BodySchema | undefined = undefined, Body = HandlerBody<Schema>, Result = unknown>(
  factory: () => FunctionDefinition<Name, Schema, Body, Result> | Promise<FunctionDefinition<Name, Schema, Body, Result>>,
): BcmsFunctionModule<Body, Result, Name, CallerBody<Schema, Body>> {
  if (typeof factory !== 'function') {
    throw new TypeError('createBcmsFunction: argument factory must be a function returning { config, handler }');
  }
  return Object.freeze({ kind: 'bcms-function' as const, create: async () => factory() });
}

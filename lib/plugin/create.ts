import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ownBodyLimit } from '../http/body';
import type { JsonAnswer, JsonOrAbsent } from '../json';
import type { BodySchema } from '../schema/body';
import type { BcmsController, BcmsControllerMethod, BcmsControllerMethods, BcmsPlugin, HttpVerb, MethodRoute, RoutePath } from './types';

/**
 * Declares a plugin: its name is the path segment after `/api/plugin/`.
 *
 * @example
 * export default createBcmsPlugin({ name: 'hello', controllers: [HelloController] });
 */
export function createBcmsPlugin<Name extends string = string, Controller extends BcmsController<unknown> = BcmsController<unknown>>(
  config: Omit<BcmsPlugin, 'name' | 'controllers'> & { name: Name; controllers?: Controller[] },
): BcmsPlugin & { readonly '~routes'?: PluginRoutes<Name, Controller> } {
  return config;
}

/** A plugin's routes, for the typed client: its controllers', under `/api/plugin/<name>`. */
type PluginRoutes<Name extends string, Controller> = string extends Name
  ? never
  : Controller extends { readonly '~routes'?: infer Route }
    ? Route extends MethodRoute<infer Path, infer Verb, infer Answer, infer Body>
      ? MethodRoute<`/api/plugin/${Name}${Path}`, Verb, Answer, Body>
      : never
    : never;

/**
 * Declares a controller: `path` prefixes each of its methods' paths. `setup` (optional, may be
 * async) runs once before the router is ready; what it returns is the argument of `methods`.
 *
 * @example
 * export const HelloController = createController({
 *   name: 'Hello',
 *   path: '/hello',
 *   setup: async () => ({ greeting: 'Hi' }),
 *   methods: ({ greeting }) => ({ greet: createControllerMethod({ path: '/greet', type: 'get', handler: async () => ({ message: greeting }) }) }),
 * });
 */
export function createController<SetupResult = unknown, Path extends string = string, Methods extends BcmsControllerMethods = BcmsControllerMethods>(
  config: Omit<BcmsController<SetupResult>, 'path' | 'methods'> & { path: Path; methods(setup: SetupResult): Methods },
): BcmsController<SetupResult> & {
  // Written out here rather than as an alias: declaration emit would name the alias with the methods' full types (their guards' results too).
  readonly '~routes'?: {
    [Key in keyof Methods]: Methods[Key] extends { readonly '~route'?: MethodRoute<infer MethodPath, infer Verb, infer Answer, infer Body> }
      ? string extends MethodPath | Path
        ? never
        : HttpVerb extends Verb
          ? never // BCMS's type-argument form: path and verb unknown to the types
          : MethodRoute<`${RoutePath<Path>}${MethodPath}`, Verb, Answer, Body>
      : never;
  }[keyof Methods];
} {
  return config;
}

/**
 * What a method answers, for the typed client: its response schema's output, else its handler's
 * return type; as JSON carries it (the client's view, and a type written out in full: declaration
 * emit then never has to name an interface that the handler's file does not export), a Buffer as
 * text, nothing as null. `[Schema]`: not distributed, so that the default (no schema, or BCMS's
 * type-argument form beside a `responseSchema`) reads as no schema.
 */
type Answer<Schema, Body> = [Schema] extends [StandardSchemaV1] ? JsonAnswer<StandardSchemaV1.InferOutput<Schema>> : [Awaited<Body>] extends [Buffer] ? string : JsonAnswer<Awaited<Body>>;

/**
 * The body a caller sends, for the typed client: what the guard's schema takes (its input), else
 * what the pre-request handler yields as `body`; unknown without either.
 */
type CallerBody<PreResult> = [PreResult] extends [{ readonly '~input'?: infer Input }] ? (unknown extends Input ? YieldedBody<PreResult> : JsonOrAbsent<Input>) : YieldedBody<PreResult>;
type YieldedBody<PreResult> = [PreResult] extends [{ body: infer Body }] ? JsonOrAbsent<Body> : unknown;

/**
 * Declares an endpoint. Its handler's context is typed by what `preRequestHandler` yields
 * (`accessToken` with the JWT guard, `body` with a body check) and its response by what the
 * handler returns. BCMS's form, with both written as type arguments
 * (`createControllerMethod<BCMSRouteProtectionJwtResult, { items: Todo[] }>`), works too.
 *
 * @example
 * createControllerMethod({
 *   path: '/me',
 *   type: 'get',
 *   preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
 *   handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }),
 * });
 */
export function createControllerMethod<
  PreResult = void,
  Body = unknown,
  Path extends string = string,
  Verb extends HttpVerb = HttpVerb,
  Schema extends BodySchema | undefined = BodySchema | undefined,
>(
  config: BcmsControllerMethod<PreResult, Body> & { path?: Path; type: Verb; responseSchema?: Schema },
): BcmsControllerMethod<PreResult, Body> & { readonly '~route'?: MethodRoute<string extends Path ? '' : RoutePath<Path>, Verb, Answer<Schema, Body>, CallerBody<PreResult>> } {
  ownBodyLimit(config?.bodyLimit, 'createControllerMethod'); // a wrong limit throws here, not at the first request
  return config;
}

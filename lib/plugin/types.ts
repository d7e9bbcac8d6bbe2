import type { BodySchema } from '../schema/body';
import type { Request, Response } from 'express';
import type { BcmsRepo } from '../db/repository';
import type { ErrorHandler } from '../http/errors';
import type { BcmsLogger } from '../handler-logger';
import type { JWT } from '../security/token';

/** HTTP verbs a controller method may answer, as in BCMS (lower case; `patch` is ours). */
export type HttpVerb = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * The Express request, with `params` typed as BCMS code reads them: each a string (Express 5's
 * types also allow `string[]`, which only wildcard routes produce, and plugin paths have none).
 */
export type BcmsRequest = Omit<Request, 'params'> & { params: Record<string, string> };

/** What every plugin handler and pre-request handler receives. */
export interface BcmsPluginContext {
  /** The method's key in its controller's `methods()` (BCMS's `name`). */
  name: string;
  request: BcmsRequest;
  response: Response;
  /** Takes pino's `(object, message)` and BCMS's `(place, message)` alike. */
  logger: BcmsLogger;
  errorHandler: ErrorHandler;
  /** Templates and entries of the router's database. */
  repo: BcmsRepo;
}

/**
 * A pre-request handler's context. BCMS code builds one itself to call a guard from its own
 * pre-request handler (`{ name, request, response, errorHandler, logger }`), so what only this
 * package adds is optional.
 */
export interface PreRequestContext extends Omit<BcmsPluginContext, 'repo'> {
  repo?: BcmsRepo;
  /** Verifies the request's bearer token with the router's `jwt` options (throws a 401 otherwise). */
  verifyAccessToken?(): Promise<JWT>;
}

/**
 * Runs before the handler and guards it; what it returns is spread into the handler's context.
 * BCMS's own context (`{ name, request, response, errorHandler, logger }`) is all a guard of this
 * package needs, so an author's pre-request handler may call one with the context it was given.
 */
export type PreRequestHandler<Result> = (context: PreRequestContext) => Result | Promise<Result>;

/**
 * What the package's guard factories return: a pre-request handler. Typed as an intersection, not
 * a bare function type, on purpose: TypeScript puts off a generic call that returns a bare
 * function type (`createJwtProtectionPreRequestHandler<Props>(...)`, a zod body check) until after
 * the handler beside it has been typed, which would hide `accessToken` and `body` from a handler
 * that destructures its context; an intersection is inferred in order.
 */
export type Guard<Result> = PreRequestHandler<Result> & { readonly bcmsGuard?: true };

/** `void` (no guard) adds nothing; an object result adds its members. */
// biome-ignore lint/suspicious/noConfusingVoidType: a method without a guard has the result void (BcmsControllerMethod's default)
type Spread<T> = [T] extends [void] ? unknown : [T] extends [object] ? T : unknown;

/** A handler's context: the base context plus what its pre-request handler yielded. */
export type BcmsPluginHandlerContext<PreResult> = BcmsPluginContext & Spread<PreResult>;

/** One route of a controller (`createControllerMethod`): its verb and path, an optional pre-request handler (a guard) and the handler. */
export interface BcmsControllerMethod<PreResult = void, Body = unknown> {
  /**
   * Appended to the controller path (a leading `/` is added, `//` becomes `/`); `:name` segments
   * become `request.params.name`. Without one, the method answers the controller's own path.
   */
  path?: string;
  type: HttpVerb;
  /**
   * BCMS's documentation object (`{ summary, description?, params?, body?, response? }`): its
   * summary, description, query and header parameters and schemas go into the OpenAPI document;
   * `ignore: true` leaves the method out of it.
   */
  doc?: unknown;
  /**
   * What the method answers: BCMS's `ObjectSchema` or a Standard Schema (ours). Documentation for
   * the OpenAPI document and the typed client, checked by the test kit, not on every request.
   */
  responseSchema?: BodySchema;
  /**
   * The largest JSON body this method takes: bytes, or a size such as `'16kb'`; wins over the
   * router's `bodyLimit` (ours: BCMS's methods have none). A larger body is answered 413.
   */
  bodyLimit?: number | string;
  preRequestHandler?: PreRequestHandler<PreResult>;
  /**
   * Returns the response body: an object or value is sent as JSON with status 200 (unless the
   * handler set another), a `Buffer` as `application/octet-stream`.
   */
  handler: (context: BcmsPluginHandlerContext<NoInfer<PreResult>>) => Body | Promise<Body>;
}

/** What a controller's `setup` receives. */
export interface BcmsControllerSetupConfig {
  controllerName: string;
  /** The controller's path as declared (`/todo`). */
  controllerPath: string;
}

// `any`: one controller mixes methods with different guards and bodies.
// biome-ignore lint/suspicious/noExplicitAny: methods with different guards and bodies must fit (unknown would not: the handler's context is contravariant)
export type BcmsControllerMethods = Record<string, BcmsControllerMethod<any, any>>;

/** A controller of a plugin (`createController`): a path under the plugin's, its methods, and an optional `setup` run once at load. */
export interface BcmsController<SetupResult = unknown> {
  /** Human-readable name. */
  name: string;
  /** Prefix of every method path (a leading `/` is added). */
  path: string;
  description?: string;
  /**
   * Runs once, before the router's `ready` resolves (and before a deployed version goes live);
   * what it returns is the argument of `methods`. A setup that throws stops the router's start.
   */
  setup?(config: BcmsControllerSetupConfig): SetupResult | Promise<SetupResult>;
  /** The controller's methods by key; called once, after `setup` (with `{}` when there is none). */
  methods(setup: SetupResult): BcmsControllerMethods;
}

/** One setting of a plugin's policy, as BCMS's admin shows it. */
export interface BcmsPluginPolicy {
  name: string;
  type?: 'checkbox' | 'select' | 'selectArray' | 'input' | 'inputArray';
  options?: string[];
  default?: string[];
}

/** A plugin (`createBcmsPlugin`): its name (the `/api/plugin/<name>` prefix), its controllers, and optionally its UI and policy. */
export interface BcmsPlugin {
  /** Path segment of the plugin's endpoints: `/api/plugin/<name>/...`. URL-safe. */
  name: string;
  controllers?: BcmsController<unknown>[];
  /** The settings BCMS's admin would offer for the plugin (listed by `sdk.plugin.getAll()`). */
  policy?: () => BcmsPluginPolicy[] | Promise<BcmsPluginPolicy[]>;
  /**
   * BCMS's plugin middleware: accepted so that BCMS plugins load, but not mounted (the host owns
   * its middleware); a plugin that declares some is named in a warning at start.
   */
  middleware?: unknown[];
  /**
   * The plugin's built UI (a directory with an index.html, such as Vite's `dist`), served at
   * `/plugin/<name>/` and listed under "Plugins" in the admin shell by `label` (default: the name,
   * dashes as spaces).
   */
  ui?: { dir: string; label?: string };
}

// ---------------------------------------------------------------------------------------------
// Route types, for the typed client (`createClient<typeof registry>`) only: never set at run time.
// They carry a method's path, verb and answer, and never its guard's result, whose types (a body
// interface that its file does not export, say) would then have to be named wherever the plugin
// is exported, and declaration emit would fail (TS4082) in a project that compiled before.

/** One endpoint as the typed client knows it: `path` with its `:params`, the verb, what it answers and the body it takes. */
export interface MethodRoute<Path extends string = string, Verb extends HttpVerb = HttpVerb, Answer = unknown, Body = unknown> {
  readonly path: Path;
  readonly verb: Verb;
  readonly answer: Answer;
  readonly body: Body;
}

/**
 * What a body-checking guard yields besides `body`, for types only (never set): the body a caller
 * sends, its schema's input type (a field with a default may be left out), which the typed client
 * takes; the handler gets the schema's output as `body`.
 */
export interface SentBody<Input> {
  readonly '~input'?: Input;
}

/** A path as the router reads it: a leading `/`, runs of `/` as one, no trailing `/`. */
type Collapsed<Path extends string> = Path extends `${infer Head}//${infer Tail}` ? Collapsed<`${Head}/${Tail}`> : Path;
type Untrailed<Path extends string> = Path extends `${infer Head}/` ? Head : Path;
export type RoutePath<Path extends string> = Untrailed<Collapsed<`/${Path}`>>;

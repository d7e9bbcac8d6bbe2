import type { Request } from 'express';
import type { BcmsRepo } from '../db/repository';
import type { ErrorHandler } from '../http/errors';
import type { BcmsLogger } from '../handler-logger';
import type { JWT } from '../security/token';
import type { BodySchema } from '../schema/body';
import type { SignatureAuth } from '../security/signature';

/** A function's config: its URL-safe name, whether it is public (else calls must be signed or carry a token), its optional body limit, and its body and response schemas. */
export interface BcmsFunctionConfig {
  /** Last segment of the call URL: `POST /api/function/<name>`. URL-safe. */
  name: string;
  /**
   * `true`: anyone may call it. `false` or left out (as in BCMS): an HTTP Signature, or a JWT whose
   * role holds EXECUTE.
   */
  public?: boolean;
  /**
   * The largest JSON body this function takes: bytes, or a size such as `'16kb'`; wins over the
   * router's `bodyLimit` (ours: BCMS's config has none). A larger body is answered 413.
   */
  bodyLimit?: number | string;
  /**
   * The body it takes (ours: BCMS's config has none): BCMS's `ObjectSchema` or a Standard Schema
   * (zod, valibot, arktype). A body that does not fit is answered 400 `BODY_INVALID` naming the
   * field, and the handler gets the schema's output (its defaults and coercions) as `request.body`.
   * It is the function's request body in the OpenAPI document and the typed client.
   */
  bodySchema?: BodySchema;
  /**
   * What it answers (the `result`): documentation for the OpenAPI document and the typed client,
   * checked by the test kit (`bcms-extensions/testing`), not on every call.
   */
  responseSchema?: BodySchema;
}

/**
 * The API key of a signed call, as BCMS shapes its keys (never with its secret), beside our own
 * `type` and `key`: a private function's `auth`, and the `key` that
 * `BCMSRouteProtection.createJwtApiPreRequestHandler` yields on a plugin route.
 */
export interface BcmsFunctionKeyAuth extends SignatureAuth {
  _id: string;
  name: string;
  blocked: false;
  /** What the key may call: templates are BCMS's own, and none is granted here. */
  access: { templates: []; functions: { name: string }[]; plugins: { name: string }[] };
}

/**
 * Who called a private function: the API key whose signature was accepted, or the JWT (also
 * spread, as BCMS hands the token itself). `null` for a public function.
 */
export type BcmsFunctionAuth = BcmsFunctionKeyAuth | ({ type: 'jwt'; accessToken: JWT } & JWT);

/** What a function's handler gets: the request (its parsed body), the caller's verified auth, the content repo, a logger and the error handler. */
// `any` by default, as Express types `req.body`: BCMS function files read it without a cast.
// biome-ignore lint/suspicious/noExplicitAny: public type: `request.body` is any by default, as Express and BCMS type it
export interface BcmsFunctionContext<Body = any> {
  /** The Express request; `request.body` is the parsed JSON body (any JSON value; `{}` without a body, as in BCMS). */
  request: Omit<Request, 'body'> & { body: Body };
  /** Takes pino's `(object, message)` and BCMS's `(place, message)` alike. */
  logger: BcmsLogger;
  /** `throw errorHandler.occurred(status, message)`: the error the caller gets, as in BCMS. */
  errorHandler: ErrorHandler;
  /** Templates and entries of the router's database. */
  repo: BcmsRepo;
  /** Who called: the API key whose signature was accepted, or the JWT; `null` for a public function. */
  auth: BcmsFunctionAuth | null;
  /**
   * The call's `Idempotency-Key`, when it carries one (ours: BCMS has none). The router already
   * runs a key's call once per caller and body and gives its outcome again; but a call whose
   * answer was a 5xx (a time-out, `DATABASE_OUTCOME_UNKNOWN`) runs again on retry, so a handler
   * that writes can use the key to make its own write happen once (a unique column, say).
   */
  idempotencyKey?: string;
}

/** A function as `createBcmsFunction`'s factory returns it: its config and its handler, called with `POST /api/function/<name>`. */
// biome-ignore lint/suspicious/noExplicitAny: public type: a function's body is any by default, as BCMS function files use it
export interface BcmsFunction<Body = any, Result = unknown> {
  config: BcmsFunctionConfig;
  /** Its return value is answered as `{ "success": true, "result": <value> }`. */
  handler: (context: BcmsFunctionContext<Body>) => Result | Promise<Result>;
}

/**
 * What `createBcmsFunction` returns: the default export of a file in `src/functions`. `Name`,
 * `Input` (the body a caller sends: a Standard Schema's input type, else `Body`) and `Output` (the
 * result: a Standard Schema response schema's output, else the handler's) are for the typed
 * client (`createClient<typeof registry>`), which reads them from `~types`, a property for types only.
 */
// biome-ignore lint/suspicious/noExplicitAny: public type: a module's body is any by default, as BcmsFunction's is
export interface BcmsFunctionModule<Body = any, Result = unknown, Name extends string = string, Input = Body, Output = Awaited<Result>> {
  readonly kind: 'bcms-function';
  /** Runs the factory; the router calls it once, before `ready` resolves. */
  readonly create: () => Promise<BcmsFunction<Body, Result>>;
  /** For types only (never set): what the typed client infers. */
  readonly '~types'?: { readonly name: Name; readonly body: Input; readonly result: Output };
}

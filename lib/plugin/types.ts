import type { Request, Response } from 'express';
import type { BcmsRepo } from '../db/repository';
import type { ErrorHandler } from '../http/errors';
import type { Logger } from '../logger';
import type { JWT } from '../security/token';

/** HTTP verbs a controller method may answer, as in BCMS (lower case). */
export type HttpVerb = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** What every plugin handler and pre-request handler receives. */
export interface BcmsPluginContext {
  request: Request;
  response: Response;
  logger: Logger;
  errorHandler: ErrorHandler;
  /** Templates and entries of the router's database. */
  repo: BcmsRepo;
}

export interface PreRequestContext extends BcmsPluginContext {
  /** Verifies the request's bearer token with the router's `jwt` options (throws a 401 otherwise). */
  verifyAccessToken(): Promise<JWT>;
}

/** Runs before the handler and guards it; what it returns is spread into the handler's context. */
export type PreRequestHandler<Result> = (context: PreRequestContext) => Result | Promise<Result>;

/** `void` (no guard) adds nothing; an object result adds its members. */
type Spread<T> = [T] extends [void] ? unknown : [T] extends [object] ? T : unknown;

/** A handler's context: the base context plus what its pre-request handler yielded. */
export type BcmsPluginHandlerContext<PreResult> = BcmsPluginContext & Spread<PreResult>;

export interface BcmsControllerMethod<PreResult = void, Body = unknown> {
  /** Appended to the controller path; begins with `/`. `:name` segments become `request.params.name`. */
  path: string;
  type: HttpVerb;
  preRequestHandler?: PreRequestHandler<PreResult>;
  /** Returns the response body, sent as it is with status 200. */
  handler: (context: BcmsPluginHandlerContext<NoInfer<PreResult>>) => Body | Promise<Body>;
}

export interface BcmsController {
  /** Human-readable name. */
  name: string;
  /** Prefix of every method path; begins with `/`. */
  path: string;
  // `any`: one controller mixes methods with different guards and bodies.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  methods: () => Record<string, BcmsControllerMethod<any, any>>;
}

export interface BcmsPlugin {
  /** Path segment of the plugin's endpoints: `/api/plugin/<name>/...`. URL-safe. */
  name: string;
  controllers: BcmsController[];
  /**
   * The plugin's built UI (a directory with an index.html, such as Vite's `dist`), served at
   * `/plugin/<name>/` and listed under "Plugins" in the admin shell by `label` (default: the name,
   * dashes as spaces).
   */
  ui?: { dir: string; label?: string };
}

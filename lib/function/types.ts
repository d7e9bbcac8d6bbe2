import type { Request } from 'express';
import type { BcmsRepo } from '../db/repository';
import type { ErrorHandler } from '../http/errors';
import type { Logger } from '../logger';
import type { JWT } from '../security/token';
import type { SignatureAuth } from '../security/signature';

export interface BcmsFunctionConfig {
  /** Last segment of the call URL: `POST /api/function/<name>`. URL-safe. */
  name: string;
  /** `true`: anyone may call it. `false`: an HTTP Signature, or a JWT whose role holds EXECUTE. */
  public: boolean;
}

/** Who called a private function: the API key whose signature was accepted, or the JWT. `null` for a public function. */
export type BcmsFunctionAuth = SignatureAuth | { type: 'jwt'; accessToken: JWT };

// `any` by default, as Express types `req.body`: BCMS function files read it without a cast.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface BcmsFunctionContext<Body = any> {
  /** The Express request; `request.body` is the parsed JSON body (any JSON value). */
  request: Request & { body: Body };
  logger: Logger;
  errorHandler: ErrorHandler;
  /** Templates and entries of the router's database. */
  repo: BcmsRepo;
  auth: BcmsFunctionAuth | null;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface BcmsFunction<Body = any, Result = unknown> {
  config: BcmsFunctionConfig;
  /** Its return value is answered as `{ "success": true, "result": <value> }`. */
  handler: (context: BcmsFunctionContext<Body>) => Result | Promise<Result>;
}

/** What `createBcmsFunction` returns: the default export of a file in `src/functions`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface BcmsFunctionModule<Body = any, Result = unknown> {
  readonly kind: 'bcms-function';
  /** Runs the factory; the router calls it once, before `ready` resolves. */
  readonly create: () => Promise<BcmsFunction<Body, Result>>;
}

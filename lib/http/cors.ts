import type { IncomingMessage, ServerResponse } from 'node:http';
import corsMiddleware from 'cors';
import { checkKeys } from '../option-keys';

/**
 * The options of the `cors` package (expressjs/cors), as the router passes them on: the same
 * names and meanings. Declared here so that the package's types ask nothing of an app's own.
 */
export interface CorsOptions {
  /**
   * Which origins may read the answers: `'*'`, one origin, a list of origins or patterns, `true`
   * (the request's own), `false` (no CORS headers), or `(origin, callback(error, allow))`.
   */
  origin?:
    | boolean
    | string
    | RegExp
    | readonly (boolean | string | RegExp)[]
    | ((origin: string | undefined, callback: (error: Error | null, origin?: boolean | string | RegExp | readonly (boolean | string | RegExp)[]) => void) => void);
  /** `Access-Control-Allow-Methods` of a preflight. Default: the verbs of the path asked for. */
  methods?: string | readonly string[];
  /** `Access-Control-Allow-Headers` of a preflight. Default: those the preflight asks for. */
  allowedHeaders?: string | readonly string[];
  /** `Access-Control-Expose-Headers`. Default: the router's own (`X-Request-Id`, `WWW-Authenticate`, `Allow`, `Retry-After`, `Idempotent-Replayed`, `ETag`). */
  exposedHeaders?: string | readonly string[];
  /** `Access-Control-Allow-Credentials: true`. Default false. */
  credentials?: boolean;
  /** `Access-Control-Max-Age` of a preflight, in seconds. Default 600. */
  maxAge?: number;
  /** A preflight's status. Default 204. */
  optionsSuccessStatus?: number;
  /** Leaves a preflight to be answered after its headers are set: the router answers it (204). */
  preflightContinue?: boolean;
}

/** The `cors` option: `'*'` (any origin, no credentials), `false` (the app's own CORS), or the `cors` package's options. */
export type CorsOption = '*' | false | CorsOptions;

/**
 * The headers a browser script may read of the router's answers: which log line (`X-Request-Id`),
 * why it was refused (`WWW-Authenticate`, `Allow`), when to retry (`Retry-After`), whether a call
 * was a replay (`Idempotent-Replayed`), and the OpenAPI document's `ETag`.
 */
export const EXPOSED_HEADERS = 'X-Request-Id, WWW-Authenticate, Allow, Retry-After, Idempotent-Replayed, ETag';

/** What a preflight that names no header is told it may send: the headers the router reads. */
const ALLOWED_HEADERS = 'Authorization, Content-Type, Date, Digest, Content-Digest, X-Bcms-Nonce, Idempotency-Key, X-Request-Id';

const CORS_KEYS = ['origin', 'methods', 'allowedHeaders', 'exposedHeaders', 'credentials', 'maxAge', 'optionsSuccessStatus', 'preflightContinue'];

/**
 * The CORS headers of the router's answers, set by the `cors` package: on every answer (`answer`),
 * and on the preflights of the paths it serves (`preflight`, with the path's verbs).
 */
export interface RouterCors {
  /** Sets an answer's CORS headers: at once (undefined), or once an `origin` function calls back (a promise). */
  answer(req: IncomingMessage, res: ServerResponse): Promise<void> | undefined;
  /** Answers an `OPTIONS` preflight of a path whose verbs are `allow`. */
  preflight(req: IncomingMessage, res: ServerResponse, allow: string): Promise<void> | undefined;
}

type Middleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

/** The router's CORS, or undefined for `cors: false` (no header written, no preflight answered: the app's own CORS rules). */
export function createCors(option: CorsOption | undefined): RouterCors | undefined {
  if (option === false) return undefined;
  const options = corsOptionsOf(option);
  const middleware = corsMiddleware(options as corsMiddleware.CorsOptions) as Middleware;
  return {
    answer: (req, res) => run(middleware, req, res),
    preflight(req, res, allow) {
      res.setHeader('Allow', allow);
      const own = {
        ...options,
        // The app's own list wins; else the path's verbs, and the headers asked for (the router's when none are).
        methods: options.methods ?? allow,
        allowedHeaders: options.allowedHeaders ?? (req.headers['access-control-request-headers'] === undefined ? ALLOWED_HEADERS : undefined),
      };
      const waiting = run(corsMiddleware(own as corsMiddleware.CorsOptions) as Middleware, req, res);
      // With `preflightContinue` (or an origin refused) the package leaves the answer to the router.
      if (waiting !== undefined) return waiting.then(() => endPreflight(res, options));
      endPreflight(res, options);
      return undefined;
    },
  };
}

/** The options the package is given: the router's defaults beneath the app's (checked now, so that a typo fails at start). */
function corsOptionsOf(option: CorsOption | undefined): CorsOptions {
  if (option === undefined || option === '*') return { origin: '*', exposedHeaders: EXPOSED_HEADERS, maxAge: 600 };
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new TypeError(`option cors must be '*', false or the cors package's options (an object), got ${JSON.stringify(option)}`);
  }
  checkKeys(option, 'cors', CORS_KEYS);
  // `'*'` with credentials is what browsers refuse: say so now rather than through a blocked request.
  if (option.credentials === true && (option.origin === undefined || option.origin === '*')) {
    throw new TypeError("option cors: credentials: true needs an origin other than '*' (browsers refuse credentials with Access-Control-Allow-Origin: *)");
  }
  return { exposedHeaders: EXPOSED_HEADERS, maxAge: 600, ...option };
}

/** Runs the package's middleware: undefined when it called `next` at once, a promise when it will later; throws what it passed to `next`. */
function run(middleware: Middleware, req: IncomingMessage, res: ServerResponse): Promise<void> | undefined {
  let called = false;
  let failure: unknown;
  let later: ((error: unknown) => void) | undefined;
  middleware(req, res, (error) => {
    if (later !== undefined) later(error);
    else {
      called = true;
      failure = error;
    }
  });
  if (called) {
    if (failure != null) throw failure;
    return undefined;
  }
  // The package answered (a preflight), or an `origin` function will call back: then it calls
  // `next`, or (a preflight) answers without it.
  if (res.writableEnded) return undefined;
  return new Promise((resolve, reject) => {
    const answered = (): void => resolve();
    res.once('finish', answered);
    later = (error) => {
      res.off('finish', answered);
      if (error == null) resolve();
      else reject(error);
    };
  });
}

function endPreflight(res: ServerResponse, options: CorsOptions): void {
  if (res.writableEnded) return;
  res.statusCode = options.optionsSuccessStatus ?? 204;
  res.setHeader('Content-Length', '0');
  res.end();
}

/** Where the exchange leaves the router's CORS for an `OPTIONS` request's part (`writePreflight`). */
export const ROUTER_CORS = Symbol('bcms-extensions.cors');

/** A response to an `OPTIONS` request, with the router's CORS (undefined: none was configured). */
export type PreflightResponse = ServerResponse & { [ROUTER_CORS]?: RouterCors };

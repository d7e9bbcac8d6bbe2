/**
 * Every error the router can answer with, beside its status and default message: the table of
 * docs/http.md. Handlers throw; `lib/http/respond.ts` is the one place that renders.
 */
export const errorCodes = {
  /** Plugin guard: no bearer token in the request. Plugin family only (functions use SIGNATURE_REQUIRED). */
  TOKEN_MISSING: { status: 401, message: 'Token is `undefined`.' },
  TOKEN_INVALID: { status: 401, message: 'Invalid token.' },
  TOKEN_FORBIDDEN: { status: 403, message: 'Token is not authorized for this action.' },
  INVALID_JSON: { status: 400, message: 'Request body is not valid JSON.' },
  INVALID_URL: { status: 400, message: 'Request path is not a valid URL path.' },
  /** The package's own endpoints (`/api/extensions/`): a body they cannot take. */
  BAD_REQUEST: { status: 400, message: 'Request body is not what this endpoint takes.' },
  /** A function's body that does not fit its `config.bodySchema` (the message names the field). */
  BODY_INVALID: { status: 400, message: 'The body does not fit the schema this function takes.' },
  KEY_NOT_FOUND: { status: 404, message: 'No API key has this id.' },
  /** A deployment whose bundle does not load, or does not export what its manifest says. */
  BUNDLE_INVALID: { status: 422, message: 'The bundle does not load, or does not export what its manifest says.' },
  /** A bundle whose code throws while loading (top-level code, a factory, a setup), or ends its isolate. */
  BUNDLE_LOAD_FAILED: { status: 422, message: 'The bundle did not load.' },
  /** A bundle whose loading ran past `loadTimeoutMs` (10 s of CPU time by default, up to six times it in wall time): its isolate was ended. */
  BUNDLE_LOAD_TIMEOUT: { status: 422, message: 'The bundle did not finish loading in time.' },
  /** A deployment named as a plugin or function of the registry (the code in the app wins). */
  NAME_TAKEN: { status: 409, message: 'A plugin or function of the app already has this name.' },
  /** With `deploy.trustedKeys`: a bundle that no pinned key signed. */
  BUNDLE_UNTRUSTED: { status: 403, message: 'The bundle is not signed by a key this service trusts.' },
  /** A file of a plugin's UI, a template or an entry that is not there. */
  NOT_FOUND: { status: 404, message: 'Not found.' },
  /** A UI file asked for with `If-Match` / `If-Unmodified-Since` that no longer holds. */
  PRECONDITION_FAILED: { status: 412, message: 'Precondition failed: the file has changed.' },
  /** A UI file asked for with a `Range` outside it. */
  RANGE_NOT_SATISFIABLE: { status: 416, message: 'Requested range is not satisfiable.' },
  BODY_TOO_LARGE: { status: 413, message: 'Request body is larger than the limit.' },
  /** A body still arriving `bodyTimeoutMs` after the router began to read it (the connection is closed). */
  REQUEST_TIMEOUT: { status: 408, message: 'The request body did not arrive in time.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Function bodies are JSON: send Content-Type: application/json.' },
  FUNCTION_NOT_FOUND: { status: 404, message: 'Function not found.' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed.' },
  SIGNATURE_REQUIRED: { status: 401, message: 'This function is private: sign the request (HTTP Signature) or send a bearer token whose role holds EXECUTE.' },
  SIGNATURE_INVALID: { status: 401, message: 'Request signature is invalid.' },
  SIGNATURE_EXPIRED: { status: 401, message: 'Request date is outside the accepted clock skew.' },
  SIGNATURE_REPLAYED: { status: 401, message: 'This signed request was already accepted once.' },
  DIGEST_MISMATCH: { status: 401, message: 'Body digest does not match the body.' },
  KEY_FORBIDDEN: { status: 403, message: 'This API key may not call this function.' },
  /** A signature of an API key past its `expiresAt` (checked once the signature verified). */
  KEY_EXPIRED: { status: 401, message: 'This API key has expired: sign with a key that has not (bcms-ext keys create).' },
  /** `POST /api/extensions/keys` with `deploy: true`, refused: `keys.deployOverHttp` is off, or the token has no SUDO role holding WRITE. */
  DEPLOY_KEY_FORBIDDEN: { status: 403, message: 'Deploy keys are not created over HTTP here.' },
  BODY_ALREADY_PARSED: { status: 500, message: 'A body parser ran before the router, so the signed body cannot be checked: mount the router first, or give the parser verify: keepRawBody.' },
  HANDLER_ERROR: { status: 500, message: 'Handler error.' },
  INTERNAL_ERROR: { status: 500, message: 'Internal error.' },
  FUNCTION_TIMEOUT: { status: 504, message: 'Function ran past its time-out.' },
  /** A plugin handler past `pluginTimeoutMs` (plugins answer `{ message }`). */
  PLUGIN_TIMEOUT: { status: 504, message: 'The handler ran past its time-out.' },
  /** The isolate running the handler died (heap limit, uncaught exception, process.exit) or was ended; it is replaced. */
  EXTENSION_CRASHED: { status: 500, message: 'The extension crashed while answering; it is being restarted.' },
  /**
   * `sandbox: 'auto'` found no sandbox (bubblewrap) and `NODE_ENV` is `production`: deployed code is
   * not run without one. Install bubblewrap, or set `sandbox: 'none'` to run it unsandboxed on purpose.
   */
  SANDBOX_UNAVAILABLE: { status: 503, message: "No sandbox runs here (bubblewrap): deployments are refused in production. Install bubblewrap, or set sandbox: 'none' on purpose." },
  /** An isolated handler's answer (its body and headers) past `extensionAnswerMb`: not sent. */
  EXTENSION_ANSWER_TOO_LARGE: { status: 502, message: "The extension's answer is larger than this service takes (extensionAnswerMb)." },
  DATABASE_UNAVAILABLE: { status: 503, message: 'Database is unavailable; try again shortly.' },
  /** A request that reached the router after `router.close()` began (sent with `Connection: close`): another instance, or this one restarted, answers a retry. */
  SERVICE_CLOSING: { status: 503, message: 'The service is shutting down: send the request again (it will reach an instance that is up).' },
  /** A function call past `rateLimit` (its key's or its IP's points in the window), with `Retry-After`. */
  RATE_LIMITED: { status: 429, message: 'Too many calls: retry after the time Retry-After gives.' },
  /**
   * The connection was lost after a write or a COMMIT was sent, before its answer came: the write
   * may or may not be in the database. Retrying blindly may apply it twice (issue 23, item 9).
   */
  DATABASE_OUTCOME_UNKNOWN: {
    status: 503,
    message: 'The database went away after a write was sent: it may or may not have been applied. Retry with the same Idempotency-Key, or check before writing again.',
  },
  /** A function call's `Idempotency-Key` that is not 1 to 255 printable ASCII characters, or sent twice. */
  IDEMPOTENCY_KEY_INVALID: { status: 400, message: 'The Idempotency-Key header must be 1 to 255 printable ASCII characters, sent once.' },
  /** The same caller sent this `Idempotency-Key` to this function within 24 h with another body. */
  IDEMPOTENCY_KEY_REUSED: { status: 422, message: 'This Idempotency-Key was used with another body: send a new key for a new request.' },
  /** The first call with this `Idempotency-Key` is still running (on this instance or another): retry after `Retry-After`. */
  IDEMPOTENCY_KEY_IN_USE: { status: 409, message: 'A call with this Idempotency-Key is still running: retry shortly to get its outcome.' },
  /**
   * What the database cannot take for its size, refused before the query (a filter over its cap, a
   * template field over its length) or by Postgres (an index row too large, more than 65,535 bound
   * values, a statement too complex): the caller's doing, never an outage.
   */
  TOO_LARGE: { status: 400, message: 'The request holds a value or a filter too large for the database.' },
} as const satisfies Record<string, { status: number; message: string }>;

/** Every error code the router answers with (`{ code }` in an error body); each has its status in `errorCodes`. */
export type ErrorCode = keyof typeof errorCodes;

/**
 * An error that becomes an HTTP answer: `status`, and `message` as the public body text.
 * `code` is the function-family code (`HANDLER_ERROR` for errors a handler raised itself).
 */
export class BcmsHttpError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  /** Extra response headers (`WWW-Authenticate`, `Allow`, ...). */
  readonly headers: Readonly<Record<string, string>> | undefined;
  /** A plugin error's whole body, when a handler gave `errorHandler.occurred` an object. */
  readonly body: object | undefined;

  constructor(code: ErrorCode, message?: string, headers?: Record<string, string>, status?: number, body?: object) {
    super(message ?? errorCodes[code].message);
    this.name = 'BcmsHttpError';
    this.code = code;
    this.status = status ?? errorCodes[code].status;
    this.headers = headers;
    this.body = body;
  }
}

/** Whether `error` is the service's own closing (503 SERVICE_CLOSING): a load or a call cut off by `close()`. */
export function isClosing(error: unknown): boolean {
  return error instanceof BcmsHttpError && error.code === 'SERVICE_CLOSING';
}

/** The `errorHandler` of a handler's context, as in BCMS. */
export interface ErrorHandler {
  /**
   * Returns an error to throw; the router answers it with `status`. A string message is answered
   * `{ "message": message }`; an object is the body as it is (plugins; a function's error carries it
   * as JSON text in `error.message`).
   *
   * @example
   * throw errorHandler.occurred(HTTPStatus.NOT_FOUNT, `No entry with id "${id}".`);
   */
  occurred(status: number, message: unknown): BcmsHttpError;
}

export const errorHandler: ErrorHandler = Object.freeze({
  occurred(status: number, message: unknown): BcmsHttpError {
    // A status outside 400-599 would tell the client that a failure succeeded: refuse it loudly.
    if (!Number.isInteger(status) || status < 400 || status > 599) {
      throw new TypeError(`errorHandler.occurred: status must be an integer from 400 to 599, got ${String(status)}`);
    }
    if (typeof message === 'string') return new BcmsHttpError('HANDLER_ERROR', message, undefined, status);
    if (message !== null && typeof message === 'object') {
      return new BcmsHttpError('HANDLER_ERROR', JSON.stringify(message) ?? '', undefined, status, message);
    }
    return new BcmsHttpError('HANDLER_ERROR', String(message), undefined, status);
  },
});

import path from 'node:path';
import { parseByteSize } from './http/body';
import type { DatabaseOption } from './db/connection';
import { createDefaultLogger, type Logger } from './logger';
import type { JwtOptions } from './security/jwt';
import { type AuthOptions, type ResolvedAuth, resolveAuth } from './security/auth';
import { checkKeys } from './option-keys';
import { checkRateLimitOption, type RateLimitOptions } from './security/rate-limit';
import { resolveSecretsKeys, type SecretsKeys } from './security/secrets';
import { resolveTrustedKeys, type TrustedKeys } from './deploy/signing';
import type { AdminSettings } from './ui/assets';
import { resolvePermissions, type ExtensionPermissionsOption, type ResolvedPermissionsOption, type SandboxOption } from './isolate/sandbox';
import { createCors, type CorsOption, type RouterCors } from './http/cors';
import type { ErrorHook } from './http/on-error';
import { resolveOpenApi, type OpenApiInfo, type OpenApiOption } from './openapi/info';

/** The second argument of `bcmsExtensions` (docs/options.md). */
export interface BcmsExtensionsOptions {
  /** Verifies JWTs for guarded plugin endpoints and private functions. */
  jwt?: JwtOptions;
  /**
   * The app's own users: `fromRequest(req)` names the request's user (`{ userId, roles }`, or null:
   * then a BCMS JWT is tried) for guards, the SDK's routes, private functions and the admin shell;
   * `signInPath` and `tokenField` say where the shell signs in and which field of the answer holds
   * the token. Default: BCMS JWTs only, `/api/auth/login`, `accessToken`.
   */
  auth?: AuthOptions;
  /**
   * A Knex instance, a Postgres URL, or `{ pglite: DIR }` (`'memory://'` in memory). Default:
   * `DATABASE_URL` when set, else embedded PGlite in `.bcms/data` under the working directory.
   */
  database?: DatabaseOption;
  signature?: { clockSkewSeconds?: number };
  /** Largest JSON body: bytes, or a size such as `'1mb'` (a method's or function's own `bodyLimit` wins). Default `'100kb'`. */
  bodyLimit?: number | string;
  /** A body still arriving this long after the router began to read it is answered 408 REQUEST_TIMEOUT. Default 10000. */
  bodyTimeoutMs?: number;
  /** A function that runs longer is answered 504 FUNCTION_TIMEOUT (and its isolate, if it has one, ended). Default 30000. */
  functionTimeoutMs?: number;
  /**
   * A job run that lasts longer is ended and recorded `timed_out` (its isolate, if it has one, is
   * replaced; a job in the service's process cannot be stopped, and its outcome is ignored). An
   * event handler is held to `functionTimeoutMs`. Default 300000.
   */
  jobTimeoutMs?: number;
  /** A plugin handler that runs longer is answered 504 `{ message }` (and its isolate, if it has one, ended). Default 30000. */
  pluginTimeoutMs?: number;
  /**
   * How long a deployed version may take to load (its top-level code, a factory, a setup): in an
   * isolate, this much CPU time (up to six times it in wall time on a busy machine), then the
   * isolate is ended; in the service's process (`isolate: 'none'`), this much wall time. Past it the
   * deploy answers 422 `BUNDLE_LOAD_TIMEOUT`. Default 10000.
   */
  loadTimeoutMs?: number;
  /**
   * Where extension code runs: `'deployed'` (deployed bundles in isolates, the registry in the
   * service's process), `'all'` (the registry too), `'none'` (everything in the service's process).
   * Default `'deployed'`.
   */
  isolate?: 'deployed' | 'all' | 'none';
  /** Heap limit of each isolate, in MB. Default 256. */
  extensionMemoryMb?: number;
  /** The largest answer (body and headers) an isolated handler may give, in MB: past it, 502 `EXTENSION_ANSWER_TOO_LARGE`. Default 16. */
  extensionAnswerMb?: number;
  /** The whole environment extension code sees in an isolate (`process.env`). Default `{}`: none of the host's. */
  extensionEnv?: Record<string, string>;
  /**
   * What each isolate runs in: `'auto'` (bubblewrap where it runs, else plain child processes, said
   * at start), `'bubblewrap'` (required: the router refuses to start without it), `'none'` (plain
   * child processes, on purpose). Under `'auto'` without a sandbox and with `NODE_ENV=production`,
   * deployments are refused (503 SANDBOX_UNAVAILABLE). Default `'auto'`.
   */
  sandbox?: SandboxOption;
  /**
   * What extension code may do in its sandbox beyond its own folder of `files.dir`: `network`
   * (default true), `childProcess` (default true), further `read` and `write` paths (absolute);
   * for every extension, and per name under `byName`.
   */
  extensionPermissions?: ExtensionPermissionsOption;
  /**
   * Extension queries' own connections (never the service's): at most `max` per instance, logged
   * in as a role with rights on the content tables only. Default `{ max: 4 }`.
   */
  extensionPool?: { max?: number };
  /** `'off'`: run no deployment (to recover from a bad one); also `BCMS_DEPLOYMENTS=off`. Default `'on'`. */
  deployments?: 'on' | 'off';
  /**
   * Where BCMS code's files land (`useFS`, paths built from `BCMSConfig` or, in an isolate,
   * `process.cwd()`): a folder of it per plugin. Default `.bcms/files` under the working directory.
   */
  files?: { dir?: string };
  /**
   * Seals the HMAC secrets of API keys at rest (AES-256-GCM): 32 bytes, as 64 hex digits, base64 or
   * a Buffer; several (`[new, old]`) while rotating. Default: `BCMS_SECRETS_KEY` (comma-separated
   * for several), else none: secrets in clear, and a warning at start.
   */
  secretsKey?: string | Buffer | readonly (string | Buffer)[];
  /**
   * `trustedKeys`: the public keys (PEM, Ed25519 or RSA) one of which must sign every deployed
   * bundle; every instance checks the signature before it runs a version. Default: none, and a
   * warning at start that bundles are not signed.
   */
  deploy?: { trustedKeys?: readonly string[] };
  /**
   * API keys over HTTP (`/api/extensions/keys`). `deployOverHttp: true` lets a token whose SUDO
   * role holds WRITE create deploy keys there (a deploy key runs code on every instance). Default
   * false: deploy keys are made on the database (`bcms-ext keys create --deploy` with DATABASE_URL).
   */
  keys?: { deployOverHttp?: boolean };
  /** pino-compatible logger. Default: a pino logger named `bcms-extensions`. */
  logger?: Logger;
  /**
   * The admin shell that lists plugin UIs: where it is served, the host's sign-in route
   * (`loginUrl`, the older name of `auth.signInPath`) and its title. `false`: no shell.
   */
  admin?: false | { path?: string; loginUrl?: string; title?: string };
  /**
   * Who may read the OpenAPI document (`GET /api/extensions/openapi.json`, the admin shell's API
   * view): `'public'` (anyone), `'token'` (a bearer token with one of BCMS's roles, JWTRoleName,
   * holding READ, as the shell's users have), `'off'` (not served; `router.openapi()` still builds
   * it). Default `'public'`. As `{ access?, info? }`, `info` gives the document's `title`,
   * `version`, `description` and `license`.
   *
   * @example
   * bcmsExtensions(registry, { openapi: { access: 'token', info: { title: 'Shop API', version: '2.1.0', license: { name: 'MIT', identifier: 'MIT' } } } });
   */
  openapi?: OpenApiOption;
  /**
   * The CORS headers of the router's answers, through the `cors` package: `'*'` (any origin, no
   * credentials), `false` (none: the app's own cors() before the router decides, and answers
   * preflights), or the `cors` package's options (`origin`, `credentials`, `exposedHeaders`...).
   * Default `'*'`.
   *
   * @example
   * bcmsExtensions(registry, { cors: { origin: ['https://admin.example.com'], credentials: true } });
   */
  cors?: CorsOption;
  /**
   * Called with every error the router answers with a 5xx (a handler's throw, a time-out, a crashed
   * isolate, the database gone), before the answer, and never waited for; what it throws or
   * rejects with is logged. Its third argument holds the request id, status and code.
   *
   * @example
   * bcmsExtensions(registry, { onError: (error, req) => Sentry.captureException(error) });
   */
  onError?: ErrorHook;
  /**
   * Function calls past a number of points in a window of seconds are answered 429 `RATE_LIMITED`
   * with `Retry-After`, counted in the database so that every instance shares the count: `key` per
   * caller of a private function (the API key that signed, or a bearer token's user), `ip` per
   * client address (`req.ip`: Express's `trust proxy` decides it). Positive integers. Default: off.
   *
   * @example
   * bcmsExtensions(registry, { rateLimit: { key: { points: 100, seconds: 1 }, ip: { points: 300, seconds: 10 } } });
   */
  rateLimit?: RateLimitOptions;
  /**
   * `true` serves `GET /api/extensions/metrics` in Prometheus's text format (prom-client): requests,
   * each extension's calls, errors and latency, deploys, isolates started and crashed, signature
   * refusals, database outages, event deliveries and job runs. Read with an ADMIN token, or with
   * `{ token }` (16 characters or more) as a bearer token, as a scraper would. Default: off.
   * The registry is `router.metrics`, for an app that serves its own metrics to merge.
   */
  metrics?: boolean | { token?: string };
}

export interface ResolvedOptions {
  readonly jwt: Readonly<JwtOptions>;
  readonly auth: ResolvedAuth;
  readonly database: unknown;
  readonly signature: Readonly<{ clockSkewSeconds: number }>;
  readonly bodyLimit: number;
  readonly bodyTimeoutMs: number;
  readonly functionTimeoutMs: number;
  readonly jobTimeoutMs: number;
  readonly pluginTimeoutMs: number;
  readonly loadTimeoutMs: number;
  readonly isolate: 'deployed' | 'all' | 'none';
  readonly extensionMemoryMb: number;
  readonly extensionAnswerMb: number;
  readonly extensionEnv: Readonly<Record<string, string>>;
  readonly sandbox: SandboxOption;
  readonly extensionPermissions: ResolvedPermissionsOption;
  /** `NODE_ENV` is `production`: deployments without a sandbox are refused unless `sandbox: 'none'` was chosen. */
  readonly production: boolean;
  readonly extensionPool: Readonly<{ max: number }>;
  readonly deployments: 'on' | 'off';
  readonly openapi: 'public' | 'token' | 'off';
  /** `openapi.info`: the fields the app gave. */
  readonly openapiInfo: Readonly<OpenApiInfo>;
  /** The router's CORS; undefined for `cors: false`. */
  readonly cors: RouterCors | undefined;
  readonly onError: ErrorHook | undefined;
  /** `files.dir`, absolute. */
  readonly filesDir: string;
  readonly logger: Logger;
  readonly admin: Readonly<AdminSettings> | null;
  /** `secretsKey`, else `BCMS_SECRETS_KEY`, parsed; undefined: secrets in clear. */
  readonly secrets: SecretsKeys | undefined;
  /** `deploy.trustedKeys`, parsed; undefined: bundles are not signed. */
  readonly trustedKeys: TrustedKeys | undefined;
  readonly keys: Readonly<{ deployOverHttp: boolean }>;
  /** `rateLimit`, checked; undefined: off. */
  readonly rateLimit: Readonly<RateLimitOptions> | undefined;
  /** `metrics`, checked; undefined: off. */
  readonly metrics: Readonly<{ token: string | undefined }> | undefined;
}

export const defaultOptions = Object.freeze({
  jwt: Object.freeze({ algorithms: Object.freeze(['HS256']) }),
  signature: Object.freeze({ clockSkewSeconds: 300 }),
  bodyLimit: '100kb',
  bodyTimeoutMs: 10_000,
  functionTimeoutMs: 30_000,
  jobTimeoutMs: 300_000,
  pluginTimeoutMs: 30_000,
  loadTimeoutMs: 10_000,
  isolate: 'deployed',
  extensionMemoryMb: 256,
  extensionAnswerMb: 16,
  extensionPool: Object.freeze({ max: 4 }),
  admin: Object.freeze({ path: '/bcms', loginUrl: '/api/auth/login', title: 'BCMS' }),
  keys: Object.freeze({ deployOverHttp: false }),
});

const KNOWN = new Set([
  'jwt',
  'auth',
  'database',
  'signature',
  'bodyLimit',
  'bodyTimeoutMs',
  'functionTimeoutMs',
  'jobTimeoutMs',
  'pluginTimeoutMs',
  'loadTimeoutMs',
  'logger',
  'admin',
  'isolate',
  'extensionMemoryMb',
  'extensionAnswerMb',
  'extensionEnv',
  'sandbox',
  'extensionPermissions',
  'extensionPool',
  'deployments',
  'files',
  'secretsKey',
  'deploy',
  'keys',
  'openapi',
  'rateLimit',
  'metrics',
  'cors',
  'onError',
]);

/**
 * Merges the caller's options into the frozen defaults, never mutating the caller's objects.
 * A mistake throws now, while the app is built, rather than at the first request.
 */
export function resolveOptions(options: BcmsExtensionsOptions | undefined, env: NodeJS.ProcessEnv = process.env): ResolvedOptions {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object') throw new TypeError('argument options must be an object');
  for (const key of Object.keys(options)) {
    if (!KNOWN.has(key)) throw new TypeError(`unknown option "${key}" (known: ${[...KNOWN].join(', ')})`);
  }
  const { jwt = {}, signature = {}, files = {}, deploy = {}, keys = {}, extensionPool = {} } = options;
  checkKeys(extensionPool, 'extensionPool', ['max']);
  const extensionPoolMax = positiveInteger(extensionPool.max ?? defaultOptions.extensionPool.max, 'extensionPool.max', 'connections');
  checkKeys(deploy, 'deploy', ['trustedKeys']);
  checkKeys(jwt, 'jwt', ['secret', 'algorithms', 'issuer', 'audience']);
  checkKeys(files, 'files', ['dir']);
  if (files.dir !== undefined && (typeof files.dir !== 'string' || files.dir === '')) throw new TypeError('option files.dir must be a folder (a non-empty string)');
  checkKeys(signature, 'signature', ['clockSkewSeconds']);
  checkKeys(keys, 'keys', ['deployOverHttp']);
  const deployOverHttp = keys.deployOverHttp ?? defaultOptions.keys.deployOverHttp;
  if (typeof deployOverHttp !== 'boolean') throw new TypeError(`option keys.deployOverHttp must be true or false, got ${JSON.stringify(deployOverHttp)}`);
  const admin = resolveAdmin(options.admin);
  const auth = resolveAuth(options.auth, options.admin === false ? undefined : options.admin?.loginUrl);
  const rateLimit = checkRateLimitOption(options.rateLimit);

  const clockSkewSeconds = signature.clockSkewSeconds ?? defaultOptions.signature.clockSkewSeconds;
  if (!Number.isFinite(clockSkewSeconds) || clockSkewSeconds < 0) {
    throw new TypeError(`option signature.clockSkewSeconds must be a number of seconds >= 0, got ${String(clockSkewSeconds)}`);
  }
  const functionTimeoutMs = positiveInteger(options.functionTimeoutMs ?? defaultOptions.functionTimeoutMs, 'functionTimeoutMs', 'milliseconds');
  const jobTimeoutMs = positiveInteger(options.jobTimeoutMs ?? defaultOptions.jobTimeoutMs, 'jobTimeoutMs', 'milliseconds');
  const bodyTimeoutMs = positiveInteger(options.bodyTimeoutMs ?? defaultOptions.bodyTimeoutMs, 'bodyTimeoutMs', 'milliseconds');
  const pluginTimeoutMs = positiveInteger(options.pluginTimeoutMs ?? defaultOptions.pluginTimeoutMs, 'pluginTimeoutMs', 'milliseconds');
  const loadTimeoutMs = positiveInteger(options.loadTimeoutMs ?? defaultOptions.loadTimeoutMs, 'loadTimeoutMs', 'milliseconds');
  const extensionMemoryMb = positiveInteger(options.extensionMemoryMb ?? defaultOptions.extensionMemoryMb, 'extensionMemoryMb', 'megabytes');
  const extensionAnswerMb = positiveInteger(options.extensionAnswerMb ?? defaultOptions.extensionAnswerMb, 'extensionAnswerMb', 'megabytes');
  // An answer crosses as one JSON text, and a JavaScript string holds at most about 512 MB.
  if (extensionAnswerMb > 256) throw new TypeError(`option extensionAnswerMb must be at most 256 (megabytes), got ${extensionAnswerMb}`);
  const isolate = options.isolate ?? defaultOptions.isolate;
  if (isolate !== 'deployed' && isolate !== 'all' && isolate !== 'none') {
    throw new TypeError(`option isolate must be 'deployed', 'all' or 'none', got ${JSON.stringify(isolate)}`);
  }
  const extensionEnv = options.extensionEnv ?? {};
  if (extensionEnv === null || typeof extensionEnv !== 'object' || Array.isArray(extensionEnv) || Object.values(extensionEnv).some((value) => typeof value !== 'string')) {
    throw new TypeError('option extensionEnv must be an object of strings (the environment variables extension code may see)');
  }
  const sandbox = options.sandbox ?? 'auto';
  if (sandbox !== 'auto' && sandbox !== 'bubblewrap' && sandbox !== 'none') throw new TypeError(`option sandbox must be 'auto', 'bubblewrap' or 'none', got ${JSON.stringify(sandbox)}`);
  const extensionPermissions = resolvePermissions(options.extensionPermissions);
  const deployments = options.deployments ?? (env.BCMS_DEPLOYMENTS === 'off' ? 'off' : 'on');
  if (deployments !== 'on' && deployments !== 'off') throw new TypeError(`option deployments must be 'on' or 'off', got ${JSON.stringify(deployments)}`);
  const { access: openapi, info: openapiInfo } = resolveOpenApi(options.openapi);
  const cors = createCors(options.cors);
  if (options.onError !== undefined && typeof options.onError !== 'function') throw new TypeError('option onError must be a function (error, req) => void');
  // pino writing to stdout once per turn of the event loop, and at once on exit and on signals.
  const logger = options.logger ?? createDefaultLogger();
  for (const level of ['info', 'warn', 'error', 'debug'] as const) {
    if (typeof logger[level] !== 'function') throw new TypeError(`option logger must be pino-compatible: logger.${level} is not a function`);
  }
  return Object.freeze({
    jwt: Object.freeze({ ...jwt, algorithms: [...(jwt.algorithms ?? defaultOptions.jwt.algorithms)] }),
    auth,
    database: options.database,
    signature: Object.freeze({ clockSkewSeconds }),
    bodyLimit: parseByteSize(options.bodyLimit ?? defaultOptions.bodyLimit, 'bodyLimit'),
    bodyTimeoutMs,
    functionTimeoutMs,
    jobTimeoutMs,
    loadTimeoutMs,
    pluginTimeoutMs,
    isolate,
    extensionMemoryMb,
    extensionAnswerMb,
    extensionEnv: Object.freeze({ ...extensionEnv }),
    sandbox,
    extensionPermissions,
    production: env.NODE_ENV === 'production',
    extensionPool: Object.freeze({ max: extensionPoolMax }),
    deployments,
    openapi,
    openapiInfo,
    cors,
    onError: options.onError,
    filesDir: path.resolve(files.dir ?? path.join('.bcms', 'files')),
    logger,
    // The shell signs in where auth says (admin.loginUrl is its older name), and asks for its user first when the app's users are used.
    admin: admin === null ? null : Object.freeze({ ...admin, loginUrl: auth.signInPath, tokenField: auth.tokenField, appUsers: auth.fromRequest !== undefined, api: openapi !== 'off' }),
    secrets: resolveSecretsKeys(options.secretsKey, env),
    trustedKeys: resolveTrustedKeys(deploy.trustedKeys),
    keys: Object.freeze({ deployOverHttp }),
    rateLimit,
    metrics: resolveMetrics(options.metrics),
  }) as ResolvedOptions;
}

function resolveMetrics(metrics: BcmsExtensionsOptions['metrics']): ResolvedOptions['metrics'] {
  if (metrics === undefined || metrics === false) return undefined;
  if (metrics === true) return Object.freeze({ token: undefined });
  checkKeys(metrics, 'metrics', ['token']);
  const { token } = metrics;
  if (token !== undefined && (typeof token !== 'string' || token.length < 16))
    throw new TypeError('option metrics.token must be a string of 16 characters or more (a scraper sends it as a bearer token)');
  return Object.freeze({ token });
}

function positiveInteger(value: unknown, name: string, unit: string): number {
  if (!Number.isInteger(value) || (value as number) <= 0) throw new TypeError(`option ${name} must be a positive integer of ${unit}, got ${String(value)}`);
  return value as number;
}

/** The shell's settings, or null for `admin: false`. Its path is a page path of its own, never under /api/. */
function resolveAdmin(admin: BcmsExtensionsOptions['admin']): Readonly<AdminSettings> | null {
  if (admin === false) return null;
  checkKeys(admin ?? {}, 'admin', ['path', 'loginUrl', 'title']);
  const settings = { ...defaultOptions.admin, ...admin };
  const { path, loginUrl, title } = settings;
  if (typeof path !== 'string' || !/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/.test(path) || /^\/(api|plugin)(\/|$)/.test(path)) {
    throw new TypeError(`option admin.path must be a path such as "/bcms" (not under /api/ or /plugin/, no trailing "/"), got ${JSON.stringify(path)}`);
  }
  if (typeof loginUrl !== 'string' || loginUrl === '') throw new TypeError(`option admin.loginUrl must be the host's sign-in URL, got ${JSON.stringify(loginUrl)}`);
  if (typeof title !== 'string' || title.trim() === '') throw new TypeError(`option admin.title must be a non-empty string, got ${JSON.stringify(title)}`);
  return Object.freeze(settings);
}

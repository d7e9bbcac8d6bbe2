import type { BcmsFunctionModule } from '../function/types';
import type { ErrorCode } from '../http/errors';
import type { HttpVerb, MethodRoute } from '../plugin/types';
import type { JsonOrAbsent } from '../json';

export type { JsonAnswer, Jsonified, JsonOrAbsent } from '../json';
import { createHmac, createPrivateKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { HEADER_ALGORITHM, type SignatureAlgorithm } from '../security/algorithms';
import { contentDigestHeader, digestHeader } from '../security/digest';
import { fetchFailure } from '../http/fetch-failure';

/** The key a request is signed with: an HMAC secret, or a private key (RSA or Ed25519). */
export type SigningKey = { keyId: string; secret: string; privateKey?: undefined } | { keyId: string; privateKey: string | KeyObject; secret?: undefined };

export type SignRequestOptions = SigningKey & {
  /** The HTTP method. */
  method: string;
  /** The full URL (its host is signed too), or a path with its query (then `host` is not signed). */
  url: string;
  /** The exact bytes that will be sent; none is an empty body. */
  body?: string | Buffer;
  /** Sign a `Digest: SHA-256=` header (RFC 3230, the default) or a `Content-Digest: sha-256=` one (RFC 9530). */
  digest?: 'digest' | 'content-digest';
  /**
   * Also sign `host` (from a full `url`). Off by default: a reverse proxy that rewrites Host (nginx's
   * `proxy_pass` does) would make every signature fail.
   */
  signHost?: boolean;
  /** The request's Date; default now. */
  date?: Date;
  /**
   * A Content-Type to send, returned among the headers and signed with them. Needed for a body
   * that is not UTF-8 (`application/json; charset=utf-16le`): the charset decides how the signed
   * bytes are read, so the service takes such a body only when `content-type` is signed.
   */
  contentType?: string;
};

/**
 * Signs a request to a private function (docs/signed-calls.md) and returns
 * the headers to send with it: `Date`, the body's digest, a random `X-Bcms-Nonce` (so two identical
 * calls in one second differ), `contentType` when given, and `Authorization: Signature ...` over
 * them and `(request-target)`. For any HTTP client.
 *
 * @example
 * const body = JSON.stringify({ email: 'a@example.com' });
 * const url = 'http://localhost:8080/api/function/submit-form';
 * const headers = signRequest({ method: 'POST', url, body, keyId, secret });
 * await fetch(url, { method: 'POST', body, headers: { ...headers, 'Content-Type': 'application/json' } });
 */
export function signRequest(options: SignRequestOptions): Record<string, string> {
  const { method, url, body = '', digest = 'digest', date = new Date(), signHost = false, contentType } = options;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses in a header value
  if (typeof options.keyId !== 'string' || !/^[^"\\\x00-\x1f\x7f]+$/.test(options.keyId)) {
    throw new TypeError('signRequest: keyId is required, without quotes, backslashes or control characters');
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses in a header value
  if (contentType !== undefined && (typeof contentType !== 'string' || !/^[^\x00-\x1f\x7f]+$/.test(contentType))) {
    throw new TypeError('signRequest: contentType must be a header value, such as "application/json; charset=utf-16le"');
  }
  const { key, algorithm } = signingKey(options);
  const absolute = /^[a-z][a-z0-9+.-]*:\/\//i.test(url);
  const target = absolute ? new URL(url) : new URL(url, 'http://unused.invalid');
  const headers: Record<string, string> = {
    Date: date.toUTCString(),
    [digest === 'digest' ? 'Digest' : 'Content-Digest']: digest === 'digest' ? digestHeader(body) : contentDigestHeader(body),
    'X-Bcms-Nonce': randomBytes(16).toString('base64url'),
  };
  if (contentType !== undefined) headers['Content-Type'] = contentType.trim(); // as the service will read it
  const lines: [string, string][] = [['(request-target)', `${method.toLowerCase()} ${target.pathname}${target.search}`]];
  // What fetch and node:http send as Host: the port only when it is not the scheme's default.
  if (signHost && absolute) lines.push(['host', target.host]);
  if (signHost && !absolute) throw new TypeError('signRequest: signHost needs a full url (https://host/path)');
  for (const [name, value] of Object.entries(headers)) lines.push([name.toLowerCase(), value]);
  const signingString = lines.map(([name, value]) => `${name}: ${value}`).join('\n');
  const signature =
    algorithm === 'hmac-sha256'
      ? createHmac('sha256', key as string)
          .update(signingString)
          .digest('base64')
      : sign(algorithm === 'rsa-sha256' ? 'sha256' : null, Buffer.from(signingString), key as KeyObject).toString('base64');
  const names = lines.map(([name]) => name).join(' ');
  headers.Authorization = `Signature keyId="${options.keyId}",algorithm="${HEADER_ALGORITHM[algorithm]}",headers="${names}",signature="${signature}"`;
  return headers;
}

/** A key's own fields only: a key object spread into signRequest's options brings nothing else along. */
function keyFields(key: SigningKey): SigningKey {
  // All three, so that a key with both a secret and a private key is refused as signRequest refuses it.
  return { keyId: key.keyId, secret: key.secret, privateKey: key.privateKey } as SigningKey;
}

function signingKey(options: SigningKey): { key: string | KeyObject; algorithm: SignatureAlgorithm } {
  if (typeof options.secret === 'string' && options.secret !== '') {
    if (options.privateKey !== undefined) throw new TypeError('signRequest: pass secret or privateKey, not both');
    return { key: options.secret, algorithm: 'hmac-sha256' };
  }
  if (options.privateKey === undefined) throw new TypeError('signRequest: secret (hmac-sha256) or privateKey (rsa-sha256, ed25519) is required');
  const key = typeof options.privateKey === 'string' ? createPrivateKey(options.privateKey) : options.privateKey;
  if (key.type !== 'private') throw new TypeError('signRequest: privateKey must be a private key');
  if (key.asymmetricKeyType === 'rsa') return { key, algorithm: 'rsa-sha256' };
  if (key.asymmetricKeyType === 'ed25519') return { key, algorithm: 'ed25519' };
  throw new TypeError(`signRequest: privateKey must be an RSA or Ed25519 key, got ${String(key.asymmetricKeyType)}`);
}

/**
 * What a failed call's `code` may be: one of the service's error codes (docs/http.md), the client's
 * own `NETWORK_ERROR` (no answer) or `INVALID_RESPONSE` (not the service's answer), or a code a
 * plugin's handler chose (any other string: the union still completes the known ones).
 */
export type ClientErrorCode = ErrorCode | 'NETWORK_ERROR' | 'INVALID_RESPONSE' | (string & {});

/** A call that did not succeed: the service's error code and message, or a transport failure. */
export class FunctionCallError extends Error {
  /** The service's code (`KEY_FORBIDDEN`, `SIGNATURE_EXPIRED`...), `NETWORK_ERROR`, or `INVALID_RESPONSE`. */
  readonly code: ClientErrorCode;
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The service's X-Request-Id, to find its log line. */
  readonly requestId: string | undefined;

  constructor(code: ClientErrorCode, message: string, status: number, requestId?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FunctionCallError';
    this.code = code;
    this.status = status;
    this.requestId = requestId;
  }
}

/** What `createFunctionClient` and `createClient` both take: where the service is, and the key to sign with. */
interface ClientTarget {
  /** Where the service is, such as `https://cms.example.com` (a path prefix is kept). */
  url: string;
  /** An API key that lists the private functions called: their calls are signed (HTTP Signature). */
  key?: SigningKey;
  /** Defaults to the global fetch (Node 20+). */
  fetch?: typeof fetch;
}

/** The shape of releases before 0.2: `baseUrl`, and the key's fields beside it. Still taken. */
type LegacyFunctionClientTarget = {
  /** @deprecated `url`, as `createClient` takes it. */
  baseUrl?: string;
  url?: string;
  key?: undefined;
  fetch?: typeof fetch;
} & (SigningKey | { keyId?: undefined; secret?: undefined; privateKey?: undefined });

export type FunctionClientOptions = (ClientTarget | LegacyFunctionClientTarget) & {
  /** Sign with `Digest` (default) or `Content-Digest`. */
  digest?: 'digest' | 'content-digest';
  /** Also sign `host` (see signRequest); off by default, for reverse proxies that rewrite it. */
  signHost?: boolean;
};

export interface FunctionClient {
  /**
   * Calls `POST /api/function/<name>` with `body` as JSON, signed when the client has a key, and
   * resolves to the function's `result`. Rejects with a FunctionCallError that carries the code.
   * With `idempotencyKey`, sent as `Idempotency-Key`: calling again with the same key and body
   * (after a 503 or a network error, say) gets the first outcome rather than running it twice.
   *
   * @example
   * const key = crypto.randomUUID();
   * await client.call('place-order', order, { idempotencyKey: key }); // retried with the same key
   */
  call<Result = unknown>(name: string, body?: unknown, options?: { idempotencyKey?: string }): Promise<Result>;
}

/** Sends a request to the service at `base`; no answer at all is a `NETWORK_ERROR` naming it. */
async function reach(send: typeof fetch, base: string, url: string, init: RequestInit): Promise<Response> {
  try {
    return await send(url, init);
  } catch (error) {
    throw new FunctionCallError('NETWORK_ERROR', `Could not reach ${base} (${fetchFailure(error)}).`, 0, undefined, { cause: error });
  }
}

/**
 * A client for a service's functions: private ones are signed with the client's key.
 *
 * @example
 * const client = createFunctionClient({ url: 'http://localhost:8080', key: { keyId, secret } });
 * const { id } = await client.call<{ id: string }>('submit-form', { email: 'a@example.com' });
 */
export function createFunctionClient(options: FunctionClientOptions): FunctionClient {
  if (options === null || typeof options !== 'object') throw new TypeError('createFunctionClient: options { url, key? } are required');
  const legacy = options as LegacyFunctionClientTarget;
  if (legacy.baseUrl !== undefined && options.url !== undefined) throw new TypeError('createFunctionClient: give url, not both url and baseUrl');
  if (options.key !== undefined && legacy.keyId !== undefined) throw new TypeError('createFunctionClient: give key: { keyId, secret }, not both key and keyId');
  const given = options.url ?? legacy.baseUrl;
  let base: string;
  try {
    base = new URL(given as string).toString().replace(/\/+$/, '');
  } catch {
    throw new TypeError(`createFunctionClient: url must be a URL such as http://localhost:8080, got ${JSON.stringify(given)}`);
  }
  const key: SigningKey | undefined = options.key ?? (legacy.keyId !== undefined ? (legacy as SigningKey) : undefined);
  const send = options.fetch ?? fetch;
  // Fail now, not at the first call, on a key that cannot sign.
  if (key !== undefined) signRequest({ ...keyFields(key), method: 'POST', url: base });
  return {
    async call<Result>(name: string, body?: unknown, callOptions?: { idempotencyKey?: string }): Promise<Result> {
      if (typeof name !== 'string' || name === '') throw new TypeError('call: a function name is required');
      const url = `${base}/api/function/${encodeURIComponent(name)}`;
      const payload = body === undefined ? '' : JSON.stringify(body);
      const headers: Record<string, string> = payload === '' ? {} : { 'Content-Type': 'application/json' };
      if (key !== undefined) Object.assign(headers, signRequest({ ...keyFields(key), method: 'POST', url, body: payload, digest: options.digest, signHost: options.signHost }));
      if (callOptions?.idempotencyKey !== undefined) headers['Idempotency-Key'] = callOptions.idempotencyKey;
      const response = await reach(send, base, url, { method: 'POST', headers, body: payload === '' ? undefined : payload });
      const requestId = response.headers.get('x-request-id') ?? undefined;
      const text = await response.text();
      let answer: { success?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
      try {
        answer = JSON.parse(text) as typeof answer;
      } catch {
        // not JSON: below
      }
      if (answer !== null && typeof answer === 'object') {
        if (answer.success === true && response.ok) return answer.result as Result;
        const { code, message } = answer.error ?? {};
        if (typeof code === 'string') throw new FunctionCallError(code, typeof message === 'string' ? message : code, response.status, requestId);
      }
      throw new FunctionCallError('INVALID_RESPONSE', `${url} answered ${response.status} without a function result: is ${base} the service?`, response.status, requestId);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The typed client

/** A call that did not succeed, as the typed client throws it: `status` (0 without an answer) and the service's `code`. */
export class BcmsClientError extends FunctionCallError {
  constructor(from: FunctionCallError) {
    super(from.code, from.message, from.status, from.requestId, { cause: from });
    this.name = 'BcmsClientError';
  }
}

/** What a registry is to the client: its function modules (`typeof registry`, not annotated as BcmsRegistry, which erases them). */
interface RegistryShape {
  // biome-ignore lint/suspicious/noExplicitAny: a module typed with its own body must fit (unknown would not: the handler takes the body, contravariant)
  functions?: readonly BcmsFunctionModule<any, any, any, any>[];
  plugins?: readonly unknown[];
}

type ModuleOf<Registry> = Registry extends { functions?: readonly (infer Module)[] } ? Module : never;
type TypesOf<Module> = Module extends { readonly '~types'?: infer Types } ? Exclude<Types, undefined> : never;

/** The names of the registry's functions. */
export type FunctionName<Registry> = TypesOf<ModuleOf<Registry>> extends { name: infer Name } ? Name & string : never;
/** The body function `Name` takes from a caller: its body schema's input type, else its handler's. */
export type FunctionBody<Registry, Name extends string> = Extract<TypesOf<ModuleOf<Registry>>, { name: Name }> extends { body: infer Body } ? Body : never;
/** What function `Name` answers (its `result`): its handler's return type, as JSON carries it. */
export type FunctionResult<Registry, Name extends string> = Extract<TypesOf<ModuleOf<Registry>>, { name: Name }> extends { result: infer Result } ? JsonOrAbsent<Result> : never;

export interface BcmsClientOptions extends ClientTarget {
  /** A bearer token for plugin endpoints behind the JWT guard (a call's own `token` wins). */
  token?: string;
}

/** The registry's plugin endpoints: what `createBcmsPlugin`, `createController` and `createControllerMethod` kept of them. */
type RoutesOf<Registry> = Registry extends { plugins?: readonly (infer Plugin)[] } ? (Plugin extends { readonly '~routes'?: infer Route } ? Exclude<Route, undefined> : never) : never;
/** A declared path with each `:param` open: the paths a caller may write with the values in place. */
type Filled<Path extends string> = Path extends `${infer Head}:${string}/${infer Tail}` ? `${Head}${string}/${Filled<Tail>}` : Path extends `${infer Head}:${string}` ? `${Head}${string}` : Path;
/** The `:param` names of a path. */
export type PathParams<Path extends string> = Path extends `${string}:${infer Name}/${infer Tail}` ? Name | PathParams<Tail> : Path extends `${string}:${infer Name}` ? Name : never;

/** The paths of the registry's `Verb` endpoints, as declared (`/api/plugin/todos/todo/:id`). */
export type PluginPath<Registry, Verb extends HttpVerb> = Extract<RoutesOf<Registry>, { verb: Verb }>['path'];
/**
 * The same paths with the values in place of their `:params` (`/api/plugin/todos/todo/t1`). Kept
 * apart from the declared ones: in one union, TypeScript would drop every declared path a
 * template matches, and with them the editor's completions.
 */
export type FilledPluginPath<Registry, Verb extends HttpVerb> = PluginPath<Registry, Verb> extends infer Path ? (Path extends `${string}:${string}` ? Filled<Path> : never) : never;
/** A path's segments. */
type Segments<Path extends string> = Path extends `${infer Head}/${infer Tail}` ? [Head, ...Segments<Tail>] : [Path];
/** Whether given segments fill declared ones: each `:param` by one non-empty segment without `?` or `#` (a query goes in `query`), the rest as declared. */
type Fills<Given extends string[], Declared extends string[]> = Given extends [infer Segment extends string, ...infer GivenRest extends string[]]
  ? Declared extends [infer Wanted extends string, ...infer DeclaredRest extends string[]]
    ? Wanted extends `:${string}`
      ? Segment extends '' | `${string}${'?' | '#'}${string}`
        ? false
        : Fills<GivenRest, DeclaredRest>
      : Segment extends Wanted
        ? Fills<GivenRest, DeclaredRest>
        : false
    : false
  : Declared extends []
    ? true
    : false;
/** The endpoint a path names: the one declared with that very path (as the router, static paths first), else those whose `:params` it fills. */
type RouteAt<Route, Path extends string> = [Extract<Route, { path: Path }>] extends [never]
  ? Route extends MethodRoute<infer Declared>
    ? Fills<Segments<Path>, Segments<Declared>> extends true
      ? Route
      : never
    : never
  : Extract<Route, { path: Path }>;
/** The registry's `Verb` endpoint at `Path` (never when none is there). */
type VerbRouteAt<Registry, Verb extends HttpVerb, Path extends string> = RouteAt<Extract<RoutesOf<Registry>, { verb: Verb }>, Path>;
/** What the `Verb` endpoint at `Path` answers: its response schema's output, else its handler's return type, as JSON carries it. */
export type PluginAnswer<Registry, Verb extends HttpVerb, Path extends string> = VerbRouteAt<Registry, Verb, Path>['answer'];

/** What a plugin request may carry. */
export interface PluginRequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Added to the URL as its query (`undefined` values are left out). */
  query?: Record<string, string | number | boolean | undefined>;
  /** A bearer token (wins over the client's). */
  token?: string;
  /** Sign the request with the client's `key` (routes that `createJwtApiPreRequestHandler` guards). */
  signed?: boolean;
  headers?: Record<string, string>;
}
/** The body an endpoint takes: its guard schema's input type; unknown (anything, or none) when the registry does not say. */
export type PluginBody<Registry, Verb extends HttpVerb, Path extends string> = VerbRouteAt<Registry, Verb, Path>['body'];
/** A typed request's options: `body` as the endpoint takes it, a declared path's `:params` in `params`. */
type RouteOptions<Path extends string, Body> = Omit<PluginRequestOptions, 'body'> &
  (unknown extends Body ? { body?: unknown } : undefined extends Body ? { body?: Body } : { body: Body }) &
  ([PathParams<Path>] extends [never] ? unknown : { params: Record<PathParams<Path>, string | number> });
/** The options may be left out when nothing in them is required. */
type RouteArguments<Path extends string, Body> = Record<string, never> extends RouteOptions<Path, Body> ? [options?: RouteOptions<Path, Body>] : [options: RouteOptions<Path, Body>];

/** Checks a path with the values in place; what it says shows in the compiler's error when one does not fit. */
type ValuesInPlace<Registry, Verb extends HttpVerb, Path extends string> = Path extends `${string}/:${string}`
  ? { error: 'a declared path: give its :params in { params }' }
  : [VerbRouteAt<Registry, Verb, Path>] extends [never]
    ? { error: `no ${Uppercase<Verb>} endpoint at this path (a query goes in { query })` }
    : unknown;

/**
 * One method per verb, typed by the registry's plugins: the path must be one of their endpoints,
 * its `:params` are required, and the answer is what the endpoint answers.
 *
 * @example
 * const { items } = await client.plugin.get('/api/plugin/todos/todo/all', { token });
 * const todo = await client.plugin.get('/api/plugin/todos/todo/:id', { params: { id }, token });
 */
export type PluginRoutesClient<Registry> = { [Verb in HttpVerb]: PluginVerbMethod<Registry, Verb> };

/**
 * A verb's method: a path with the values in place, or a declared one (its `:params` in
 * `params`). A path that fits neither is refused with what `ValuesInPlace` says of it.
 */
export interface PluginVerbMethod<Registry, Verb extends HttpVerb> {
  <Path extends FilledPluginPath<Registry, Verb>>(
    path: Path & ValuesInPlace<Registry, Verb, Path>,
    ...options: RouteArguments<'', PluginBody<Registry, Verb, Path>>
  ): Promise<PluginAnswer<Registry, Verb, Path>>;
  <Path extends PluginPath<Registry, Verb>>(path: Path, ...options: RouteArguments<Path, PluginBody<Registry, Verb, Path>>): Promise<PluginAnswer<Registry, Verb, Path>>;
}

/** A function's body is optional when it may be left out (no schema, `any`, `unknown`, or `undefined` allowed). */
type CallArguments<Body> = undefined extends Body ? [body?: Body, options?: { idempotencyKey?: string }] : [body: Body, options?: { idempotencyKey?: string }];

export interface BcmsClient<Registry> {
  plugin: PluginRoutesClient<Registry> & {
    /**
     * A request to any plugin endpoint, typed by no registry: `verb` and the path as the service
     * serves it (the router's mount prefix belongs in `url`); resolves to the JSON answer, typed
     * by `Answer`. With `token` (or the client's), a bearer token goes; with the client's `key`
     * and `signed: true`, the request is signed. Rejects with a {@link BcmsClientError}.
     *
     * @example
     * const { items } = await client.plugin.send<{ items: Todo[] }>('get', '/api/plugin/todos/todo/all', { token });
     */
    send<Answer = unknown>(verb: HttpVerb, path: string, options?: PluginRequestOptions): Promise<Answer>;
  };
  function: {
    /**
     * `POST /api/function/<name>`, signed when the client has a key; resolves to the function's
     * `result`. Rejects with a {@link BcmsClientError}.
     */
    call<Name extends FunctionName<Registry>>(name: Name, ...body: CallArguments<FunctionBody<Registry, Name>>): Promise<FunctionResult<Registry, Name>>;
  };
}

/**
 * A client typed by the service's registry (`import type` of it: nothing of the service is loaded).
 *
 * @example
 * import type { registry } from '../server/registry';
 * const client = createClient<typeof registry>({ url: 'https://cms.example.com', key: { keyId, secret } });
 * const total = await client.function.call('add', { a: 1, b: 2 }); // total: number
 */
export function createClient<Registry extends RegistryShape>(options: BcmsClientOptions): BcmsClient<Registry> {
  if (options === null || typeof options !== 'object') throw new TypeError('createClient: options { url, key? } are required');
  const functions = createFunctionClient({ url: options.url, key: options.key, fetch: options.fetch });
  const base = new URL(options.url).toString().replace(/\/+$/, '');
  const send = options.fetch ?? fetch;
  async function request(verb: string, route: string, callOptions: PluginRequestOptions = {}): Promise<never> {
    if (typeof route !== 'string' || !route.startsWith('/')) throw new TypeError(`plugin.${verb}: path must start with /, got ${JSON.stringify(route)}`);
    let url = base + route;
    const query = Object.entries(callOptions.query ?? {}).filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined);
    if (query.length > 0) url += `${route.includes('?') ? '&' : '?'}${new URLSearchParams(query.map(([name, value]): [string, string] => [name, String(value)]))}`;
    const method = String(verb).toUpperCase();
    const payload = callOptions.body === undefined ? '' : JSON.stringify(callOptions.body);
    const headers: Record<string, string> = { Accept: 'application/json', ...(payload === '' ? {} : { 'Content-Type': 'application/json' }), ...callOptions.headers };
    const token = callOptions.token ?? options.token;
    if (callOptions.signed === true) {
      if (options.key === undefined) throw new TypeError(`plugin.${verb}: signed: true needs the client's key`);
      Object.assign(headers, signRequest({ ...keyFields(options.key), method, url, body: payload }));
    } else if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    let response: Response;
    try {
      response = await reach(send, base, url, { method, headers, body: payload === '' ? undefined : payload });
    } catch (error) {
      throw new BcmsClientError(error as FunctionCallError); // reach's NETWORK_ERROR, as the typed client throws it
    }
    const text = await response.text();
    // JSON when the service says so; else the text as it came (a Buffer a handler answered, say).
    let answer: unknown = text;
    if (text === '') answer = undefined;
    else if (/[/+]json\b/i.test(response.headers.get('content-type') ?? '')) {
      try {
        answer = JSON.parse(text);
      } catch {
        // said to be JSON and is not: the text as it came
      }
    }
    if (response.ok) return answer as never;
    // Plugins answer { message }; the package's own routes { success: false, error: { code, message } }.
    const body = (answer !== null && typeof answer === 'object' ? answer : {}) as { message?: unknown; error?: { code?: unknown; message?: unknown } };
    const message = typeof body.error?.message === 'string' ? body.error.message : typeof body.message === 'string' ? body.message : `${response.status} ${response.statusText}`;
    const code = typeof body.error?.code === 'string' ? body.error.code : `HTTP_${response.status}`;
    throw new BcmsClientError(new FunctionCallError(code, message, response.status, response.headers.get('x-request-id') ?? undefined));
  }
  /** A typed verb method: a declared path's `:params` filled in from `params`. */
  // Typed by PluginVerbMethod, whose overloads the registry's routes decide: one implementation takes them all.
  const verb = <Verb extends HttpVerb>(name: Verb): PluginVerbMethod<Registry, Verb> =>
    ((route: string, callOptions: PluginRequestOptions & { params?: Record<string, string | number> } = {}): Promise<never> => {
      const { params, ...rest } = callOptions;
      try {
        if (params === undefined && /\/:/.test(route)) throw new TypeError(`plugin.${name}: ${route} takes its :params in { params }`);
        return request(name, params === undefined ? route : fillParams(route, params, name), rest);
      } catch (error) {
        return Promise.reject(error as Error);
      }
    }) as PluginVerbMethod<Registry, Verb>;
  return {
    plugin: {
      send: (verbName, route, callOptions) => request(verbName, route, callOptions),
      get: verb('get'),
      post: verb('post'),
      put: verb('put'),
      patch: verb('patch'),
      delete: verb('delete'),
    },
    function: {
      async call(name, ...[body, callOptions]) {
        try {
          return await functions.call(name, body, callOptions);
        } catch (error) {
          throw error instanceof FunctionCallError ? new BcmsClientError(error) : error;
        }
      },
    },
  };
}

/** Puts each `:param` of a declared path's segments in place, encoded; a missing or unknown one is a caller's mistake. */
function fillParams(route: string, params: Record<string, string | number>, verb: string): string {
  const used = new Set<string>();
  const filled = route.replace(/\/:([^/?#]+)/g, (_segment, name: string) => {
    const value = params[name];
    if (typeof value !== 'string' && typeof value !== 'number') throw new TypeError(`plugin.${verb}: params.${name} is required by ${route}`);
    // Each one segment, as the types say: '' would join the segments around it, '.' and '..' would
    // move the URL to another endpoint (the URL parser resolves them, encoded or not).
    if (value === '' || value === '.' || value === '..') throw new TypeError(`plugin.${verb}: params.${name} is ${JSON.stringify(value)}, which is no path segment`);
    used.add(name);
    return `/${encodeURIComponent(String(value))}`;
  });
  const unknown = Object.keys(params).find((name) => !used.has(name));
  if (unknown !== undefined) throw new TypeError(`plugin.${verb}: ${route} has no :${unknown}`);
  return filled;
}

import type { Request } from 'express';
import type { BcmsFunctionKeyAuth } from '../function/types';
import { BcmsHttpError } from '../http/errors';
import type { IdentifyPluginKey } from '../security/caller';
import { type AccessTokenVerifier, hasBearerToken } from '../security/jwt';
import { type JWT, JWTPermissionName, JWTRoleName, tokenAllows, type JWTPreRequestHandlerResult } from '../security/token';
import { compileBodyCheck, type BodyCheckResult, type BodySchema } from '../schema/body';
import type { Guard } from './types';

/**
 * The role check of a guard made by `createJwtProtectionPreRequestHandler`, for a token already
 * verified: the plugin server uses it to answer a token it verified before without a promise.
 */
export const JWT_GUARD_CHECK = Symbol('bcms-extensions.jwtGuardCheck');

export type JwtGuardCheck = (accessToken: JWT) => JWTPreRequestHandlerResult;

/**
 * On a pre-request handler that decides on the bearer token before it looks at the body (the
 * package's guards that check a body, the SDK's writes): the check of the verified token, which
 * the plugin server runs before it reads a byte of the body, so that a request without a good
 * token is refused unread. `bearerOnly`: so only when the request carries a bearer token (a guard
 * that also takes signatures needs the body's bytes for their digest otherwise).
 */
export const TOKEN_FIRST = Symbol('bcms-extensions.tokenFirst');

export interface TokenFirst {
  check: JwtGuardCheck;
  bearerOnly: boolean;
}

/** Marks `handler` as deciding on the bearer token first (`TOKEN_FIRST`), with the check of the verified token. */
export function decidesOnTokenFirst<H extends object>(handler: H, check: JwtGuardCheck, bearerOnly = false): H {
  return Object.defineProperty(handler, TOKEN_FIRST, { value: Object.freeze({ check, bearerOnly } satisfies TokenFirst) });
}

/** The token check a pre-request handler runs before the body: the bare JWT guard's own, or a `TOKEN_FIRST` mark's. */
export function tokenFirstOf(handler: unknown): TokenFirst | undefined {
  if (typeof handler !== 'function') return undefined;
  const marked = (handler as { [TOKEN_FIRST]?: TokenFirst })[TOKEN_FIRST];
  if (marked !== undefined) return marked;
  const check = (handler as { [JWT_GUARD_CHECK]?: JwtGuardCheck })[JWT_GUARD_CHECK];
  return check === undefined ? undefined : { check, bearerOnly: false };
}

/** The role check of a guard made by `createJwtProtectionPreRequestHandler` (or `createJwtGuard`). */
export function jwtGuardCheckOf(guard: unknown): JwtGuardCheck {
  const check = (guard as { [JWT_GUARD_CHECK]?: JwtGuardCheck })[JWT_GUARD_CHECK];
  if (check === undefined) throw new TypeError('not a JWT guard of bcms-extensions');
  return check;
}

/** The roles and permission of a guard made by `createJwtGuard`, or undefined. */
export function jwtGuardRuleOf(guard: unknown): JwtGuardRule | undefined {
  return (guard as { [JWT_GUARD_RULE]?: JwtGuardRule } | undefined)?.[JWT_GUARD_RULE];
}

/**
 * The roles and permission of such a guard: an isolate tells the service, which then checks a
 * deployed method's token itself, as it does for its own, rather than in a round trip.
 */
export const JWT_GUARD_RULE = Symbol('bcms-extensions.jwtGuardRule');

export interface JwtGuardRule {
  roles: readonly JWTRoleName[];
  permission: JWTPermissionName;
}

/**
 * The router's verifier, left on a request whose pre-request handler is the author's own: a guard
 * that handler calls with a context it built itself (BCMS's `{ name, request, response, ... }`)
 * finds it there.
 */
export const REQUEST_VERIFIER = Symbol('bcms-extensions.requestVerifier');

/**
 * Beside it, for a guard that accepts API keys: the router's check of a signed request, and the
 * plugin of the route the request reached, which the key must list. On the request, not in the
 * context, so that a guard called with a context an author built finds them too.
 */
export const REQUEST_KEY_VERIFIER = Symbol('bcms-extensions.requestKeyVerifier');
export const REQUEST_PLUGIN = Symbol('bcms-extensions.requestPlugin');

/**
 * In an isolate, whether the request carried a bearer token: its `Authorization` header stays in
 * the service (lib/isolate/extension.ts), so a guard that takes a token or a signature reads this.
 */
export const REQUEST_BEARER = Symbol('bcms-extensions.requestBearer');

/** What the plugin server leaves on a request whose pre-request handler is not the bare JWT guard. */
export interface GuardedRequest {
  [REQUEST_VERIFIER]?: AccessTokenVerifier;
  [REQUEST_KEY_VERIFIER]?: IdentifyPluginKey;
  [REQUEST_PLUGIN]?: string;
  [REQUEST_BEARER]?: boolean;
}

/** Whether the request carried a bearer token: its header, or in an isolate what the service said of it. */
export function sentBearerToken(request: Request): boolean {
  const said = (request as GuardedRequest)[REQUEST_BEARER];
  return said ?? hasBearerToken(request);
}

const NO_ROUTER_CONTEXT = 'a guard was called with a context that holds no request of a bcms-extensions router: pass it the context your pre-request handler received';

const ROLE_NAMES = new Set<string>(Object.values(JWTRoleName));
const PERMISSION_NAMES = new Set<string>(Object.values(JWTPermissionName));

/** The context a guard is called with: the router's, or one an author's pre-request handler built. */
export interface GuardContext {
  request: Request;
  verifyAccessToken?: () => Promise<JWT>;
}

/**
 * Leaves the router's verifiers, and the plugin an API key must list, on a request whose
 * pre-request handler is not the bare JWT guard: a guard it calls with a context of its own finds
 * them there.
 */
export function markGuardedRequest(request: object, verifyAccessToken: AccessTokenVerifier, verifyPluginKey: IdentifyPluginKey, plugin: string): void {
  const guarded = request as GuardedRequest;
  guarded[REQUEST_VERIFIER] = verifyAccessToken;
  guarded[REQUEST_KEY_VERIFIER] = verifyPluginKey;
  guarded[REQUEST_PLUGIN] = plugin;
}

/**
 * A pre-request handler, then the handler with what it yielded spread into its context (an
 * object; anything else adds nothing): in the service's process and in an isolate alike.
 */
export function runGuarded(preRequestHandler: (context: never) => unknown, handler: (context: never) => unknown, context: object, verifyAccessToken: () => Promise<JWT>): Promise<unknown> {
  return Promise.resolve(preRequestHandler({ ...context, verifyAccessToken } as never)).then((yielded: unknown) =>
    handler((yielded !== null && typeof yielded === 'object' ? { ...context, ...yielded } : context) as never),
  );
}

/** Verifies the context's bearer token with the router's `jwt` options. */
export function verifyFromContext(context: GuardContext): Promise<JWT> {
  if (typeof context?.verifyAccessToken === 'function') return context.verifyAccessToken();
  const verifier = (context?.request as GuardedRequest | undefined)?.[REQUEST_VERIFIER];
  if (verifier === undefined) return Promise.reject(new TypeError(NO_ROUTER_CONTEXT));
  return verifier(context.request);
}

/**
 * Checks the context's API-key signature (HTTP Signature, or the BCMS client's query string) for
 * the plugin of the route the request reached: the key in BCMS's shape, or `undefined` when the
 * request is not signed.
 */
export function verifyKeyFromContext(context: GuardContext): Promise<BcmsFunctionKeyAuth | undefined> {
  const request = context?.request as (Request & GuardedRequest) | undefined;
  const verify = request?.[REQUEST_KEY_VERIFIER];
  const plugin = request?.[REQUEST_PLUGIN];
  if (verify === undefined || plugin === undefined) return Promise.reject(new TypeError(NO_ROUTER_CONTEXT));
  return verify(request as Request, plugin);
}

/** Checks a guard's role names and permission where the guard is made: a typo fails at start, not at the first request. */
export function checkGuardArguments(where: string, roleNames: unknown, permissionName: unknown): readonly JWTRoleName[] {
  if (!Array.isArray(roleNames) || roleNames.length === 0) {
    throw new TypeError(`${where}: roleNames must be a non-empty array of JWTRoleName`);
  }
  for (const role of roleNames) {
    if (!ROLE_NAMES.has(role)) throw new TypeError(`${where}: unknown role name ${JSON.stringify(role)}`);
  }
  if (!PERMISSION_NAMES.has(permissionName as string)) {
    throw new TypeError(`${where}: unknown permission name ${JSON.stringify(permissionName)}`);
  }
  return Object.freeze([...(roleNames as JWTRoleName[])]);
}

/** A guard: the token verified, then its roles checked; with the check attached for the fast path. */
export function createJwtGuard<Props>(where: string, roleNames: JWTRoleName[], permissionName: JWTPermissionName): Guard<JWTPreRequestHandlerResult<Props>> {
  const roles = checkGuardArguments(where, roleNames, permissionName);
  const check: JwtGuardCheck = (accessToken) => {
    if (!tokenAllows(accessToken.payload, roles, permissionName)) throw new BcmsHttpError('TOKEN_FORBIDDEN');
    return { accessToken };
  };
  const guard = (async (context: GuardContext) => check(await verifyFromContext(context))) as Guard<JWTPreRequestHandlerResult<Props>>;
  // Not enumerable: a guard of the author's own made with Object.assign(…, guard) must not inherit them.
  Object.defineProperty(guard, JWT_GUARD_RULE, { value: Object.freeze({ roles, permission: permissionName }) satisfies JwtGuardRule });
  return Object.defineProperty(guard, JWT_GUARD_CHECK, { value: check });
}

/**
 * The JWT guard of BCMS: the request must carry `Authorization: Bearer <token>`, verified with the
 * router's `jwt` options, and some role of the token must be listed and hold `permission`.
 * The handler then receives the verified token as `accessToken`; `Props` types its
 * `payload.props` (BCMS writes `<BCMSUserCustomPool>`).
 *
 * @example
 * createControllerMethod({
 *   path: '/me',
 *   type: 'get',
 *   preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
 *   handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }),
 * });
 */
export function createJwtProtectionPreRequestHandler<Props = unknown>(roleNames: JWTRoleName[], permissionName: JWTPermissionName): Guard<JWTPreRequestHandlerResult<Props>> {
  return createJwtGuard<Props>('createJwtProtectionPreRequestHandler', roleNames, permissionName);
}

/**
 * What a guard says of itself beyond the JWT guard's own mark (`JWT_GUARD_RULE`): its rule when it
 * wraps that guard, the body schema it checks, and whether an API key's signature passes it, for
 * the OpenAPI document (lib/openapi). Set by the guard factories that know.
 */
export interface GuardDoc {
  /** The JWT rule, for a guard that wraps the JWT guard (and so does not carry `JWT_GUARD_RULE` itself). */
  rule?: JwtGuardRule;
  body?: BodySchema;
  keys?: boolean;
}

export const GUARD_DOC = Symbol('bcms-extensions.guardDoc');

/** Marks a guard with what it checks, for the document. Not enumerable: a copy of the guard does not inherit it. */
export function documentGuard<H extends object>(handler: H, doc: GuardDoc): H {
  return Object.defineProperty(handler, GUARD_DOC, { value: Object.freeze({ ...doc }) });
}

/**
 * The JWT guard, then the body checked against `bodySchema` (BCMS's ObjectSchema or a Standard
 * Schema): yields `{ accessToken, body }`, the body as the schema gives it; one that does not fit
 * is answered 400 `{ "message" }` naming the first field. The token is decided before the body is
 * read, and the guard says what it checks to the OpenAPI document. A schema that cannot be checked
 * throws here, naming `where`.
 */
export function createJwtAndBodyGuard<Props, Body = unknown>(
  where: string,
  roleNames: JWTRoleName[],
  permissionName: JWTPermissionName,
  bodySchema: BodySchema,
): Guard<{ accessToken: JWT<Props>; body: Body }> {
  const guard = createJwtGuard<Props>(where, roleNames, permissionName);
  let checkBody: (body: unknown) => BodyCheckResult | Promise<BodyCheckResult>;
  try {
    checkBody = compileBodyCheck(bodySchema);
  } catch (error) {
    throw new TypeError(`${where}: bodySchema: ${(error as Error).message}`);
  }
  const checked = decidesOnTokenFirst(async (context: GuardContext) => {
    const { accessToken } = await guard(context as never);
    const result = await checkBody(context.request.body);
    if (!result.ok) throw new BcmsHttpError('HANDLER_ERROR', result.message, undefined, 400);
    return { accessToken, body: result.value as Body };
  }, jwtGuardCheckOf(guard));
  return documentGuard(checked, { rule: jwtGuardRuleOf(guard), body: bodySchema }) as Guard<{ accessToken: JWT<Props>; body: Body }>;
}

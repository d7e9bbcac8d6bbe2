/**
 * The `auth` option: the app's own users. `identifyUser` is the one answer to "who is this
 * request's user" that every guard, the SDK's routes, private functions, the OpenAPI document and
 * the event streams ask: the app's user (`auth.fromRequest`) first, then a BCMS JWT.
 */
import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import { checkKeys } from '../option-keys';
import type { AccessTokenVerifier } from './jwt';
import { type JWT, JWTPermissionName, type JWTRole, JWTRoleName } from './token';

/**
 * Who the app says the request's user is, in BCMS's shape: `userId`, and roles named as BCMS
 * names them (`JWTRoleName`) with BCMS's permissions (`JWTPermissionName`). `props` is what a
 * handler reads as `accessToken.payload.props` (the SDK's user route shows its `username`, `email`
 * and `personal`).
 */
export interface AppUser<Props = unknown> {
  userId: string | number;
  /** BCMS's roles; a permission as BCMS writes it (`{ name: 'READ' }`) or as its name alone (`'READ'`). */
  roles: readonly { name: JWTRoleName | `${JWTRoleName}`; permissions: readonly (JWTRole['permissions'][number] | JWTPermissionName | `${JWTPermissionName}`)[] }[];
  props?: Props;
}

/** The `auth` option of the router (docs/options.md). */
export interface AuthOptions {
  /**
   * The app's signed-in user for a request (its session, the `req.user` its own middleware set,
   * its own JWT's claims), or null when the request names none: then a BCMS JWT is tried.
   *
   * @example
   * auth: { fromRequest: (req) => (req.user ? { userId: req.user.id, roles: [{ name: JWTRoleName.ADMIN, permissions: [{ name: JWTPermissionName.READ }] }] } : null) }
   */
  fromRequest?: (req: Request) => AppUser | null | undefined | Promise<AppUser | null | undefined>;
  /** Where the admin shell's sign-in form posts `{ email, password }` (the older name: `admin.loginUrl`). Default `/api/auth/login`. */
  signInPath?: string;
  /** The field of the sign-in answer that holds the token (a dotted path reads a nested one: `data.token`). Default `accessToken`. */
  tokenField?: string;
}

export interface ResolvedAuth {
  readonly fromRequest: AuthOptions['fromRequest'];
  readonly signInPath: string;
  readonly tokenField: string;
}

const DEFAULT_SIGN_IN_PATH = '/api/auth/login';
const DEFAULT_TOKEN_FIELD = 'accessToken';

/** Checks the `auth` option, with `admin.loginUrl`, the older name of `auth.signInPath`. */
export function resolveAuth(auth: unknown, loginUrl: unknown): ResolvedAuth {
  const given = (auth ?? {}) as AuthOptions;
  if (given === null || typeof given !== 'object' || Array.isArray(given)) throw new TypeError('option auth must be an object { fromRequest?, signInPath?, tokenField? }');
  checkKeys(given, 'auth', ['fromRequest', 'signInPath', 'tokenField']);
  const { fromRequest, signInPath, tokenField = DEFAULT_TOKEN_FIELD } = given;
  if (fromRequest !== undefined && typeof fromRequest !== 'function') {
    throw new TypeError('option auth.fromRequest must be a function (req) => { userId, roles } | null (or a promise of it)');
  }
  if (signInPath !== undefined && (typeof signInPath !== 'string' || signInPath === '')) {
    throw new TypeError(`option auth.signInPath must be the app's sign-in route (a path or a URL), got ${JSON.stringify(signInPath)}`);
  }
  if (signInPath !== undefined && loginUrl !== undefined && loginUrl !== signInPath) {
    throw new TypeError(`option admin.loginUrl is the older name of auth.signInPath: give one (they differ: ${JSON.stringify(loginUrl)} and ${JSON.stringify(signInPath)})`);
  }
  if (typeof tokenField !== 'string' || !/^[^.\s]+(\.[^.\s]+)*$/.test(tokenField)) {
    throw new TypeError(`option auth.tokenField must name the field of the sign-in answer that holds the token (such as "accessToken", or "data.token"), got ${JSON.stringify(tokenField)}`);
  }
  // admin.loginUrl is checked with the admin option; here it only stands in for signInPath.
  const path = signInPath ?? (typeof loginUrl === 'string' ? loginUrl : DEFAULT_SIGN_IN_PATH);
  return Object.freeze({ fromRequest, signInPath: path, tokenField });
}

/** Who a request's user is: `AccessTokenVerifier`'s contract, and the app's user alone for the callers that weigh it beside a signature. */
export interface UserIdentifier extends AccessTokenVerifier {
  /** With `auth.fromRequest`: the app's user for this request as a token, or null. Asked once per request. */
  appUser?(request: IncomingMessage): Promise<JWT | null>;
}

/**
 * "Who is this request's user": the app's user (`auth.fromRequest`), asked once per request; when
 * it names none, the bearer token, verified by `verifyJwt`. What `fromRequest` throws, or a value
 * that is not a user, rejects with an Error naming the option: a 500 whose cause is in the log.
 */
export function createUserIdentifier(verifyJwt: AccessTokenVerifier, fromRequest: AuthOptions['fromRequest']): UserIdentifier {
  if (fromRequest === undefined) return verifyJwt;
  const asked = new WeakMap<object, Promise<JWT | null>>();
  // What a request's ask settled to, for `known`: a guard's fast path then needs no promise.
  const settled = new WeakMap<object, JWT | null>();
  const appUser = (request: IncomingMessage): Promise<JWT | null> => {
    let answer = asked.get(request);
    if (answer === undefined) {
      answer = new Promise<unknown>((resolve) => resolve(fromRequest(request as Request))).then(
        (value) => {
          const token = appUserToken(value);
          settled.set(request, token);
          return token;
        },
        (error: unknown) => {
          throw new Error(`option auth.fromRequest threw: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
        },
      );
      asked.set(request, answer);
    }
    return answer;
  };
  const identify = (request: IncomingMessage): Promise<JWT> => appUser(request).then((token) => token ?? verifyJwt(request));
  const known = (request: IncomingMessage): JWT | undefined => {
    if (!settled.has(request)) return undefined; // fromRequest first: not asked yet
    return settled.get(request) ?? verifyJwt.known?.(request);
  };
  return Object.assign(identify, { known, appUser });
}

/** How long an app user's token says it is good for: an event stream asks the app again after it. */
export const APP_USER_SECONDS = 300;

const ROLE_NAMES = new Set<string>(Object.values(JWTRoleName));
const PERMISSION_NAMES = new Set<string>(Object.values(JWTPermissionName));
const SHAPE = "{ userId, roles: [{ name, permissions: [{ name }] or ['READ', ...] }], props? } or null";

/**
 * The app's user as the token a handler gets (`accessToken`): the payload BCMS's guards read
 * (`userId`, `rls`), unsigned (`alg: 'none'`, `typ: 'auth.fromRequest'`, no signature): it was never a
 * token, and no one can send it as one. Null and undefined: no user.
 */
export function appUserToken(value: unknown): JWT | null {
  if (value === null || value === undefined) return null;
  const wrong = (what: string): Error => new Error(`option auth.fromRequest returned ${what}: it must return ${SHAPE}, with BCMS's role and permission names`);
  if (typeof value !== 'object' || Array.isArray(value)) throw wrong(describe(value));
  const { userId, roles, props } = value as Partial<AppUser>;
  if (!((typeof userId === 'string' && userId !== '') || (typeof userId === 'number' && Number.isFinite(userId)))) throw wrong(`a user whose userId is ${describe(userId)}`);
  if (!Array.isArray(roles)) throw wrong(`a user whose roles are ${describe(roles)}`);
  const rls = roles.map((role: unknown, index): JWTRole => {
    const { name, permissions } = (role ?? {}) as { name?: unknown; permissions?: unknown };
    if (typeof name !== 'string' || !ROLE_NAMES.has(name)) throw wrong(`roles[${index}].name ${describe(name)} (role names: ${[...ROLE_NAMES].join(', ')})`);
    if (!Array.isArray(permissions)) throw wrong(`roles[${index}].permissions ${describe(permissions)}`);
    return {
      name: name as JWTRoleName,
      permissions: permissions.map((permission: unknown, at) => {
        // BCMS's shape, or the name alone, as an app's own role table would have it.
        const granted = typeof permission === 'string' ? permission : (permission as { name?: unknown } | null)?.name;
        if (typeof granted !== 'string' || !PERMISSION_NAMES.has(granted)) {
          throw wrong(`roles[${index}].permissions[${at}] ${describe(permission)} (permissions are { name } or names, of ${[...PERMISSION_NAMES].join(', ')})`);
        }
        return { name: granted as JWTPermissionName };
      }),
    };
  });
  if (props !== undefined && (props === null || typeof props !== 'object')) throw wrong(`a user whose props are ${describe(props)} (an object, or none)`);
  const iat = Math.floor(Date.now() / 1000);
  return {
    header: { alg: 'none', typ: 'auth.fromRequest' },
    payload: { userId: String(userId), rls, iat, exp: iat + APP_USER_SECONDS, ...(props === undefined ? {} : { props }) },
    signature: '',
  };
}

/** A value as the log line names it: its type, and a short JSON of it. */
function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

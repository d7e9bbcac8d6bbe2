import { BcmsHttpError } from '../http/errors';
import { type JWT, JWTPermissionName, JWTRoleName, tokenAllows, type JWTPreRequestHandlerResult } from '../security/token';
import type { PreRequestHandler } from './types';

/**
 * The role check of a guard made by `createJwtProtectionPreRequestHandler`, for a token already
 * verified: the plugin server uses it to answer a token it verified before without a promise.
 */
export const JWT_GUARD_CHECK = Symbol('bcms-extensions.jwtGuardCheck');

export type JwtGuardCheck = (accessToken: JWT) => JWTPreRequestHandlerResult;

const ROLE_NAMES = new Set<string>(Object.values(JWTRoleName));
const PERMISSION_NAMES = new Set<string>(Object.values(JWTPermissionName));

/**
 * The JWT guard of BCMS: the request must carry `Authorization: Bearer <token>`, verified with the
 * router's `jwt` options, and some role of the token must be listed and hold `permission`.
 * The handler then receives the verified token as `accessToken`.
 *
 * @example
 * createControllerMethod({
 *   path: '/me',
 *   type: 'get',
 *   preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
 *   handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }),
 * });
 */
// Not generic on purpose: a generic call written inline in `preRequestHandler` would take its type
// argument from the method's (not yet inferred) context and hide `accessToken` from the handler.
export function createJwtProtectionPreRequestHandler(
  roleNames: JWTRoleName[],
  permissionName: JWTPermissionName,
): PreRequestHandler<JWTPreRequestHandlerResult> {
  if (!Array.isArray(roleNames) || roleNames.length === 0) {
    throw new TypeError('createJwtProtectionPreRequestHandler: roleNames must be a non-empty array of JWTRoleName');
  }
  for (const role of roleNames) {
    if (!ROLE_NAMES.has(role)) {
      throw new TypeError(`createJwtProtectionPreRequestHandler: unknown role name ${JSON.stringify(role)}`);
    }
  }
  if (!PERMISSION_NAMES.has(permissionName)) {
    throw new TypeError(`createJwtProtectionPreRequestHandler: unknown permission name ${JSON.stringify(permissionName)}`);
  }
  const roles = Object.freeze([...roleNames]);
  const check: JwtGuardCheck = (accessToken) => {
    if (!tokenAllows(accessToken.payload, roles, permissionName)) throw new BcmsHttpError('TOKEN_FORBIDDEN');
    return { accessToken };
  };
  const guard: PreRequestHandler<JWTPreRequestHandlerResult> = async ({ verifyAccessToken }) => check(await verifyAccessToken());
  // Not enumerable: a guard of the author's own made with Object.assign(…, guard) must not inherit it.
  return Object.defineProperty(guard, JWT_GUARD_CHECK, { value: check });
}

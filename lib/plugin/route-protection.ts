import type { StandardSchemaV1 } from '@standard-schema/spec';
import { BcmsHttpError } from '../http/errors';
import { compileBodyCheck, type BodyCheckResult } from '../schema/body';
import type { ObjectSchema } from '../schema/object-schema';
import { hasBearerToken } from '../security/jwt';
import type { JWT, JWTPermissionName, JWTRoleName } from '../security/token';
import { createJwtGuard, type GuardContext } from './guard';
import type { Guard } from './types';

/** What BCMS keeps in a token's `props` for its users (the host's tokens may hold other things). */
export interface BCMSUserCustomPool {
  personal?: { firstName?: string; lastName?: string; avatarUri?: string };
  address?: Record<string, unknown>;
  policy?: { media?: unknown; templates?: unknown[]; plugins?: unknown[] };
  [key: string]: unknown;
}

export interface BCMSRouteProtectionJwtResult {
  accessToken: JWT<BCMSUserCustomPool>;
}

export interface BCMSRouteProtectionJwtAndBodyCheckResult<Body> {
  accessToken: JWT<BCMSUserCustomPool>;
  body: Body;
}

export interface BCMSRouteProtectionJwtApiResult {
  token?: JWT<BCMSUserCustomPool>;
  key?: undefined;
}

interface JwtGuardConfig {
  roleNames: JWTRoleName[];
  permissionName: JWTPermissionName;
}

/**
 * BCMS's route guards (`@becomes/cms-backend`'s `BCMSRouteProtection`), on the router's `jwt`
 * options. Each may also be called from an author's own pre-request handler with its context.
 */
export class BCMSRouteProtection {
  /**
   * The request's bearer token, verified, with a listed role that holds the permission: yields
   * `{ accessToken }` (401 without a valid token, 403 without the permission).
   *
   * @example
   * preRequestHandler: BCMSRouteProtection.createJwtPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
   */
  static createJwtPreRequestHandler(roleNames: JWTRoleName[], permissionName: JWTPermissionName): Guard<BCMSRouteProtectionJwtResult> {
    return createJwtGuard<BCMSUserCustomPool>('BCMSRouteProtection.createJwtPreRequestHandler', roleNames, permissionName);
  }

  /**
   * The JWT guard, then the body checked against `bodySchema`: BCMS's `ObjectSchema` (the body's
   * type is the type argument, as BCMS writes it) or a Standard Schema validator such as zod (the
   * body's type is inferred from it). Yields `{ accessToken, body }`; a body that does not fit is
   * answered 400 `{ "message" }` naming the first field that fails.
   *
   * @example
   * preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({
   *   roleNames: [JWTRoleName.ADMIN],
   *   permissionName: JWTPermissionName.WRITE,
   *   bodySchema: z.object({ description: z.string() }),
   * }),
   */
  static createJwtAndBodyCheckPreRequestHandler<Schema extends StandardSchemaV1>(
    config: JwtGuardConfig & { bodySchema: Schema },
  ): Guard<BCMSRouteProtectionJwtAndBodyCheckResult<StandardSchemaV1.InferOutput<Schema>>>;
  // An ObjectSchema says nothing TypeScript can read: `body` is BCMS's type argument
  // (`createControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<Body>, ...>`), `any` without one.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  static createJwtAndBodyCheckPreRequestHandler<Body = any>(
    config: JwtGuardConfig & { bodySchema: ObjectSchema },
  ): Guard<BCMSRouteProtectionJwtAndBodyCheckResult<Body>>;
  static createJwtAndBodyCheckPreRequestHandler(
    config: JwtGuardConfig & { bodySchema: ObjectSchema | StandardSchemaV1 },
  ): Guard<BCMSRouteProtectionJwtAndBodyCheckResult<unknown>> {
    const where = 'BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler';
    if (config === null || typeof config !== 'object') throw new TypeError(`${where}: argument config must be { roleNames, permissionName, bodySchema }`);
    const guard = createJwtGuard<BCMSUserCustomPool>(where, config.roleNames, config.permissionName);
    let checkBody: (body: unknown) => BodyCheckResult | Promise<BodyCheckResult>;
    try {
      checkBody = compileBodyCheck(config.bodySchema);
    } catch (error) {
      throw new TypeError(`${where}: bodySchema: ${(error as Error).message}`);
    }
    return async (context) => {
      const { accessToken } = await guard(context);
      const result = await checkBody(context.request.body);
      if (!result.ok) throw new BcmsHttpError('HANDLER_ERROR', result.message, undefined, 400);
      return { accessToken, body: result.value };
    };
  }

  /**
   * BCMS's guard for routes that a token or an API key may call: yields `{ token }` for a bearer
   * token (checked as `createJwtPreRequestHandler` checks it). API-key signatures are not accepted
   * on plugin routes yet: a request without a bearer token is answered 401.
   */
  static createJwtApiPreRequestHandler(config: JwtGuardConfig): Guard<BCMSRouteProtectionJwtApiResult> {
    const where = 'BCMSRouteProtection.createJwtApiPreRequestHandler';
    if (config === null || typeof config !== 'object') throw new TypeError(`${where}: argument config must be { roleNames, permissionName }`);
    const guard = createJwtGuard<BCMSUserCustomPool>(where, config.roleNames, config.permissionName);
    return async (context: GuardContext) => {
      if (!hasBearerToken(context.request)) throw new BcmsHttpError('TOKEN_MISSING', undefined, { 'WWW-Authenticate': 'Bearer' });
      const { accessToken } = await guard(context as never);
      return { token: accessToken };
    };
  }
}

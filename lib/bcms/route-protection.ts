import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { BcmsFunctionKeyAuth } from '../function/types';
import { BcmsHttpError } from '../http/errors';
import type { ObjectSchema } from '../schema/object-schema';
import { BCMS_CLIENT_CHALLENGE } from './client/signature';
import { SIGNATURE_CHALLENGE } from '../security/signature';
import type { JWT, JWTPermissionName, JWTRoleName } from '../security/token';
import { createJwtAndBodyGuard, createJwtGuard, decidesOnTokenFirst, documentGuard, type GuardContext, jwtGuardCheckOf, jwtGuardRuleOf, sentBearerToken, verifyKeyFromContext } from '../plugin/guard';
import type { Guard, SentBody } from '../plugin/types';

/** What BCMS keeps in a token's `props` for its users (the host's tokens may hold other things). */
export interface BCMSUserCustomPool {
  personal?: { firstName?: string; lastName?: string; avatarUri?: string };
  address?: Record<string, unknown>;
  policy?: { media?: unknown; templates?: unknown[]; plugins?: unknown[] };
  [key: string]: unknown;
}

/** What `BCMSRouteProtection.createJwtPreRequestHandler` gives a handler: the verified access token. */
export interface BCMSRouteProtectionJwtResult {
  accessToken: JWT<BCMSUserCustomPool>;
}

/** What `BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler` gives a handler: the verified access token and the checked body. */
export interface BCMSRouteProtectionJwtAndBodyCheckResult<Body> {
  accessToken: JWT<BCMSUserCustomPool>;
  body: Body;
}

/**
 * What `createJwtApiPreRequestHandler` yields: the bearer token, or the API key whose signature
 * was accepted, as BCMS shapes it (`_id`, `name`, `blocked`, `access`; never its secret).
 */
export type BCMSRouteProtectionJwtApiResult = { token: JWT<BCMSUserCustomPool>; key?: undefined } | { token?: undefined; key: BcmsFunctionKeyAuth };

/** A route that takes a token or either signature says so when it gets none (RFC 9110 §11.6.1: one challenge per scheme). */
const JWT_API_CHALLENGE = Object.freeze({
  'WWW-Authenticate': `Bearer, ${SIGNATURE_CHALLENGE['WWW-Authenticate']}, ${BCMS_CLIENT_CHALLENGE['WWW-Authenticate']}`,
});

interface JwtGuardConfig {
  roleNames: JWTRoleName[];
  permissionName: JWTPermissionName;
}

/**
 * BCMS's route guards (`@becomes/cms-backend`'s `BCMSRouteProtection`), on the router's `jwt`
 * options. Each may also be called from an author's own pre-request handler with its context.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: BCMS's own BCMSRouteProtection is a class of static guards; ported code calls it so
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
  ): Guard<BCMSRouteProtectionJwtAndBodyCheckResult<StandardSchemaV1.InferOutput<Schema>> & SentBody<StandardSchemaV1.InferInput<Schema>>>;
  // An ObjectSchema says nothing TypeScript can read: `body` is BCMS's type argument
  // (`createControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<Body>, ...>`), `any` without one.
  // biome-ignore lint/suspicious/noExplicitAny: BCMS's default: the body is untyped without a type argument
  static createJwtAndBodyCheckPreRequestHandler<Body = any>(config: JwtGuardConfig & { bodySchema: ObjectSchema }): Guard<BCMSRouteProtectionJwtAndBodyCheckResult<Body>>;
  static createJwtAndBodyCheckPreRequestHandler(config: JwtGuardConfig & { bodySchema: ObjectSchema | StandardSchemaV1 }): Guard<BCMSRouteProtectionJwtAndBodyCheckResult<unknown>> {
    const where = 'BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler';
    if (config === null || typeof config !== 'object') throw new TypeError(`${where}: argument config must be { roleNames, permissionName, bodySchema }`);
    // The token first, before the body is read: a request without a good one is refused unread.
    return createJwtAndBodyGuard<BCMSUserCustomPool>(where, config.roleNames, config.permissionName, config.bodySchema) as Guard<BCMSRouteProtectionJwtAndBodyCheckResult<unknown>>;
  }

  /**
   * BCMS's guard for routes that a token or an API key may call. A bearer token yields `{ token }`
   * (checked as `createJwtPreRequestHandler` checks it). Otherwise an API-key signature, as a
   * function call accepts it, yields `{ key }`: an HTTP Signature (`Authorization: Signature`, its
   * digest checked against the body's bytes), or the BCMS client's query-string signature
   * (`?key&nonce&timestamp&signature`, keys created with `bcmsClient: true`); the key must list
   * this route's plugin (`plugins: [...]`), else 403 `KEY_FORBIDDEN`, and each signature is
   * accepted once, on every instance. Otherwise the app's user (`auth.fromRequest`) yields
   * `{ token }`. None: 401 ``Token is `undefined`.``, as BCMS answers it.
   *
   * @example
   * createControllerMethod({
   *   type: 'get',
   *   preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }),
   *   handler: async ({ token, key }) => ({ by: token?.payload.userId ?? key?.name }),
   * });
   */
  static createJwtApiPreRequestHandler(config: JwtGuardConfig): Guard<BCMSRouteProtectionJwtApiResult> {
    const where = 'BCMSRouteProtection.createJwtApiPreRequestHandler';
    if (config === null || typeof config !== 'object') throw new TypeError(`${where}: argument config must be { roleNames, permissionName }`);
    const guard = createJwtGuard<BCMSUserCustomPool>(where, config.roleNames, config.permissionName);
    // With a bearer token, decided before the body is read; a signature's digest needs the bytes first.
    const either = decidesOnTokenFirst(
      async (context: GuardContext): Promise<BCMSRouteProtectionJwtApiResult> => {
        // A token first, as a private function takes it: the Authorization header holds one scheme,
        // and a query that merely has a `signature` parameter never overrides a token sent.
        if (sentBearerToken(context.request)) {
          const { accessToken } = await guard(context as never);
          return { token: accessToken };
        }
        const key = await verifyKeyFromContext(context);
        if (key !== undefined) return { key };
        // Neither: the app's own user (auth.fromRequest: a session, req.user), through the JWT guard's verifier.
        try {
          const { accessToken } = await guard(context as never);
          return { token: accessToken };
        } catch (error) {
          if (error instanceof BcmsHttpError && error.code === 'TOKEN_MISSING') throw new BcmsHttpError('TOKEN_MISSING', undefined, { ...JWT_API_CHALLENGE });
          throw error;
        }
      },
      jwtGuardCheckOf(guard),
      true,
    );
    return documentGuard(either, { rule: jwtGuardRuleOf(guard), keys: true });
  }
}

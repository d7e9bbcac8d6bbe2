import { expectTypeOf } from 'expect-type';
import { BCMSRouteProtection, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName, type JWTPreRequestHandlerResult, type BCMSRouteProtectionJwtAndBodyCheckResult, type ObjectSchema } from '../../lib';
import { z } from 'zod';
interface P { policy: string }
test('x', () => {
  createControllerMethod({ type: 'get', preRequestHandler: BCMSRouteProtection.createJwtPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ), handler: async ({ accessToken }) => { expectTypeOf(accessToken.payload.props.policy).toEqualTypeOf<unknown>(); return { a: 1 }; } });
  const S: ObjectSchema = { d: { __type: 'string', __required: true } };
  createControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<{ d: string }>, { a: number }>({ type: 'post', preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.WRITE, bodySchema: S }), handler: async ({ body }) => { expectTypeOf(body.d).toBeString(); return { a: 1 }; } });
  const zg = BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.WRITE, bodySchema: z.object({ d: z.string(), n: z.number().optional() }) });
  createControllerMethod({ type: 'post', preRequestHandler: zg, handler: async ({ body }) => { expectTypeOf(body).toEqualTypeOf<{ d: string; n?: number | undefined }>(); return { a: 1 }; } });
  void ({} as JWTPreRequestHandlerResult);
});

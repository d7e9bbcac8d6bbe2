/**
 * Type-level tests of BCMS's forms (`npm run typecheck` fails when they break): the body's type
 * from a zod schema and from BCMS's type argument, the token's props, `request.params`.
 */
import { expectTypeOf } from 'expect-type';
import { z } from 'zod';
import * as v from 'valibot';
import {
  BCMSRouteProtection,
  createController,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
  type BCMSRouteProtectionJwtAndBodyCheckResult,
  type BCMSRouteProtectionJwtApiResult,
  type BCMSRouteProtectionJwtResult,
  type BCMSUserCustomPool,
  type BcmsControllerMethod,
  type MethodRoute,
  type ObjectSchema,
} from '../../lib';

const roles = { roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.WRITE };

describe("BCMS's forms, typed", () => {
  test('a zod schema types the body with its output', () => {
    const guard = BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({
      ...roles,
      bodySchema: z.object({ title: z.string(), tags: z.array(z.string()).default([]), count: z.number().optional() }),
    });
    const method = createControllerMethod({
      type: 'post',
      preRequestHandler: guard,
      handler: async ({ body, accessToken }) => {
        expectTypeOf(body).toEqualTypeOf<{ title: string; tags: string[]; count?: number | undefined }>();
        expectTypeOf(accessToken.payload.props).toEqualTypeOf<BCMSUserCustomPool | undefined>();
        return { title: body.title };
      },
    });
    expectTypeOf(method).toEqualTypeOf<
      BcmsControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<{ title: string; tags: string[]; count?: number | undefined }>, { title: string }> & {
        readonly '~route'?: MethodRoute<'', 'post', { title: string }>;
      }
    >();
  });

  test('written inline, next to a handler that destructures its context, as BCMS code writes guards', () => {
    createControllerMethod({
      type: 'post',
      preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ ...roles, bodySchema: z.object({ title: z.string() }) }),
      handler: async ({ body, accessToken }) => {
        expectTypeOf(body).toEqualTypeOf<{ title: string }>();
        return { by: accessToken.payload.userId };
      },
    });
  });

  test("createJwtProtectionPreRequestHandler<Props> types the token's props; without a type argument they are unknown", () => {
    createControllerMethod({
      type: 'get',
      preRequestHandler: createJwtProtectionPreRequestHandler<BCMSUserCustomPool>([JWTRoleName.ADMIN], JWTPermissionName.READ),
      handler: async ({ accessToken }) => {
        expectTypeOf(accessToken.payload.props).toEqualTypeOf<BCMSUserCustomPool | undefined>();
        return {};
      },
    });
    createControllerMethod({
      type: 'get',
      preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
      handler: async ({ accessToken }) => {
        expectTypeOf(accessToken.payload.props).toEqualTypeOf<unknown>();
        return {};
      },
    });
  });

  test('an ObjectSchema without type arguments gives an untyped body', () => {
    const Schema: ObjectSchema = { title: { __type: 'string', __required: true } };
    createControllerMethod({
      type: 'post',
      preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ ...roles, bodySchema: Schema }),
      handler: async ({ body }) => {
        expectTypeOf(body).toBeAny();
        return {};
      },
    });
  });

  test('a valibot schema too', () => {
    const guard = BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ ...roles, bodySchema: v.object({ done: v.boolean() }) });
    createControllerMethod({
      type: 'put',
      preRequestHandler: guard,
      handler: async ({ body }) => {
        expectTypeOf(body).toEqualTypeOf<{ done: boolean }>();
        return {};
      },
    });
  });

  test("BCMS's generic form: the body is the type argument of the result", () => {
    interface CreateBody {
      description: string;
    }
    const CreateBodySchema: ObjectSchema = { description: { __type: 'string', __required: true } };
    createControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<CreateBody>, { item: string }>({
      type: 'post',
      preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ ...roles, bodySchema: CreateBodySchema }),
      async handler({ body, name }) {
        expectTypeOf(body).toEqualTypeOf<CreateBody>();
        expectTypeOf(name).toBeString();
        return { item: body.description };
      },
    });
    createControllerMethod<BCMSRouteProtectionJwtResult, { id: string }>({
      path: '/:id',
      type: 'delete',
      preRequestHandler: BCMSRouteProtection.createJwtPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.DELETE),
      async handler({ request, accessToken }) {
        // Strings only (Express 5's own type also allows string[]); `| undefined` is this repository's noUncheckedIndexedAccess.
        expectTypeOf(request.params).toEqualTypeOf<Record<string, string>>();
        expectTypeOf(accessToken.payload.userId).toBeString();
        return { id: request.params.id ?? '' };
      },
    });
  });

  test('createJwtApiPreRequestHandler: the token or the key, one of them; the key in BCMS\'s shape', () => {
    createControllerMethod({
      type: 'get',
      preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }),
      async handler(context) {
        expectTypeOf(context).toMatchTypeOf<BCMSRouteProtectionJwtApiResult>();
        if (context.key !== undefined) {
          expectTypeOf(context.token).toEqualTypeOf<undefined>();
          expectTypeOf(context.key.access.plugins).toEqualTypeOf<{ name: string }[]>();
          expectTypeOf(context.key._id).toBeString();
          return { by: context.key.name };
        }
        expectTypeOf(context.token.payload.props).toEqualTypeOf<BCMSUserCustomPool | undefined>();
        return { by: context.token.payload.userId };
      },
    });
  });

  test("setup's result is methods()'s argument", () => {
    createController({
      name: 'Shelf',
      path: 'shelf',
      setup: async () => ({ count: 3 }),
      methods({ count }) {
        expectTypeOf(count).toBeNumber();
        return {};
      },
    });
  });
});

/**
 * Type-level tests of BCMS's forms (`npm run typecheck` fails when they break): the body's type
 * from a zod schema and from BCMS's type argument, the token's props, `request.params`.
 */
import { expectTypeOf } from 'expect-type';
import { z } from 'zod';
import * as v from 'valibot';
import {
  BCMSRouteProtection,
  createBcmsPlugin,
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
  type SentBody,
  type ObjectSchema,
} from '../../lib';
import type { createClient } from '../../lib/client';

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
    // The guard also says what a caller sends (the schema's input: tags has a default), for the typed client's route.
    type Sent = { title: string; tags?: string[] | undefined; count?: number | undefined };
    expectTypeOf(method).toEqualTypeOf<
      BcmsControllerMethod<BCMSRouteProtectionJwtAndBodyCheckResult<{ title: string; tags: string[]; count?: number | undefined }> & SentBody<Sent>, { title: string }> & {
        readonly '~route'?: MethodRoute<'', 'post', { title: string }, { title: string; tags?: string[]; count?: number }>;
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

  test("createJwtApiPreRequestHandler: the token or the key, one of them; the key in BCMS's shape", () => {
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

// The typed client, for a route whose body BCMS's guard checks with a zod schema: a caller sends the
// schema's input (a field with a default may be left out); a body that does not fit does not compile.
const notes = createBcmsPlugin({
  name: 'notes',
  controllers: [
    createController({
      name: 'Note',
      path: '/note',
      methods: () => ({
        add: createControllerMethod({
          type: 'post',
          preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ ...roles, bodySchema: z.object({ text: z.string(), tags: z.array(z.string()).default([]) }) }),
          handler: async ({ body }) => ({ text: body.text, tags: body.tags }),
        }),
      }),
    }),
  ],
});
function typedNotes(client: ReturnType<typeof createClient<{ plugins: [typeof notes] }>>): void {
  expectTypeOf(client.plugin.post('/api/plugin/notes/note', { body: { text: 'a' } })).resolves.toEqualTypeOf<{ text: string; tags: string[] }>();
  void client.plugin.post('/api/plugin/notes/note', { body: { text: 'a', tags: ['x'] } });
  // @ts-expect-error: text is required
  void client.plugin.post('/api/plugin/notes/note', { body: { tags: [] } });
  // @ts-expect-error: the body is required
  void client.plugin.post('/api/plugin/notes/note');
}
// Named, not called: the type-checker reads it all the same.
void typedNotes;

// BCMS's type-argument form keeps compiling with a response schema beside it (ours); its route stays unknown to the types.
createControllerMethod<BCMSRouteProtectionJwtResult, { n: number }>({
  path: '/n',
  type: 'get',
  preRequestHandler: BCMSRouteProtection.createJwtPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
  responseSchema: z.object({ n: z.number() }),
  handler: async () => ({ n: 1 }),
});

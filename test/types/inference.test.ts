/**
 * Type-level tests: `npm run typecheck` (tsc --noEmit over test/) is what fails when inference
 * breaks; Jest runs this file too, so the declarations it builds are also valid at run time.
 */
import { expectTypeOf } from 'expect-type';
import {
  createBcmsFunction,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
  type AuthOptions,
  type BcmsControllerMethod,
  type BcmsFunctionModule,
  type JWT,
  type JWTPreRequestHandlerResult,
  type MethodRoute,
  type SignatureAlgorithm,
} from '../../lib';

describe('inference from definitions', () => {
  test('with the JWT guard, accessToken reaches the handler with no cast', () => {
    const method = createControllerMethod({
      path: '/me',
      type: 'get',
      preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
      handler: async ({ accessToken, request, errorHandler }) => {
        expectTypeOf(accessToken).toEqualTypeOf<JWT<unknown>>();
        expectTypeOf(accessToken.payload.userId).toBeString();
        expectTypeOf(accessToken.payload.rls[0]!.name).toEqualTypeOf<JWTRoleName>();
        expectTypeOf(request.params).toBeObject();
        expectTypeOf(errorHandler.occurred).returns.toHaveProperty('status');
        return { userId: accessToken.payload.userId, count: 1 };
      },
    });
    // For the typed client, the route's path, verb and answer; never the guard's result.
    expectTypeOf(method).toEqualTypeOf<
      BcmsControllerMethod<JWTPreRequestHandlerResult<unknown>, { userId: string; count: number }> & { readonly '~route'?: MethodRoute<'/me', 'get', { userId: string; count: number }> }
    >();
  });

  test('without a guard the handler has no accessToken, and the body type is the return type', () => {
    const method = createControllerMethod({
      path: '/open',
      type: 'get',
      handler: async (context) => {
        // @ts-expect-error: an unguarded method has no token
        void context.accessToken;
        return { message: 'Hello' };
      },
    });
    expectTypeOf(method).toEqualTypeOf<BcmsControllerMethod<void, { message: string }> & { readonly '~route'?: MethodRoute<'/open', 'get', { message: string }> }>();
  });

  test('a custom pre-request handler yields its own context members', () => {
    createControllerMethod({
      path: '/tenant',
      type: 'get',
      preRequestHandler: async ({ request }) => ({ tenant: String(request.headers['x-tenant']) }),
      handler: async ({ tenant }) => {
        expectTypeOf(tenant).toBeString();
        return { tenant };
      },
    });
  });

  test('explicit generics, as BCMS files write them, pin the body type', () => {
    createControllerMethod<JWTPreRequestHandlerResult, { message: string }>({
      path: '/typed',
      type: 'get',
      preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.USER], JWTPermissionName.READ),
      // @ts-expect-error: the declared body is { message: string }
      handler: async () => ({ msg: 'wrong key' }),
    });
  });

  test('the verb is one of get, post, put, patch, delete', () => {
    // @ts-expect-error: "fetch" is not a verb
    createControllerMethod({ path: '/x', type: 'fetch', handler: async () => ({}) });
  });

  test('a function module is typed by its body and result', () => {
    const module = createBcmsFunction(async () => ({
      config: { name: 'sum', public: true },
      handler: async ({ request, auth }: { request: { body: number[] }; auth: unknown }) => {
        void auth;
        return request.body.reduce((a, b) => a + b, 0);
      },
    }));
    // What callers send and get; the module's own create() is typed loosely (only the router calls it).
    // biome-ignore lint/suspicious/noExplicitAny: the exact public type, whose body is any (see createBcmsFunction)
    expectTypeOf(module).toEqualTypeOf<BcmsFunctionModule<any, unknown, 'sum', number[], number>>();
  });

  test('request.body of a function is any by default, as BCMS function files use it', () => {
    createBcmsFunction(async () => ({
      config: { name: 'any-body', public: true },
      handler: async ({ request }) => {
        expectTypeOf(request.body).toBeAny();
        return request.body.title as string;
      },
    }));
  });

  test("a private function's auth narrows by its type: the API key, or the JWT", () => {
    createBcmsFunction(async () => ({
      config: { name: 'who', public: false },
      handler: async ({ auth }) => {
        if (auth === null) return 'public';
        if (auth.type === 'signature') {
          expectTypeOf(auth.key).toEqualTypeOf<{ id: string; name: string; algorithm: SignatureAlgorithm; functions: readonly string[]; plugins: readonly string[] }>();
          return auth.key.name;
        }
        expectTypeOf(auth.accessToken).toEqualTypeOf<JWT>();
        return auth.accessToken.payload.userId;
      },
    }));
  });

  test("auth.fromRequest gets Express's request and returns BCMS's user shape, or a promise of it", () => {
    type FromRequest = NonNullable<AuthOptions['fromRequest']>;
    expectTypeOf<Parameters<FromRequest>[0]>().toEqualTypeOf<import('express').Request>();
    const sync: FromRequest = () => ({ userId: 7, roles: [{ name: JWTRoleName.ADMIN, permissions: [{ name: JWTPermissionName.READ }] }] });
    const async: FromRequest = async () => null;
    // @ts-expect-error: role names are BCMS's, not the app's own
    const wrong: FromRequest = () => ({ userId: 'u', roles: [{ name: 'admin', permissions: [] }] });
    expect([typeof sync, typeof async, typeof wrong]).toEqual(['function', 'function', 'function']);
  });
});

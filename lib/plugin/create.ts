import { ownBodyLimit } from '../http/body';
import type { BcmsController, BcmsControllerMethod, BcmsPlugin } from './types';

/**
 * Declares a plugin: its name is the path segment after `/api/plugin/`.
 *
 * @example
 * export default createBcmsPlugin({ name: 'hello', controllers: [HelloController] });
 */
export function createBcmsPlugin(config: BcmsPlugin): BcmsPlugin {
  return config;
}

/**
 * Declares a controller: `path` prefixes each of its methods' paths. `setup` (optional, may be
 * async) runs once before the router is ready; what it returns is the argument of `methods`.
 *
 * @example
 * export const HelloController = createController({
 *   name: 'Hello',
 *   path: '/hello',
 *   setup: async () => ({ greeting: 'Hi' }),
 *   methods: ({ greeting }) => ({ greet: createControllerMethod({ path: '/greet', type: 'get', handler: async () => ({ message: greeting }) }) }),
 * });
 */
export function createController<SetupResult = unknown>(config: BcmsController<SetupResult>): BcmsController<SetupResult> {
  return config;
}

/**
 * Declares an endpoint. Its handler's context is typed by what `preRequestHandler` yields
 * (`accessToken` with the JWT guard, `body` with a body check) and its response by what the
 * handler returns. BCMS's form, with both written as type arguments
 * (`createControllerMethod<BCMSRouteProtectionJwtResult, { items: Todo[] }>`), works too.
 *
 * @example
 * createControllerMethod({
 *   path: '/me',
 *   type: 'get',
 *   preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
 *   handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }),
 * });
 */
export function createControllerMethod<PreResult = void, Body = unknown>(
  config: BcmsControllerMethod<PreResult, Body>,
): BcmsControllerMethod<PreResult, Body> {
  ownBodyLimit(config?.bodyLimit, 'createControllerMethod'); // a wrong limit throws here, not at the first request
  return config;
}

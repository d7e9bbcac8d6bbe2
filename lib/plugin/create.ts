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
 * Declares a controller: `path` prefixes each of its methods' paths.
 *
 * @example
 * export const HelloController = createController({
 *   name: 'Hello',
 *   path: '/hello',
 *   methods: () => ({ greet: createControllerMethod({ path: '/greet', type: 'get', handler: async () => ({ message: 'Hi' }) }) }),
 * });
 */
export function createController(config: BcmsController): BcmsController {
  return config;
}

/**
 * Declares an endpoint. Its handler's context is typed by what `preRequestHandler` yields
 * (`accessToken` with the JWT guard) and its response by what the handler returns.
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
  return config;
}

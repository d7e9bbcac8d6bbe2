import type { BcmsFunction, BcmsFunctionModule } from './types';

/**
 * Declares a function, as a BCMS function file does: the factory runs once when the router starts.
 *
 * @example
 * export default createBcmsFunction(async () => ({
 *   config: { name: 'hello', public: true },
 *   handler: async ({ request }) => ({ greeting: `Hello, ${request.body?.name ?? "world"}!` }),
 * }));
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function createBcmsFunction<Body = any, Result = unknown>(
  factory: () => BcmsFunction<Body, Result> | Promise<BcmsFunction<Body, Result>>,
): BcmsFunctionModule<Body, Result> {
  if (typeof factory !== 'function') {
    throw new TypeError('createBcmsFunction: argument factory must be a function returning { config, handler }');
  }
  return Object.freeze({ kind: 'bcms-function' as const, create: async () => factory() });
}

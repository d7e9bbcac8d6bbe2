import { type BcmsLogger, LEVELS, type Level, toBcmsLogger } from '../handler-logger';
import { createDefaultLogger, type Logger } from '../logger';

export type { BcmsLogger };

let current: Logger | undefined;

/** Called by `bcmsExtensions`: `useLogger` loggers write through the logger of the router built last. */
export function bindLogger(logger: Logger): void {
  current = logger;
}

/**
 * BCMS's `useLogger`: a logger named for a part of a plugin, writing through the logger of the
 * router built last (the default pino logger before one is built). It may be made at a module's
 * top level, before any router exists.
 *
 * @example
 * const logger = useLogger({ name: 'Project controller' });
 * logger.warn('setup', error); // {"component":"Project controller","place":"setup","err":{...},"msg":"..."}
 */
export function useLogger(config: { name: string }): BcmsLogger {
  if (config === null || typeof config !== 'object' || typeof config.name !== 'string') {
    throw new TypeError('useLogger: argument config must be { name: string }');
  }
  // Resolved at each call, not now: the router may be built after this logger.
  const resolve = (): Logger => {
    current ??= createDefaultLogger();
    return current;
  };
  const wrappers = new WeakMap<Logger, BcmsLogger>();
  const named = {} as Record<Level, (first: unknown, message?: unknown) => void>;
  for (const level of LEVELS) {
    named[level] = function log(...args: [unknown, unknown?]): void {
      const base = resolve();
      let logger = wrappers.get(base);
      if (logger === undefined) {
        logger = toBcmsLogger(base, config.name);
        wrappers.set(base, logger);
      }
      (logger[level] as (...a: unknown[]) => void)(...args);
    };
  }
  return Object.freeze(named) as BcmsLogger;
}

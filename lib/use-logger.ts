import { createDefaultLogger, type Logger } from './logger';

type Level = 'info' | 'warn' | 'error' | 'debug';

/**
 * The logger BCMS code is handed (the context's `logger`, `useLogger`): it takes BCMS's call form
 * `logger.warn(place, message)` as well as pino's `logger.warn(object, message)`.
 *
 * In BCMS's form, `place` becomes a field and the message the line's text; an `Error` message is
 * logged as `err` (with its stack, as pino serialises errors) and any other object as `data`. pino
 * itself would read `(place, error)` as a format string and drop the error.
 */
export interface BcmsLogger {
  info(place: string, message?: unknown): void;
  info(object: object, message?: string): void;
  warn(place: string, message?: unknown): void;
  warn(object: object, message?: string): void;
  error(place: string, message?: unknown): void;
  error(object: object, message?: string): void;
  debug(place: string, message?: unknown): void;
  debug(object: object, message?: string): void;
}

const LEVELS: readonly Level[] = ['info', 'warn', 'error', 'debug'];

/** Wraps a pino-compatible logger; `component` (useLogger's name) is added to each line. */
export function toBcmsLogger(base: Logger, component?: string): BcmsLogger {
  const wrapped = {} as Record<Level, (first: unknown, message?: unknown) => void>;
  for (const level of LEVELS) {
    wrapped[level] = function log(first: unknown, message?: unknown): void {
      const named = component === undefined ? {} : { component };
      if (typeof first !== 'string') {
        base[level](component === undefined ? (first as object) : { ...named, ...(first as object) }, message as string | undefined);
      } else if (arguments.length < 2) {
        base[level](named, first);
      } else if (message instanceof Error) {
        base[level]({ ...named, place: first, err: message }, message.message);
      } else if (typeof message === 'string') {
        base[level]({ ...named, place: first }, message);
      } else {
        base[level]({ ...named, place: first, data: message }, first);
      }
    };
  }
  return Object.freeze(wrapped) as BcmsLogger;
}

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
  const resolve = (): Logger => (current ??= createDefaultLogger());
  const wrappers = new WeakMap<Logger, BcmsLogger>();
  const named = {} as Record<Level, (first: unknown, message?: unknown) => void>;
  for (const level of LEVELS) {
    named[level] = function log(...args: [unknown, unknown?]): void {
      const base = resolve();
      let logger = wrappers.get(base);
      if (logger === undefined) wrappers.set(base, (logger = toBcmsLogger(base, config.name)));
      (logger[level] as (...a: unknown[]) => void)(...args);
    };
  }
  return Object.freeze(named) as BcmsLogger;
}

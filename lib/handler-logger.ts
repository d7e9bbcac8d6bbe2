// The logger handed to handlers (the context's `logger`): pino's calls, and BCMS's `(place, message)`.
import type { Logger } from './logger';

export type Level = 'info' | 'warn' | 'error' | 'debug';

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

export const LEVELS: readonly Level[] = ['info', 'warn', 'error', 'debug'];

/** Wraps a pino-compatible logger; `component` (useLogger's name) is added to each line. */
export function toBcmsLogger(base: Logger, component?: string): BcmsLogger {
  const wrapped = {} as Record<Level, (first: unknown, message?: unknown) => void>;
  for (const level of LEVELS) {
    wrapped[level] = function log(...args: [first: unknown, message?: unknown]): void {
      const [first, message] = args;
      const named = component === undefined ? {} : { component };
      if (typeof first !== 'string') {
        base[level](component === undefined ? (first as object) : { ...named, ...(first as object) }, message as string | undefined);
      } else if (args.length < 2) {
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

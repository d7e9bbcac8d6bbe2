/**
 * The logging surface the router needs: any pino logger fits, and so does any object with these
 * methods (`(object, message)` as pino takes them).
 */
export interface Logger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
  debug(object: object, message?: string): void;
}

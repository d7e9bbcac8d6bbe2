import type { FunctionDescription, OperationDescription } from '../openapi/describe';
/**
 * The contract between the service and an isolate, whole: every message either side sends, and
 * every capability extension code may ask the service for (`Ask`). A request crosses as plain data
 * and its answer comes back as plain data; nothing of the service (its objects, its secrets, its
 * environment) is ever sent.
 */
import type { BCMSJobCron } from '../events/types';
import type { BcmsFunctionAuth } from '../function/types';
import type { JWT } from '../security/token';
import type { WireError } from './wire';

export type ExtensionKind = 'plugin' | 'function' | 'event' | 'job';

/** Where an isolate takes its code from: a deployed bundle, or a module file of the host's registry (`isolate: 'all'`). */
export type ExtensionSource =
  | { type: 'bundle'; code: string; filename: string }
  /** `key`: the export that is the plugin, the function module or the event or job factory (`''` for `module.exports` itself). */
  | { type: 'module'; file: string; key: string };

/**
 * A request as the isolate sees it (Express's names), without its `Authorization` and `Cookie`
 * headers: extension code gets what the service's guards decided of them (`accessToken`, a key),
 * never a credential it could replay against the service.
 */
export interface WireRequest {
  method: string;
  url: string;
  originalUrl: string;
  baseUrl: string;
  path: string;
  params: Record<string, string>;
  query: unknown;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body, when the service read one. */
  body?: unknown;
  /** A body of another type, read whole (at most `bodyLimit`), base64. */
  raw?: string;
  ip: string | undefined;
  protocol: string;
  hostname: string | undefined;
  secure: boolean;
  /** The request carried a bearer token (which stayed in the service): a guard that takes a token or a signature asks for the one sent. */
  bearer?: true;
}

/** What a handler answered: its value as JSON text, or bytes (a Buffer it returned, or what it sent through `response`). */
export interface WireAnswer {
  status: number;
  headers: [string, string | string[]][];
  json?: string;
  /** base64 */
  bytes?: string;
  /** The handler sent the bytes itself (`send`, `end`): no default content type is added. */
  sent?: boolean;
  /**
   * `bytes` holds the handler's JSON text: sent so when the text, escaped as a JSON string, would
   * not fit a frame (base64 is at most 4/3 of it, whatever the text).
   */
  jsonBytes?: true;
}

/** A plugin method as the service routes it; the isolate runs it. */
export interface WireRoute {
  controller: { name: string; path: string };
  key: string;
  path: string | undefined;
  type: string;
  /**
   * `none`; `jwt`: the package's JWT guard, which the service checks itself (no round trip);
   * `custom`: a pre-request handler that runs in the isolate and asks the service to verify.
   */
  guard: { type: 'none' } | { type: 'jwt'; roles: string[]; permission: string } | { type: 'custom' };
  /** The method's own `bodyLimit`, in bytes, which the service enforces. */
  bodyLimit?: number;
  /** What the OpenAPI document says of it, made where its schemas are. */
  described: OperationDescription;
}

/**
 * What a loaded extension is. An event's or a job's `name` is its deployment's, or for a registry
 * one its definition's own `name` (`''` when it has none: the events engine names it).
 */
export type WireExtension =
  | { kind: 'plugin'; name: string; routes: WireRoute[]; policies: unknown[] | null }
  | { kind: 'function'; name: string; public: boolean; bodyLimit?: number; described: FunctionDescription }
  | { kind: 'event'; name: string; config: { scope: string; method: string } }
  | { kind: 'job'; name: string; cron: BCMSJobCron };

/** The service's messages to an isolate. */
export type ToIsolate =
  /** `answerLimit`: the largest answer the service takes (`extensionAnswerMb`, in bytes). */
  | { t: 'load'; kind: ExtensionKind; name: string; source: ExtensionSource; answerLimit: number }
  | { t: 'plugin'; id: number; route: number; request: WireRequest; accessToken?: JWT; runGuard: boolean }
  | { t: 'function'; id: number; request: WireRequest; auth: BcmsFunctionAuth | null; idempotencyKey?: string }
  /** An event for the handler: its payload as wire.ts encodes values (a Date, bytes). Answered `done` (no value) or `failed`. */
  | { t: 'handle-event'; id: number; scope: string; method: string; payload: unknown }
  /** A tick of the job: its handler runs once. Answered `done` or `failed`. */
  | { t: 'run-job'; id: number }
  | { t: 'reply'; id: number; value?: unknown; error?: WireError };

/**
 * What extension code may ask the service for, listed in one place:
 * - `query`: SQL on the service's own pool (the embedded database has one owner). `conn` is the
 *   isolate's connection: a transaction (BEGIN ... COMMIT) keeps one real connection throughout.
 * - `release`: the isolate is done with a connection (a transaction it left open is rolled back).
 * - `token`: verify the bearer token of request `call` with the service's JWT settings.
 * - `key`: the API key of request `call`'s signature, for the plugin it reached.
 */
export type Ask = { op: 'query'; conn: number; sql: string; bindings: unknown[]; options?: unknown } | { op: 'release'; conn: number } | { op: 'token'; call: number } | { op: 'key'; call: number };

/** An isolate's messages to the service. */
export type FromIsolate =
  | { t: 'loaded'; extension: WireExtension }
  | { t: 'load-failed'; message: string }
  | { t: 'done'; id: number; answer: WireAnswer }
  | { t: 'failed'; id: number; error: WireError }
  | { t: 'ask'; id: number; ask: Ask }
  | { t: 'log'; level: 'info' | 'warn' | 'error' | 'debug'; object: unknown; message?: string }
  /** An event for the router's `events`, sent by a layer's code in the isolate (its data as wire.ts encodes values). */
  | { t: 'event'; name: string; data: unknown };

/** The rows of a query, as pg shapes them. */
export interface WireQueryResult {
  command?: string;
  rowCount: number | null;
  rows: unknown[];
}

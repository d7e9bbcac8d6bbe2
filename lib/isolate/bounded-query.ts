/**
 * One statement of extension code on a server connection, bounded by the service rather than by
 * what the session was told:
 * - one statement a text (the extended protocol): `set statement_timeout = 0; select pg_sleep(1e7)`
 *   sent as one text is refused, so a SET can only take effect from the next statement on;
 * - at most `timeoutMs`, then cancelled on the server, whatever `statement_timeout` the session
 *   was given since (a SET is extension code's to make);
 * - a result of at most `maxBytes` as the database sends it (its text, and a cost for each row and
 *   field, which an empty row still has): the service holds a statement's rows
 *   while it hands them to the isolate, so a result past the cap is dropped as it arrives and the
 *   statement cancelled (400 TOO_LARGE), rather than grow the service's heap until it dies.
 */
import type pg from 'pg';
import { BcmsHttpError } from '../http/errors';

/** The most of one statement's result that extension code gets, as the database sends it (its fields' text). */
export const EXTENSION_RESULT_MAX_BYTES = 32 * 1024 * 1024;

/** How long a statement's answer waits for its cancel to go out (another session, which may be slow to connect). */
const CANCEL_WAIT_MS = 5_000;

/** What a row and each of its fields cost the service beyond their text, in the cap's bytes (a JS object and its slots). */
const ROW_COST = 64;
const FIELD_COST = 16;

export interface StatementLimits {
  maxBytes: number;
  timeoutMs: number;
}

interface Submitted {
  query(query: unknown): unknown;
}

interface DataRow {
  fields: (string | Buffer | null)[];
}

type BoundedQueryClass = new (config: pg.QueryConfig, callback: (error: Error | null, result: pg.QueryResult) => void, maxBytes: number, onOver: () => void) => { over: boolean };

let boundedQuery: BoundedQueryClass | undefined;

/**
 * pg's Query, counting the bytes of each row as it arrives and taking none past the cap. Made when
 * first asked for: pg is loaded by the first extension statement on a server, not by every start
 * (8% of loading the package, and an embedded database never needs it).
 */
function boundedQueryClass(): BoundedQueryClass {
  if (boundedQuery !== undefined) return boundedQuery;
  const { Query } = require('pg') as typeof pg;
  class BoundedQuery extends (Query as unknown as new (config: pg.QueryConfig, callback: (error: Error | null, result: pg.QueryResult) => void) => object) {
    bytes = 0;
    over = false;

    constructor(
      config: pg.QueryConfig,
      callback: (error: Error | null, result: pg.QueryResult) => void,
      private readonly maxBytes: number,
      private readonly onOver: () => void,
    ) {
      super(config, callback);
    }

    handleDataRow(message: DataRow): void {
      if (this.over) return;
      // A row costs the service an object and a slot for each field, even when its fields are empty
      // or null (`select from generate_series(1, 1e8)` sends no text): counted as ROW_COST and FIELD_COST.
      this.bytes += ROW_COST + FIELD_COST * message.fields.length;
      for (const field of message.fields) if (field !== null) this.bytes += field.length;
      if (this.bytes > this.maxBytes) {
        this.over = true;
        // What it took so far goes now, not when the statement ends.
        (this as unknown as { _result: { rows: unknown[] } })._result.rows = [];
        this.onOver();
        return;
      }
      (Query.prototype as unknown as { handleDataRow(this: BoundedQuery, message: DataRow): void }).handleDataRow.call(this, message);
    }
  }
  boundedQuery = BoundedQuery;
  return BoundedQuery;
}

/**
 * Runs `sql` on `connection` (a pg client of the extension pool) within `limits`; `cancel` stops
 * the statement on the server (pg_cancel_backend from another session).
 */
export function runBounded(connection: object, sql: string, values: unknown[], rowMode: 'array' | undefined, limits: StatementLimits, cancel: () => Promise<void>): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    let timedOut = false;
    // A cancel asked for reaches whatever statement the session runs when it arrives: if this one
    // ended first, the connection's next statement would be cancelled in its place. So the
    // statement is answered only once its cancel went out (a session that is idle ignores one).
    let cancelling: Promise<void> | undefined;
    const cancelOnce = (): void => {
      // A cancel that does not go out within CANCEL_WAIT_MS: the connection is not used again.
      const dispose = (): void => {
        (connection as { __knex__disposed?: unknown }).__knex__disposed = 'a cancel of its statement did not go out';
      };
      cancelling ??= Promise.race([
        cancel().then(
          () => true,
          () => true,
        ),
        new Promise<boolean>((resolve) => setTimeout(resolve, CANCEL_WAIT_MS, false).unref()),
      ]).then((sent) => (sent ? undefined : dispose()));
    };
    const timer = setTimeout(() => {
      timedOut = true;
      cancelOnce();
    }, limits.timeoutMs);
    timer.unref();
    const answer = (error: Error | null, result: pg.QueryResult): void => {
      if (query.over) {
        reject(
          new BcmsHttpError(
            'TOO_LARGE',
            `The query's result is larger than the ${Math.round(limits.maxBytes / 1024 / 1024)} MB an extension may read at once: select fewer rows or columns (a limit, a page).`,
          ),
        );
        return;
      }
      if (error !== null && timedOut) {
        reject(new Error(`The statement ran past its time-out of ${limits.timeoutMs} ms and was cancelled.`));
        return;
      }
      if (error !== null) {
        reject(error);
        return;
      }
      resolve(result);
    };
    const config: pg.QueryConfig & { queryMode: 'extended'; rowMode?: 'array' } = { text: sql, values, queryMode: 'extended', ...(rowMode === undefined ? {} : { rowMode }) };
    const query = new (boundedQueryClass())(
      config,
      (error, result) => {
        clearTimeout(timer);
        if (cancelling === undefined) answer(error, result);
        else void cancelling.then(() => answer(error, result));
      },
      limits.maxBytes,
      cancelOnce,
    );
    (connection as Submitted).query(query);
  });
}

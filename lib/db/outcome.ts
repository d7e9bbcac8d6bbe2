import type { Knex } from 'knex';

/**
 * Which failed statements may have changed the database: those that were sent and could write.
 * A connection lost after such a statement leaves its outcome unknown (the server may have
 * committed it and only the answer was lost): 503 DATABASE_OUTCOME_UNKNOWN rather than
 * DATABASE_UNAVAILABLE's "try again shortly" (issue 23, item 9: 6 of 8,453 writes were committed
 * while their callers were told to try again).
 *
 * Not an outcome unknown: a read; a statement inside a transaction other than its COMMIT (a lost
 * connection rolls the transaction back); anything that failed before a statement was sent (a
 * refused connection, the pool's time-out, a client that was already broken: they never reach here
 * as a failed statement, or say "not queryable").
 */
const sentWrites = new WeakSet<object>();

/** Statements that end a transaction by committing it. */
const COMMITS = /^\s*(commit|end)\b/i;
/** Statements that change nothing kept (their transaction's COMMIT does). */
const READS = /^\s*(select|show|explain|values|table|begin|start\s+transaction|set|reset|rollback|savepoint|release|prepare|declare|fetch|close|listen|unlisten)\b/i;
/** Knex's builder methods that only read. */
const READ_METHODS = new Set(['select', 'first', 'pluck', 'columnInfo']);

/** What ran: its SQL, Knex's method (for a builder), and whether it ran inside a transaction. */
export interface FailedStatement {
  sql?: unknown;
  method?: unknown;
  inTransaction: boolean;
}

/** Notes `error` as the failure of a statement that may have written (see above). */
export function noteFailedStatement(error: unknown, statement: FailedStatement): void {
  if (error === null || typeof error !== 'object') return;
  const { sql, method, inTransaction } = statement;
  if (typeof sql !== 'string') return;
  if (COMMITS.test(sql) || (!inTransaction && !(typeof method === 'string' && READ_METHODS.has(method)) && !READS.test(sql))) sentWrites.add(error);
}

/**
 * Whether `error` (a lost connection, see isUnreachable) came after a write or a COMMIT was sent.
 * A client that was broken before the statement refuses it unsent ("... is not queryable").
 */
export function wroteBeforeLost(error: unknown): boolean {
  if (error === null || typeof error !== 'object' || !sentWrites.has(error)) return false;
  const { message, name } = error as { message?: unknown; name?: unknown };
  return name !== 'KnexTimeoutError' && !(typeof message === 'string' && /not queryable/i.test(message));
}

const watched = new WeakSet<object>();

/**
 * Watches a Knex instance's failed statements (its transactions' included: Knex passes their
 * events on). Once per instance, however many routers share it: the listener holds no router.
 */
export function watchFailedStatements(knex: Knex): void {
  if (watched.has(knex)) return;
  watched.add(knex);
  knex.on('query-error', (error: unknown, query: { sql?: unknown; method?: unknown; __knexTxId?: unknown }) => {
    noteFailedStatement(error, { sql: query?.sql, method: query?.method, inTransaction: query?.__knexTxId !== undefined && query?.__knexTxId !== null });
  });
}

import type { Knex } from 'knex';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { childSpan, tracing } from '../tracing';
import { BcmsHttpError } from '../http/errors';
import type { Database } from './connection';
import { migrate } from './migrate';
import { watchFailedStatements, wroteBeforeLost } from './outcome';
import { sealStoredSecrets, type SecretsKeys } from '../security/secrets';

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'EAI_AGAIN',
  '57P01',
  '57P02',
  '57P03',
  '53300', // admin shutdown, crash shutdown, cannot connect now, too many connections
]);

/**
 * Why Postgres refused a query for its size, as the 400's message; `undefined` for any other error.
 * The caller's doing (a value, a list or a filter too large), never an outage.
 */
export function refusedForSize(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code !== 'string') return undefined;
  switch (code) {
    case '08P01':
      // protocol_violation, as the server answers a Bind message of more than 65,535 values (pg and
      // PGlite write the count in 16 bits: it wraps, and the server finds the values missing).
      return typeof message === 'string' && /\bbind message\b/i.test(message) ? 'The query has more values than the database takes in one statement (65,535): send fewer at a time.' : undefined;
    case '22001': // string_data_right_truncation
      return `${named(error, 'A value')} is longer than the database takes: make it shorter.`;
    case '54000': // program_limit_exceeded: an index row (a unique name, say) past its page's limit
      return `${named(error, 'A value')} is too large for the database: make it shorter.`;
    case '54001': // statement_too_complex: the server's stack depth
      return 'The query is too complex for the database: make it smaller or less deeply nested.';
    default:
      return code.startsWith('54') ? 'The query is too large for the database: make it smaller.' : undefined;
  }
}

/** The field a refusal names: Postgres's `column`, or the column of a `<table>_<column>_unique` index. */
function named(error: object, otherwise: string): string {
  const { column, constraint, table } = error as { column?: unknown; constraint?: unknown; table?: unknown };
  let name = typeof column === 'string' ? column : undefined;
  if (name === undefined && typeof constraint === 'string' && typeof table === 'string') {
    name = /^(.+)_(?:unique|key)$/.exec(constraint.startsWith(`${table}_`) ? constraint.slice(table.length + 1) : '')?.[1];
  }
  // Columns are snake_case; the fields callers write are BCMS's camelCase (user_id: userId).
  return name === undefined ? otherwise : `Field "${name.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase())}"`;
}

/** Whether an error means "the database cannot be reached", as opposed to a bad query. */
export function isUnreachable(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  const { code, name, message } = error as { code?: unknown; name?: unknown; message?: unknown };
  // 08P01 (protocol_violation) is the server answering: it was reached (and refused the message).
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || (code.startsWith('08') && code !== '08P01'))) return true;
  if (name === 'KnexTimeoutError') return true;
  return (
    typeof message === 'string' &&
    /connection terminated|connection error|client was closed|timeout exceeded when trying to connect|timeout expired|connection timeout|query read timeout|PGlite is closed/i.test(message)
  );
}

/**
 * The router's database, migrated before its first use. While the database cannot be reached,
 * every use answers 503 DATABASE_UNAVAILABLE (DATABASE_OUTCOME_UNKNOWN for a write whose answer
 * was lost with the connection), and the next use tries the connection and the
 * migrations again: a database that comes back is taken up without a restart.
 */
export class ContentStore {
  private migrated: Promise<void> | undefined;
  private readonly migratedElsewhere: boolean;

  /** `migratedElsewhere`: another owner migrates this database (the service, for a store inside an isolate). */
  constructor(
    readonly database: Database,
    private readonly logger: Logger,
    private readonly options?: { migratedElsewhere?: boolean; secrets?: SecretsKeys; metrics?: Pick<Metrics, 'database'> },
  ) {
    this.migratedElsewhere = options?.migratedElsewhere === true;
    watchFailedStatements(database.knex);
  }

  /** The first attempt, at start: an unreachable database is logged, not fatal. */
  async start(): Promise<void> {
    try {
      await this.ready();
    } catch (error) {
      if (!(error instanceof BcmsHttpError)) throw error;
      // ready() logged it; requests will try again.
    }
  }

  /** Resolves once migrated; throws DATABASE_UNAVAILABLE while the database cannot be reached. */
  ready(): Promise<void> {
    if (this.migratedElsewhere) return Promise.resolve();
    this.migrated ??= migrate(this.database.knex).then(
      async (applied) => {
        if (applied.length > 0) this.logger.info({ database: this.database.description, applied }, 'bcms-extensions: migrations applied');
        // With a secrets key, the secrets still in clear (or sealed under a key rotated out) are sealed now.
        // A failure here is logged, not fatal: the secrets in clear are refused meanwhile, and the next start tries again.
        await sealStoredSecrets(this.database.knex, this.options?.secrets).then(
          (sealed) => sealed > 0 && this.logger.info({ sealed }, 'bcms-extensions: sealed API key secrets under secretsKey'),
          (error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not seal the API key secrets in clear (tried again at the next start)'),
        );
      },
      (error: unknown) => {
        this.migrated = undefined;
        throw this.unavailable(error);
      },
    );
    return this.migrated;
  }

  /**
   * Runs a query on the store's database once it is ready; a lost connection becomes 503 and a
   * retry next time, a query the database refuses for its size 400 TOO_LARGE.
   */
  async run<T>(query: (db: Knex) => Promise<T>): Promise<T> {
    await this.ready();
    try {
      // Within a traced request, a span of its own (lib/tracing.ts).
      const result = await (tracing() ? childSpan('bcms db', { 'db.system': 'postgresql' }, () => query(this.database.knex)) : query(this.database.knex));
      this.options?.metrics?.database(true);
      return result;
    } catch (error) {
      // Already an answer (the isolates' bridge runs through here): kept as it is.
      if (error instanceof BcmsHttpError) throw error;
      // A query too large for the database is the caller's: 400 TOO_LARGE, and no outage logged.
      const refusal = refusedForSize(error);
      if (refusal !== undefined) throw new BcmsHttpError('TOO_LARGE', refusal);
      if (isUnreachable(error)) {
        this.migrated = undefined;
        throw this.unavailable(error);
      }
      throw error;
    }
  }

  /**
   * An unreachable database: DATABASE_UNAVAILABLE, or DATABASE_OUTCOME_UNKNOWN when the connection
   * was lost after a write or a COMMIT was sent (lib/db/outcome.ts): that write may be in.
   */
  private unavailable(error: unknown): unknown {
    if (!isUnreachable(error)) return error;
    this.options?.metrics?.database(false);
    if (wroteBeforeLost(error)) {
      this.logger.error({ err: error, database: this.database.description }, 'bcms-extensions: database unreachable after a write was sent: its outcome is unknown');
      return new BcmsHttpError('DATABASE_OUTCOME_UNKNOWN');
    }
    this.logger.error({ err: error, database: this.database.description }, 'bcms-extensions: database unreachable');
    return new BcmsHttpError('DATABASE_UNAVAILABLE');
  }
}

/**
 * The connections extension queries run on, never the service's own session (docs/deploying.md, "Deployed code runs isolated").
 *
 * - A Postgres server: a pool of its own (`extensionPool.max`), logged in as the extension role
 *   (lib/db/extension-role.ts), in the service's schema, with `statement_timeout` and
 *   `idle_in_transaction_session_timeout` set for the session. A connection goes back to the pool
 *   only once reset (`DISCARD ALL`, after a ROLLBACK where a transaction is open); one that cannot be
 *   reset is destroyed.
 * - PGlite: its one connection is the service's, and its session user a superuser. Each extension
 *   statement runs alone under `SET ROLE` of the extension role, and the session is put back after
 *   it (its authorization, role, settings, search path, cursors, prepared statements and the
 *   service's LISTENs), explicitly: `DISCARD ALL` would also end the service's LISTENs.
 */
import knexFactory, { type Knex } from 'knex';
import type { Database } from '../db/connection';
import { prepareExtensionRole, renewPassword, repairRoleSettings, ROLE_SETTINGS, storedPassword } from '../db/extension-role';
import type { Logger } from '../logger';
import { EXTENSION_RESULT_MAX_BYTES, runBounded } from './bounded-query';

export interface ExtensionSessions {
  /** A connection for one statement, or for a transaction from BEGIN to its end. */
  acquire(): Promise<object>;
  /** Runs one statement of extension code's; resolves to the driver's answer. */
  run(connection: object, sql: string, bindings: unknown[], options: unknown): Promise<unknown>;
  /** Gives a connection back, reset (rolled back first when `rollBack`: a transaction is open). */
  giveBack(connection: object, rollBack: boolean): Promise<void>;
  /** Stops the statement running on `connection` (the call that sent it is over). */
  cancel(connection: object): Promise<void>;
  close(): Promise<void>;
}

export interface SessionLimits {
  /** `extensionPool.max`: connections of the server pool. */
  max: number;
  /** `statement_timeout` and `idle_in_transaction_session_timeout` of every extension session. */
  timeoutMs: number;
}

/** Extension queries cannot run, for this reason (the log says what to do). */
export class ExtensionQueriesRefused extends Error {
  constructor(readonly reason: string) {
    super(`Extension queries are refused: ${reason}.`);
    this.name = 'ExtensionQueriesRefused';
  }
}

interface KnexClient {
  acquireConnection(): Promise<object>;
  releaseConnection(connection: object): Promise<unknown>;
  _query(connection: object, obj: { sql: string; bindings: unknown[]; options?: unknown }): Promise<{ response: unknown }>;
  cancelQuery?(connection: object): Promise<unknown>;
  connectionSettings?: unknown;
  config: { connection?: unknown };
}

const clientOf = (knex: Knex): KnexClient => knex.client as unknown as KnexClient;

/**
 * One piece of work at a time on a connection: statements of one transaction sent at once, and a
 * connection's reset, run in turn rather than overlapping (pg queues them but will stop; on PGlite a
 * statement runs between its SET ROLE and the reset after it, and nothing else may come between).
 */
class Turns {
  private readonly last = new WeakMap<object, Promise<unknown>>();

  take<T>(connection: object, work: () => Promise<T>): Promise<T> {
    const done = (this.last.get(connection) ?? Promise.resolve()).then(work, work);
    this.last.set(
      connection,
      done.catch(() => {}),
    );
    return done;
  }
}

/**
 * Extension code's connections for the service's `database`: made (and the role prepared) once,
 * at the first extension query. Rejects with ExtensionQueriesRefused where there is no role that
 * extension code may use.
 */
export async function openExtensionSessions(database: Database, limits: SessionLimits, logger: Logger): Promise<ExtensionSessions> {
  const service = database.knex;
  const pglite = (clientOf(service).config.connection as { pglite?: unknown } | undefined)?.pglite;
  if (pglite !== undefined) {
    const outcome = await prepareExtensionRole(service, { embedded: true, timeoutMs: limits.timeoutMs });
    if (!outcome.ok) throw new ExtensionQueriesRefused(outcome.reason);
    const path = (await service.raw(`select current_setting('search_path') as path`)) as { rows: { path: string }[] };
    return new EmbeddedSessions(service, outcome.role, outcome.restoreUser, path.rows[0]?.path ?? 'public');
  }
  const extensionUser = database.extensionUrl === undefined ? undefined : decodeURIComponent(new URL(database.extensionUrl).username);
  if (extensionUser === '') throw new ExtensionQueriesRefused('database.extensionUrl names no user: give the URL of the login role extension queries run as');
  const outcome = await prepareExtensionRole(service, { extensionUser, embedded: false, timeoutMs: limits.timeoutMs });
  if (!outcome.ok) throw new ExtensionQueriesRefused(outcome.reason);
  const base = database.extensionUrl ?? clientOf(service).connectionSettings ?? clientOf(service).config.connection;
  const sessions = new ServerSessions(service, base, database.extensionUrl === undefined, outcome, limits, logger);
  // Connected once now: a role that cannot log in is refused here, with what to do, not at every query.
  try {
    await sessions.giveBack(await sessions.acquire(), false);
  } catch (error) {
    await sessions.close();
    const code = (error as { code?: unknown }).code;
    if (code === '28P01' || code === '28000') {
      throw new ExtensionQueriesRefused(
        `the role "${outcome.role}" cannot log in (${(error as Error).message}). ` +
          (database.extensionUrl === undefined
            ? "Let it log in from the service's host (pg_hba.conf), or give the option database.extensionUrl"
            : 'Check database.extensionUrl (its user, password and pg_hba.conf)'),
      );
    }
    throw error;
  }
  return sessions;
}

/** `-c name=value` for a startup packet's `options`: spaces and backslashes escaped, as Postgres reads them. */
const startupOption = (name: string, value: string): string => `-c ${name}=${value.replace(/[\\ ]/g, (c) => `\\${c}`)}`;
const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;
const quoteLiteral = (value: string): string => `'${value.replace(/'/g, "''")}'`;

type Role = { role: string; password: string | undefined; schemas: string[]; canRepair: boolean; database: string };

class ServerSessions implements ExtensionSessions {
  private readonly knex: Knex;
  private readonly turns = new Turns();
  private password: string | undefined;
  /** When the service last renewed the role's password (ms, performance.now()). */
  private renewedAt = -Infinity;
  private configExpired = false;

  constructor(
    private readonly service: Knex,
    base: unknown,
    /** The role is the one the service made (so its password is the service's to renew), not database.extensionUrl's. */
    private readonly ours: boolean,
    private readonly role: Role,
    private readonly limits: SessionLimits,
    private readonly logger: Logger,
  ) {
    this.password = role.password;
    // Knex's own notes (a connection destroyed after a failed reset) are routine here.
    const quiet = (message: unknown): void => logger.debug({ knex: String(message) }, 'bcms-extensions: knex (extension pool)');
    this.knex = knexFactory({
      client: 'pg',
      // A provider, so that a renewed password reaches the connections made after it.
      connection: async () => ({ ...this.connectionConfig(base), expirationChecker: () => this.configExpired }),
      pool: {
        min: 0,
        max: limits.max,
        idleTimeoutMillis: 10_000,
        afterCreate: (connection: object, done: (error: Error | null, connection: object) => void) => {
          // A role of the operator's (database.extensionUrl) keeps the defaults the operator gives it.
          (ours ? this.checkNew(connection) : Promise.resolve()).then(
            () => done(null, connection),
            (error: Error) => done(error, connection),
          );
        },
      },
      // A query waiting for a connection waits at most as long as a call may run.
      acquireConnectionTimeout: limits.timeoutMs,
      log: { warn: quiet, error: quiet, deprecate: quiet, debug: quiet },
    });
  }

  /** The service's connection, logged in as the extension role, in the service's schema, with the limits of a session. */
  private connectionConfig(base: unknown): Record<string, unknown> {
    this.configExpired = false;
    let config: Record<string, unknown>;
    if (typeof base === 'string') config = { connectionString: base };
    else if (base !== null && typeof base === 'object') config = { ...(base as Record<string, unknown>) };
    else throw new Error("the service's connection settings cannot be read");
    if (typeof config.connectionString === 'string') {
      const url = new URL(config.connectionString);
      // Its own options would override these (pg reads the URL last): the schema is the service's.
      url.searchParams.delete('options');
      if (this.ours) {
        url.username = encodeURIComponent(this.role.role);
        url.password = this.password === undefined ? '' : encodeURIComponent(this.password);
      }
      config.connectionString = url.toString();
    }
    if (this.ours) {
      config.user = this.role.role;
      if (this.password === undefined) delete config.password;
      else config.password = this.password;
    }
    const timeout = String(this.limits.timeoutMs);
    return {
      ...config,
      options: [
        startupOption('search_path', this.role.schemas.map(quoteIdent).join(',')),
        // Startup values are what RESET (and DISCARD ALL) go back to: extension SQL's SETs end with the call.
        startupOption('statement_timeout', timeout),
        startupOption('idle_in_transaction_session_timeout', timeout),
      ].join(' '),
      application_name: 'bcms-extensions (extension code)',
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
    };
  }

  /**
   * A new session, before its first use: the role's own defaults (`ALTER ROLE ... SET`, which
   * extension code may do for its own role) are the service's, else they are put back (where the
   * service may) and the session is not used.
   */
  private async checkNew(connection: object): Promise<void> {
    const result = (await (connection as { query(sql: string): Promise<{ rows: { names: string[] | null }[] }> }).query(
      `select array(select split_part(c, '=', 1) from pg_db_role_setting s, unnest(s.setconfig) c
                     where s.setrole = (select oid from pg_roles where rolname = session_user)
                       and s.setdatabase in (0, (select oid from pg_database where datname = current_database()))) as names`,
    )) as { rows: { names: string[] | null }[] };
    const foreign = (result.rows[0]?.names ?? []).filter((name) => !ROLE_SETTINGS.has(name));
    if (foreign.length === 0) return;
    if (this.ours && this.role.canRepair) {
      await repairRoleSettings(this.service, this.role.role, this.role.database, this.limits.timeoutMs);
      this.logger.warn(
        { role: this.role.role, settings: foreign },
        "bcms-extensions: the extension role carried session defaults that were not the service's (extension code set them): they were removed",
      );
      throw new RoleRepaired();
    }
    this.logger.error(
      { role: this.role.role, settings: foreign },
      `bcms-extensions: the extension role carries session defaults that are not the service's; remove them (alter role "${this.role.role}" reset all) and set only statement_timeout and idle_in_transaction_session_timeout`,
    );
    throw new Error(`the extension role carries session defaults that are not the service's (${foreign.join(', ')})`);
  }

  async acquire(): Promise<object> {
    const client = clientOf(this.knex);
    try {
      return await client.acquireConnection();
    } catch (error) {
      if (error instanceof RoleRepaired || (error as { cause?: unknown }).cause instanceof RoleRepaired) return client.acquireConnection();
      // Its own pool, all taken by extension code: not the database going away (which the service would log as an outage).
      if ((error as { name?: unknown }).name === 'KnexTimeoutError')
        throw new Error(`No extension database connection was free within ${this.limits.timeoutMs} ms (extensionPool.max is ${this.limits.max}).`);
      const code = (error as { code?: unknown }).code;
      if ((code !== '28P01' && code !== '28000') || !this.ours) throw error;
      // Another instance on this schema renewed the password: it is in the service's table.
      const stored = await storedPassword(this.service, this.role.role);
      if (stored !== undefined && stored !== this.password) {
        this.password = stored;
        this.configExpired = true;
        return client.acquireConnection();
      }
      // Extension code may change its own role's password; the service made the role, and renews it (at most once a minute).
      if (!this.role.canRepair || performance.now() - this.renewedAt < 60_000) throw error;
      this.renewedAt = performance.now();
      this.password = await renewPassword(this.service, this.role.role);
      this.configExpired = true;
      this.logger.warn({ role: this.role.role }, "bcms-extensions: the extension role's password did not work; it was renewed");
      return client.acquireConnection();
    }
  }

  /** One statement, bounded in time and size whatever the session was told (lib/isolate/bounded-query.ts). */
  run(connection: object, sql: string, bindings: unknown[], options: unknown): Promise<unknown> {
    const rowMode = (options as { rowMode?: unknown } | undefined)?.rowMode === 'array' ? 'array' : undefined;
    const limits = { maxBytes: EXTENSION_RESULT_MAX_BYTES, timeoutMs: this.limits.timeoutMs };
    return this.turns.take(connection, () => runBounded(connection, sql, bindings, rowMode, limits, () => this.cancel(connection)));
  }

  giveBack(connection: object, rollBack: boolean): Promise<void> {
    return this.turns.take(connection, () => this.resetAndRelease(connection, rollBack));
  }

  private async resetAndRelease(connection: object, rollBack: boolean): Promise<void> {
    const client = clientOf(this.knex);
    const query = (sql: string): Promise<unknown> => client._query(connection, { sql, bindings: [] });
    try {
      if (rollBack) await query('ROLLBACK');
      // DISCARD ALL is refused inside a transaction (a statement text that began one and did not end it).
      await query('DISCARD ALL').catch(async () => {
        await query('ROLLBACK');
        await query('DISCARD ALL');
      });
    } catch {
      // Not reset, never reused: the pool destroys it rather than hand it out.
      (connection as { __knex__disposed?: unknown }).__knex__disposed = 'it could not be reset after extension code used it';
    }
    await client.releaseConnection(connection);
  }

  async cancel(connection: object): Promise<void> {
    // pg_cancel_backend from a session of the same role, which Postgres allows.
    await clientOf(this.knex)
      .cancelQuery?.(connection)
      .catch(() => {});
  }

  close(): Promise<void> {
    return this.knex.destroy();
  }
}

/** The role's defaults were put back: the session made under the old ones is dropped, and another made. */
class RoleRepaired extends Error {
  constructor() {
    super('the extension role was repaired');
  }
}

/** The knex-pglite connection (lib/db/connection.ts EmbeddedPglite, or a host's PGlite): `exec` runs several statements. */
interface PgliteConnection {
  exec(sql: string): Promise<unknown>;
}

/** Statements that end a transaction: all a failed transaction lets run (Postgres refuses every other). */
const ENDS_ALONE = /^\s*(rollback|abort|commit|end)\b[^;]*;?\s*$/i;

class EmbeddedSessions implements ExtensionSessions {
  /**
   * One extension statement (with its SET ROLE and the reset after it), or one giving back, at a
   * time: two statements of one transaction sent at once would otherwise run as SET ROLE, SET
   * ROLE, ROLLBACK (which undoes both), and the second statement as the service.
   */
  private readonly turns = new Turns();

  constructor(
    private readonly service: Knex,
    private readonly role: string,
    /** The session user: the service's own identity, put back after every statement. */
    private readonly restoreUser: string,
    /** The service's search path, which RESET ALL would take. */
    private readonly searchPath: string,
  ) {}

  acquire(): Promise<object> {
    // The one connection: the service's queries wait while extension code holds it (a transaction).
    return clientOf(this.service).acquireConnection();
  }

  run(connection: object, sql: string, bindings: unknown[], options: unknown): Promise<unknown> {
    return this.turns.take(connection, () => this.runAlone(connection, sql, bindings, options));
  }

  private async runAlone(connection: object, sql: string, bindings: unknown[], options: unknown): Promise<unknown> {
    const client = clientOf(this.service);
    let listening: string[] = [];
    try {
      const before = (await client._query(connection, {
        sql: `select set_config('role', $1, false) as role, array(select pg_listening_channels()) as channels`,
        bindings: [this.role],
      })) as { response: { rows: { channels: unknown }[] } };
      listening = channels(before.response.rows[0]?.channels);
    } catch (error) {
      // In a failed transaction nothing runs but its end (Postgres refuses every other statement).
      if ((error as { code?: unknown }).code !== '25P02' || !ENDS_ALONE.test(sql)) throw error;
    }
    try {
      // PGlite's query takes one statement (its extended protocol): no second one runs after a SET.
      return (await client._query(connection, { sql, bindings, options })).response;
    } finally {
      await this.reset(connection, listening);
    }
  }

  /**
   * The service's session as it was: its identity and role, its settings and search path, no
   * cursor or prepared statement of extension code's, and every channel it listened on. In a
   * failed transaction this cannot run, and need not: its ROLLBACK undoes what it set.
   */
  private async reset(connection: object, listening: string[]): Promise<void> {
    const statements = [
      `set session authorization ${quoteIdent(this.restoreUser)}`,
      'reset role',
      'reset all',
      `select set_config('search_path', ${quoteLiteral(this.searchPath)}, false)`,
      'close all',
      'deallocate all',
      ...listening.map((channel) => `listen ${quoteIdent(channel)}`),
    ];
    await (connection as PgliteConnection).exec(statements.join(';\n')).catch((error: { code?: unknown }) => {
      if (error.code !== '25P02') throw error;
    });
  }

  giveBack(connection: object, rollBack: boolean): Promise<void> {
    const client = clientOf(this.service);
    return this.turns.take(connection, async () => {
      try {
        if (rollBack) {
          await client._query(connection, { sql: 'ROLLBACK', bindings: [] }).catch(() => {});
          await this.reset(connection, []);
        }
      } finally {
        await client.releaseConnection(connection);
      }
    });
  }

  async cancel(): Promise<void> {
    // One thread: a statement that runs is over before anything else runs.
  }

  async close(): Promise<void> {}
}

function channels(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string' && value.length > 2)
    return value
      .slice(1, -1)
      .split(',')
      .map((name) => name.replace(/^"|"$/g, ''));
  return [];
}

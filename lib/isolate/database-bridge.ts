import { noteFailedStatement } from '../db/outcome';
import type { ContentStore } from '../db/store';
import type { Logger } from '../logger';
import { ExtensionQueriesRefused, openExtensionSessions, type ExtensionSessions, type SessionLimits } from './extension-sessions';
import type { WireQueryResult } from './protocol';
import { fromWire, toWire } from './wire';

interface DriverResult {
  command?: string;
  rowCount?: number | null;
  affectedRows?: number;
  rows?: unknown[];
}

/** A real connection an isolate's transaction holds, from BEGIN to its end. */
interface Held {
  connection: object;
  /** When its BEGIN ran (ms, performance.now()): no transaction of extension code outlives the longest call. */
  began: number;
  /** When its last statement ended (ms, performance.now()): past the time-out with none running, it is rolled back. */
  lastUsed: number;
  running: number;
}

/** How long a refusal of extension queries stands before the next query checks the role again. */
const REFUSAL_STANDS_MS = 60_000;

const BEGINS = /^\s*(BEGIN|START\s+TRANSACTION)\b/i;
const ENDS = /^\s*(COMMIT|END|ROLLBACK(?!\s+TO\b)|ABORT)\b/i;

/**
 * The service's end of an isolate's database: the SQL its Knex compiled runs on extension code's
 * own connections (lib/isolate/extension-sessions.ts), never the service's session. A query runs on
 * whichever connection is free, except inside a transaction, which keeps one connection from BEGIN
 * to COMMIT or ROLLBACK. Nothing outlives a call: once an isolate has no call in flight (`idle`),
 * or ends (`releaseAll`), its open transactions are rolled back, its running statements cancelled
 * and its connections given back, reset; a transaction left idle past the time-out is rolled back
 * too (a handler's background work, after its call).
 */
export class DatabaseBridge {
  /** Per isolate: its connection number → the real connection its transaction holds. */
  private readonly held = new Map<object, Map<number, Held>>();
  /** Per isolate: the connections a statement of its is running on. */
  private readonly running = new Map<object, Set<object>>();
  /** Per isolate: how many times it went idle (no call in flight); a BEGIN that waited past that is not kept. */
  private readonly idled = new WeakMap<object, number>();
  private opening: Promise<ExtensionSessions> | undefined;
  private sweeping: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly store: ContentStore,
    private readonly limits: SessionLimits,
    private readonly logger: Logger,
  ) {}

  /**
   * Extension code's connections, opened at its first query. A refusal is logged, with what to do,
   * and stands for a minute: then the next query tries again (the operator may have made the role).
   */
  private sessions(): Promise<ExtensionSessions> {
    this.opening ??= openExtensionSessions(this.store.database, this.limits, this.logger).catch((error: unknown) => {
      if (error instanceof ExtensionQueriesRefused) {
        this.logger.error({ reason: error.reason }, `bcms-extensions: extension queries are refused (never run as the service): ${error.reason}`);
        const refused = this.opening;
        setTimeout(() => {
          if (this.opening === refused) this.opening = undefined;
        }, REFUSAL_STANDS_MS).unref();
      } else {
        // Not a refusal (the database unreachable, say): tried again at the next query.
        this.opening = undefined;
      }
      throw error;
    });
    return this.opening;
  }

  /** Runs one query of `owner`'s (an isolate) on connection `conn` of its own. */
  query(owner: object, conn: number, sql: string, bindings: unknown[], options: unknown): Promise<unknown> {
    // Read as the query arrives: its call may end (`idle`) before it gets a connection.
    const calledIn = this.idled.get(owner) ?? 0;
    return this.store.run(async () => {
      if (this.closed) throw new Error('The service is closing.');
      const sessions = await this.sessions();
      let held = this.held.get(owner)?.get(conn);
      if (held === undefined && BEGINS.test(sql)) {
        const connection = await sessions.acquire();
        if ((this.idled.get(owner) ?? 0) !== calledIn) {
          // It waited for a connection while its call ended: it would hold one for no call.
          await sessions.giveBack(connection, false);
          throw new Error('The call that began this transaction is over.');
        }
        held = { connection, began: now(), lastUsed: now(), running: 0 };
        let mine = this.held.get(owner);
        if (mine === undefined) {
          mine = new Map();
          this.held.set(owner, mine);
        }
        mine.set(conn, held);
        this.sweep();
      }
      const values = fromWire(Array.isArray(bindings) ? bindings : []) as unknown[];
      const inTransaction = held !== undefined;
      // A failed statement is noted as Knex notes its own: a write or COMMIT whose connection was
      // lost after it was sent answers DATABASE_OUTCOME_UNKNOWN (lib/db/outcome.ts).
      const failed = (error: unknown): never => {
        noteFailedStatement(error, { sql, inTransaction });
        throw error;
      };
      const connection = held?.connection ?? (await sessions.acquire());
      const running = this.running.get(owner) ?? new Set<object>();
      this.running.set(owner, running);
      running.add(connection);
      if (held !== undefined) held.running++;
      try {
        return result(await sessions.run(connection, sql, values, driverOptions(options)).catch(failed));
      } finally {
        running.delete(connection);
        if (running.size === 0) this.running.delete(owner);
        // Given back after the answer: the reset (a round trip on a server) is not the caller's wait,
        // and the pool hands the connection out again only once it is done.
        if (held !== undefined) {
          held.running--;
          held.lastUsed = now();
          if (ENDS.test(sql)) void this.giveBack(owner, conn, false);
        } else {
          void sessions.giveBack(connection, false).catch((error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: an extension connection could not be given back'));
        }
      }
    });
  }

  /** The isolate closed connection `conn`: a transaction it left open is rolled back. */
  release(owner: object, conn: number): Promise<void> {
    return this.giveBack(owner, conn, true);
  }

  /**
   * The isolate has no call in flight (lib/isolate/host.ts): no transaction or statement of its
   * outlives the call that began it.
   */
  idle(owner: object): Promise<void> {
    this.idled.set(owner, (this.idled.get(owner) ?? 0) + 1);
    return this.endAll(owner);
  }

  /** The isolate ended: every transaction it held is rolled back and its connection given back. */
  releaseAll(owner: object): Promise<void> {
    return this.endAll(owner);
  }

  /** Ends every held transaction and running statement (router.close). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeping);
    this.sweeping = undefined;
    await Promise.all([...this.held.keys()].map((owner) => this.endAll(owner)));
    const sessions = await this.opening?.catch(() => undefined);
    await sessions?.close();
  }

  private async endAll(owner: object): Promise<void> {
    const sessions = await this.opening?.catch(() => undefined);
    if (sessions === undefined) return;
    // A statement still running (a handler that did not wait for it) is stopped first: its
    // connection's ROLLBACK would wait behind it.
    for (const connection of this.running.get(owner) ?? []) void sessions.cancel(connection);
    const mine = this.held.get(owner);
    if (mine === undefined) return;
    await Promise.all([...mine.keys()].map((conn) => this.giveBack(owner, conn, true)));
  }

  private async giveBack(owner: object, conn: number, rollBack: boolean): Promise<void> {
    const mine = this.held.get(owner);
    const held = mine?.get(conn);
    if (mine === undefined || held === undefined) return;
    mine.delete(conn);
    if (mine.size === 0) this.held.delete(owner);
    const sessions = await this.opening?.catch(() => undefined);
    await sessions?.giveBack(held.connection, rollBack).catch((error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: an extension connection could not be given back'));
  }

  /**
   * While a transaction is held: every few seconds, a transaction idle (no statement running) past
   * the time-out is rolled back, as `idle_in_transaction_session_timeout` does on a server (and
   * PGlite, whose one connection the service shares, has no such timer); one that began longer ago
   * than the time-out, however busy, is cancelled and rolled back too.
   */
  private sweep(): void {
    if (this.sweeping !== undefined) return;
    const every = Math.max(250, Math.min(5_000, Math.floor(this.limits.timeoutMs / 4)));
    this.sweeping = setInterval(() => {
      const limit = now() - this.limits.timeoutMs;
      for (const [owner, mine] of this.held) {
        for (const [conn, held] of mine) {
          if (held.running === 0 && held.lastUsed < limit) {
            this.logger.warn({ idleMs: this.limits.timeoutMs }, 'bcms-extensions: an extension transaction was idle past its time-out; it is rolled back');
            void this.giveBack(owner, conn, true);
          } else if (held.began < limit) {
            // Busy all along (a statement after another, holding its locks): no longer than a call may run.
            this.logger.warn({ ms: this.limits.timeoutMs }, 'bcms-extensions: an extension transaction ran past its time-out; it is cancelled and rolled back');
            void this.opening?.then((sessions) => sessions.cancel(held.connection)).catch(() => {});
            void this.giveBack(owner, conn, true);
          }
        }
      }
      if (this.held.size === 0) {
        clearInterval(this.sweeping);
        this.sweeping = undefined;
      }
    }, every);
    this.sweeping.unref();
  }
}

const now = (): number => performance.now();

/**
 * Of the query options Knex may send, only `rowMode: 'array'` (`.options({ rowMode: 'array' })`)
 * passes: the others (a prepared statement's name, type parsers) are the driver's business, and a
 * name would outlive the session's reset.
 */
function driverOptions(options: unknown): unknown {
  return options !== null && typeof options === 'object' && (options as { rowMode?: unknown }).rowMode === 'array' ? { rowMode: 'array' } : undefined;
}

/** The driver's answer as pg shapes it (PGlite names `affectedRows`, and no command), tagged for the wire. */
function result(response: unknown): unknown {
  let answer = response as DriverResult | DriverResult[];
  // Several statements in one text: pg answers each; the last is the query's.
  if (Array.isArray(answer)) answer = answer[answer.length - 1] ?? {};
  const wired: WireQueryResult = { rowCount: answer.rowCount ?? answer.affectedRows ?? null, rows: answer.rows ?? [] };
  if (typeof answer.command === 'string') wired.command = answer.command;
  return toWire(wired);
}

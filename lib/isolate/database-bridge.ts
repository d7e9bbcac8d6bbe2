import { noteFailedStatement } from '../db/outcome';
import type { ContentStore } from '../db/store';
import type { WireQueryResult } from './protocol';
import { fromWire, toWire } from './wire';

/** Knex's client, as far as the bridge uses it: a raw connection, and a query on one. */
interface KnexClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown> | unknown;
  _query(connection: unknown, obj: { sql: string; bindings: unknown[]; options?: unknown }): Promise<{ response: unknown }>;
}

interface DriverResult {
  command?: string;
  rowCount?: number | null;
  affectedRows?: number;
  rows?: unknown[];
}

const BEGINS = /^\s*(BEGIN|START\s+TRANSACTION)\b/i;
const ENDS = /^\s*(COMMIT|END|ROLLBACK(?!\s+TO\b)|ABORT)\b/i;

/**
 * The service's end of an isolate's database: the SQL its Knex compiled runs on the service's
 * own pool (the embedded database has one owner). A query runs on whichever connection is free,
 * except inside a transaction, which keeps one connection from BEGIN to COMMIT or ROLLBACK. An
 * isolate that ends leaves nothing behind: its open transactions are rolled back, their
 * connections given back.
 */
export class DatabaseBridge {
  /** Per isolate: its connection number → the real connection its transaction holds. */
  private readonly held = new Map<object, Map<number, unknown>>();

  constructor(private readonly store: ContentStore) {}

  private get client(): KnexClient {
    return this.store.database.knex.client as unknown as KnexClient;
  }

  /** Runs one query of `owner`'s (an isolate) on connection `conn` of its own. */
  query(owner: object, conn: number, sql: string, bindings: unknown[], options: unknown): Promise<unknown> {
    return this.store.run(async () => {
      const client = this.client;
      let held = this.held.get(owner)?.get(conn);
      if (held === undefined && BEGINS.test(sql)) {
        held = await client.acquireConnection();
        let mine = this.held.get(owner);
        if (mine === undefined) this.held.set(owner, (mine = new Map()));
        mine.set(conn, held);
      }
      const values = fromWire(Array.isArray(bindings) ? bindings : []) as unknown[];
      // A failed statement is noted as Knex notes its own: a write or COMMIT whose connection was
      // lost after it was sent answers DATABASE_OUTCOME_UNKNOWN (lib/db/outcome.ts).
      const failed = (error: unknown): never => {
        noteFailedStatement(error, { sql, inTransaction: held !== undefined });
        throw error;
      };
      if (held !== undefined) {
        try {
          return result(await client._query(held, { sql, bindings: values, options }).catch(failed));
        } finally {
          if (ENDS.test(sql)) this.giveBack(owner, conn, false);
        }
      }
      const connection = await client.acquireConnection();
      try {
        return result(await client._query(connection, { sql, bindings: values, options }).catch(failed));
      } finally {
        await client.releaseConnection(connection);
      }
    });
  }

  /** The isolate closed connection `conn`: a transaction it left open is rolled back. */
  release(owner: object, conn: number): Promise<void> {
    return this.giveBack(owner, conn, true);
  }

  /** The isolate ended: every transaction it held is rolled back and its connection given back. */
  async releaseAll(owner: object): Promise<void> {
    const mine = this.held.get(owner);
    if (mine === undefined) return;
    await Promise.all([...mine.keys()].map((conn) => this.giveBack(owner, conn, true)));
    this.held.delete(owner);
  }

  private async giveBack(owner: object, conn: number, rollBack: boolean): Promise<void> {
    const mine = this.held.get(owner);
    const connection = mine?.get(conn);
    if (connection === undefined) return;
    mine?.delete(conn);
    const client = this.client;
    if (rollBack) await client._query(connection, { sql: 'ROLLBACK', bindings: [] }).catch(() => {});
    await client.releaseConnection(connection);
  }
}

/** The driver's answer as pg shapes it (PGlite names `affectedRows`, and no command), tagged for the wire. */
function result(obj: { response: unknown }): unknown {
  let response = obj.response as DriverResult | DriverResult[];
  // Several statements in one text: pg answers each; the last is the query's.
  if (Array.isArray(response)) response = response[response.length - 1] ?? {};
  const answer: WireQueryResult = { rowCount: response.rowCount ?? response.affectedRows ?? null, rows: response.rows ?? [] };
  if (typeof response.command === 'string') answer.command = response.command;
  return toWire(answer);
}

/**
 * Inside an isolate: a Knex instance whose queries run on the service's pool. Knex builds and
 * compiles every query here, as Postgres's dialect; only the SQL text and its bindings cross, and
 * the rows come back. Connections are the isolate's own numbers: the service gives a transaction
 * one real connection from BEGIN to COMMIT, and any other query whichever connection is free.
 */
import type { Knex } from 'knex';
import { BcmsHttpError } from '../http/errors';
import type { Ask, WireQueryResult } from './protocol';
import { fromWire, toWire } from './wire';

type AskService = (ask: Ask) => Promise<unknown>;

interface BridgeConnection {
  id: number;
}

interface QueryObject {
  sql: string;
  bindings?: unknown[];
  options?: unknown;
  method?: string;
  response?: unknown;
}

/** A Knex on the service's database, through `ask`. Knex is loaded now, not with the isolate: most handlers never query. */
export function createBridgeKnex(ask: AskService): Knex {
  const knexFactory = require('knex') as (config: Knex.Config) => Knex;
  // Knex's Postgres dialect, extended below; Knex has no public class for it.
  const PostgresClient = require('knex/lib/dialects/postgres') as new (config: Knex.Config) => object;
  let next = 0;
  class BridgeClient extends PostgresClient {
    // No driver in the isolate: nothing here connects to a database.
    _driver(): object {
      return {};
    }
    async acquireRawConnection(): Promise<BridgeConnection> {
      return { id: ++next };
    }
    async destroyRawConnection(connection: BridgeConnection): Promise<void> {
      await ask({ op: 'release', conn: connection.id });
    }
    validateConnection(): boolean {
      return true;
    }
    async _query(connection: BridgeConnection, obj: QueryObject): Promise<QueryObject> {
      if (!obj.sql) throw new Error('The query is empty');
      const result = fromWire(
        await ask({ op: 'query', conn: connection.id, sql: obj.sql, bindings: toWire(obj.bindings ?? []) as unknown[], options: obj.options }).catch((error: unknown) => {
          throw keepingItsMessage(error);
        }),
      ) as WireQueryResult;
      // The embedded database names no command: Knex reads it from the query's method, as knex-pglite does.
      result.command ??= obj.method === 'first' || obj.method === 'pluck' ? 'SELECT' : (obj.method ?? '').toUpperCase();
      obj.response = result;
      return obj;
    }
    async _stream(connection: BridgeConnection, obj: QueryObject, stream: NodeJS.WritableStream): Promise<void> {
      try {
        const { response } = await this._query(connection, obj);
        for (const row of (response as WireQueryResult).rows) stream.write(row as never);
      } catch (error) {
        stream.emit('error', error);
      }
      stream.end();
    }
  }
  // `connection: {}` makes Knex set up its pool; `version` keeps it from asking the server.
  return knexFactory({ client: BridgeClient as never, connection: {}, version: '16', pool: { min: 0, max: 20, idleTimeoutMillis: 10_000 } });
}

/**
 * Knex writes a failed query's SQL before its error's message. The service's own answers (503
 * DATABASE_UNAVAILABLE, 400 TOO_LARGE) go to the client as they are: their message stays theirs.
 */
function keepingItsMessage(error: unknown): unknown {
  if (error instanceof BcmsHttpError) {
    const message = error.message;
    Object.defineProperty(error, 'message', { get: () => message, set: () => {}, configurable: true, enumerable: false });
  }
  return error;
}

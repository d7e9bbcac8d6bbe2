import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import type { Logger } from '../logger';

/** The `database` option: a Knex instance, a Postgres URL, or an embedded PGlite directory. */
export type DatabaseOption = Knex | string | { pglite: string };

export interface Database {
  readonly knex: Knex;
  /** For logs: `postgres://host:port/db` (no password), `pglite:DIR`, or `knex instance`. */
  readonly description: string;
  /** Closes what this router opened; a Knex instance the host passed in stays open. */
  close(): Promise<void>;
}

/** Where the embedded database lives when nothing is configured: `.bcms/data` under the working directory. */
export const DEFAULT_PGLITE_DIR = path.join('.bcms', 'data');

/** `option`, else `DATABASE_URL`, else embedded PGlite in `.bcms/data`. */
export function openDatabase(option: DatabaseOption | undefined, env: NodeJS.ProcessEnv = process.env, logger?: Logger): Database {
  const log = knexLog(logger);
  const chosen = option ?? (env.DATABASE_URL ? env.DATABASE_URL : { pglite: path.resolve(DEFAULT_PGLITE_DIR) });
  if (isKnex(chosen)) {
    return { knex: chosen, description: 'knex instance', close: async () => {} };
  }
  if (typeof chosen === 'string') return openPostgres(chosen, log);
  if (chosen !== null && typeof chosen === 'object' && typeof chosen.pglite === 'string' && chosen.pglite !== '') {
    return openPglite(chosen.pglite, log);
  }
  throw new TypeError('option database must be a Knex instance, a Postgres URL, or { pglite: DIR } ("memory://" for in memory)');
}

function isKnex(value: unknown): value is Knex {
  return typeof value === 'function' && typeof (value as Knex).raw === 'function' && typeof (value as Knex).client === 'object';
}

/** Knex's own messages (connection retries, warnings) go to the router's logger, not to console. */
function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  if (logger === undefined) return undefined;
  const to = (level: 'warn' | 'error' | 'debug') => (message: unknown) => logger[level]({ knex: String(message) }, 'bcms-extensions: knex');
  return { warn: to('warn'), error: to('error'), deprecate: to('warn'), debug: to('debug') };
}

function openPostgres(url: string, log: Knex.Config['log']): Database {
  let description: string;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') throw new Error();
    description = `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    throw new TypeError('option database: a string must be a Postgres URL (postgres://user@host:5432/db)');
  }
  const knex = knexFactory({
    client: 'pg',
    // Fail fast while the server is down or hung, so callers get a 503 in seconds, not after knex's
    // 60 s, and a connection that stops answering is given up (and back to the pool) after 30 s.
    connection: { connectionString: url, connectionTimeoutMillis: 5_000, query_timeout: 30_000, keepAlive: true } as never,
    pool: { min: 0, max: 10 },
    acquireConnectionTimeout: 10_000,
    log,
  });
  return { knex, description, close: () => knex.destroy() };
}

function openPglite(dir: string, log: Knex.Config['log']): Database {
  const inMemory = dir.startsWith('memory://');
  const dataDir = inMemory ? dir : path.resolve(dir);
  if (!inMemory) fs.mkdirSync(dataDir, { recursive: true });
  // Loaded only when used: PGlite is a WASM build of Postgres, seconds and hundreds of MB to start.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { PGlite } = require('@electric-sql/pglite') as typeof import('@electric-sql/pglite');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ClientPgLite = require('knex-pglite') as typeof import('knex-pglite');
  const pglite = new PGlite(dataDir);
  const knex = knexFactory({ client: ClientPgLite as unknown as typeof Knex.Client, connection: { pglite } as never, log });
  const close = async (): Promise<void> => {
    // knex-pglite closes PGlite with its one connection; a database never queried has none.
    await knex.destroy();
    if (!pglite.closed) await pglite.close();
  };
  return { knex, description: `pglite:${dataDir}`, close };
}

import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';

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
export function openDatabase(option: DatabaseOption | undefined, env: NodeJS.ProcessEnv = process.env): Database {
  const chosen = option ?? (env.DATABASE_URL ? env.DATABASE_URL : { pglite: path.resolve(DEFAULT_PGLITE_DIR) });
  if (isKnex(chosen)) {
    return { knex: chosen, description: 'knex instance', close: async () => {} };
  }
  if (typeof chosen === 'string') return openPostgres(chosen);
  if (chosen !== null && typeof chosen === 'object' && typeof chosen.pglite === 'string' && chosen.pglite !== '') {
    return openPglite(chosen.pglite);
  }
  throw new TypeError('option database must be a Knex instance, a Postgres URL, or { pglite: DIR } ("memory://" for in memory)');
}

function isKnex(value: unknown): value is Knex {
  return typeof value === 'function' && typeof (value as Knex).raw === 'function' && typeof (value as Knex).client === 'object';
}

function openPostgres(url: string): Database {
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
    // Fail fast while the server is down, so callers get a 503 in seconds, not after knex's 60 s.
    connection: { connectionString: url, connectionTimeoutMillis: 5_000 },
    pool: { min: 0, max: 10 },
    acquireConnectionTimeout: 10_000,
  });
  return { knex, description, close: () => knex.destroy() };
}

function openPglite(dir: string): Database {
  const inMemory = dir.startsWith('memory://');
  const dataDir = inMemory ? dir : path.resolve(dir);
  if (!inMemory) fs.mkdirSync(dataDir, { recursive: true });
  // Loaded only when used: PGlite is a WASM build of Postgres, seconds and hundreds of MB to start.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { PGlite } = require('@electric-sql/pglite') as typeof import('@electric-sql/pglite');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ClientPgLite = require('knex-pglite') as typeof import('knex-pglite');
  const pglite = new PGlite(dataDir);
  const knex = knexFactory({ client: ClientPgLite as unknown as typeof Knex.Client, connection: { pglite } as never });
  const close = async (): Promise<void> => {
    // knex-pglite closes PGlite with its one connection; a database never queried has none.
    await knex.destroy();
    if (!pglite.closed) await pglite.close();
  };
  return { knex, description: `pglite:${dataDir}`, close };
}

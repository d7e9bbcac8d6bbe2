import fs from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';

/** Shipped with the package; absolute, so the caller's working directory never matters. */
export const MIGRATIONS_DIRECTORY = path.resolve(__dirname, '..', '..', 'migrations');
/** Our own table, so a host's `knex_migrations` is never touched. */
export const MIGRATIONS_TABLE = 'bcms_migrations';

const LOCK_RETRIES = 50;
const LOCK_WAIT_MS = 200;

/**
 * Brings the package's tables up to date; resolves to the names of the migrations it ran.
 * Two instances starting together may race for knex's migration lock: the loser waits and tries
 * again, and then finds nothing left to run.
 *
 * @example
 * import knex from 'knex';
 * await migrate(knex({ client: 'pg', connection: process.env.DATABASE_URL }));
 */
export async function migrate(knex: Knex): Promise<string[]> {
  if (await upToDate(knex)) return [];
  for (let attempt = 1; ; attempt++) {
    try {
      const [, applied] = (await knex.migrate.latest({
        directory: MIGRATIONS_DIRECTORY,
        tableName: MIGRATIONS_TABLE,
        loadExtensions: ['.js'],
      })) as [number, string[]];
      return applied;
    } catch (error) {
      if (!isMigrationRace(error)) throw error;
      if (await removeDuplicateLockRows(knex)) continue;
      if (attempt >= LOCK_RETRIES) {
        throw new Error(
          `the ${MIGRATIONS_TABLE} lock has been held for ${(LOCK_RETRIES * LOCK_WAIT_MS) / 1000} s. If no other instance is migrating ` +
            '(a migration that crashed leaves the lock taken), free it with `bcms-ext migrate --unlock`',
          { cause: error },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, LOCK_WAIT_MS));
    }
  }
}

/**
 * Whether every migration of the directory, and no other, is recorded, and the lock is free: then
 * knex's migrator, which takes and frees the lock in a transaction around a dozen queries, would
 * find nothing to do. One query instead (every start on existing data paid ~0.15 s for them on
 * PGlite). Anything else (a new database, a migration to run, a held lock, a migration the
 * directory lacks) goes through knex's migrator, which does and says what it always did.
 */
async function upToDate(knex: Knex): Promise<boolean> {
  const files = fs.readdirSync(MIGRATIONS_DIRECTORY).filter((name) => name.endsWith('.js'));
  let row: { locked: number | null; names: string[] | null } | undefined;
  try {
    const result = (await knex.raw('select (select max(is_locked) from ??) as locked, (select json_agg(name) from ??) as names', [`${MIGRATIONS_TABLE}_lock`, MIGRATIONS_TABLE])) as {
      rows: (typeof row)[];
    };
    row = result.rows[0];
  } catch (error) {
    // undefined_table: a database never migrated. Other errors are knex's migrator's to meet and report.
    if ((error as { code?: unknown }).code === '42P01') return false;
    throw error;
  }
  if (row === undefined || row.locked !== 0 || !Array.isArray(row.names)) return false;
  const recorded = new Set(row.names);
  return recorded.size === files.length && files.every((name) => recorded.has(name));
}

/** Frees the migration lock that a crashed migration left taken (`bcms-ext migrate --unlock`). */
export async function unlockMigrations(knex: Knex): Promise<void> {
  await knex.migrate.forceFreeMigrationsLock({ directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] });
}

/**
 * Two instances creating the lock table at the same moment can both find it empty and both insert
 * its one row. knex then takes the lock by updating the free row and insisting on exactly one: with
 * two free rows, it says "already locked" to everyone, for ever (a CI run met it: two routers on a
 * new schema). Free duplicates are that race's leftovers, and are removed; then knex is asked again.
 */
async function removeDuplicateLockRows(knex: Knex): Promise<boolean> {
  const lockTable = `${MIGRATIONS_TABLE}_lock`;
  const rows = (await knex(lockTable)
    .select('index', 'is_locked')
    .orderBy('index')
    .catch(() => [])) as { index: number; is_locked: number }[];
  const first = rows[0];
  if (first === undefined || rows.length < 2 || rows.some((row) => row.is_locked !== 0)) return false;
  await knex(lockTable).where('index', '>', first.index).where('is_locked', 0).del();
  return true;
}

/** The lock is taken, or the other instance created the migrations table a moment before us. */
function isMigrationRace(error: unknown): boolean {
  const { name, code, message } = (error ?? {}) as { name?: string; code?: string; message?: string };
  // 23505 / 42710: the table's row type, created by the other instance's create table a moment before.
  return name === 'MigrationLocked' || code === '23505' || code === '42P07' || code === '42710' || /already locked/i.test(message ?? '');
}

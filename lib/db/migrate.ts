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

/** Frees the migration lock that a crashed migration left taken (`bcms-ext migrate --unlock`). */
export async function unlockMigrations(knex: Knex): Promise<void> {
  await knex.migrate.forceFreeMigrationsLock({ directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] });
}

/** The lock is taken, or the other instance created the migrations table a moment before us. */
function isMigrationRace(error: unknown): boolean {
  const { name, code, message } = (error ?? {}) as { name?: string; code?: string; message?: string };
  return name === 'MigrationLocked' || code === '23505' || code === '42P07' || /already locked/i.test(message ?? '');
}

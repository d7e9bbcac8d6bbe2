import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { main } from '../../lib/cli/main';
import { openDatabase } from '../../lib/db/connection';
import { MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE } from '../../lib/db/migrate';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env: {} }, out, err };
}

describe('bcms-ext migrate', () => {
  test('a new embedded database is made up to date', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cli-new-'));
    const run = capture();
    expect(await main(['migrate', '--pglite', dir], run.io)).toBe(0);
    expect(run.out.join('')).toContain('Already up to date.');
    const database = openDatabase({ pglite: dir });
    expect(await database.knex.schema.hasTable('bcms_entries')).toBe(true);
    await database.close();
  }, 60_000);

  test('migrates an embedded database, then finds it up to date', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cli-'));
    // Made from the migrated template: taken back first, so that there is something to apply.
    const made = openDatabase({ pglite: dir });
    await made.knex.migrate.rollback({ directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] }, true);
    await made.close();
    const first = capture();
    expect(await main(['migrate', '--pglite', dir], first.io)).toBe(0);
    expect(first.out.join('')).toContain('Applied: 20261122000000_content_store.js');
    const second = capture();
    expect(await main(['migrate', '--pglite', dir], second.io)).toBe(0);
    expect(second.out.join('')).toContain('Already up to date.');
    const database = openDatabase({ pglite: dir });
    expect(await database.knex.schema.hasTable('bcms_entries')).toBe(true);
    await database.close();
  }, 60_000);

  test('a lock left taken by a crash: exit 1 saying to run --unlock, which frees it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cli-lock-'));
    expect(await main(['migrate', '--pglite', dir], capture().io)).toBe(0);
    const database = openDatabase({ pglite: dir });
    await database.knex('bcms_migrations_lock').update({ is_locked: 1 });
    await database.close();

    const stuck = capture();
    expect(await main(['migrate', '--pglite', dir], stuck.io)).toBe(1);
    expect(stuck.err.join('')).toMatch(/the bcms_migrations lock has been held for 10 s.*bcms-ext migrate --unlock/);
    expect(stuck.err.join('')).not.toMatch(/reachable/);

    const unlocked = capture();
    expect(await main(['migrate', '--pglite', dir, '--unlock'], unlocked.io)).toBe(0);
    expect(unlocked.out.join('')).toMatch(/Freed the bcms_migrations lock\.\nMigrating .*\nAlready up to date\./);
  }, 60_000);

  test('an unreachable server: exit 1 and what to do next', async () => {
    const run = capture();
    expect(await main(['migrate', '--database', 'postgres://postgres@127.0.0.1:1/none'], run.io)).toBe(1);
    expect(run.err.join('')).toMatch(/Check that the database is running and reachable/);
  });

  test('DATABASE_URL from a .env in the folder, as the other commands read it (here a server that is not there)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cli-env-'));
    fs.writeFileSync(path.join(dir, '.env'), 'DATABASE_URL=postgres://postgres@127.0.0.1:1/from_env\n');
    const run = capture();
    expect(await main(['migrate'], { ...run.io, cwd: dir })).toBe(1);
    expect(run.out.join('')).toBe('Migrating postgres://127.0.0.1:1/from_env (table bcms_migrations)...\n');
    expect(run.err.join('')).toMatch(/Check that the database is running and reachable/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('bad arguments and unknown commands: exit 1 with usage', async () => {
    const bad = capture();
    expect(await main(['migrate', '--url'], bad.io)).toBe(1);
    expect(bad.err.join('')).toMatch(/expected --database URL or --pglite DIR/);
    const unknown = capture();
    expect(await main(['deploy-everything'], unknown.io)).toBe(1);
    expect(unknown.err.join('')).toMatch(/unknown command "deploy-everything"/);
    const help = capture();
    expect(await main(['help'], help.io)).toBe(0);
    expect(help.out.join('')).toMatch(/Usage: bcms-ext/);
  });

  test('--version prints the package version; <command> --help (or -h) prints that command alone, exit 0, and runs nothing', async () => {
    const version = capture();
    expect(await main(['--version'], version.io)).toBe(0);
    expect(version.out.join('')).toBe(`${(JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version}\n`);
    for (const [argv, shows] of [
      [['keys', '--help'], /^Usage: bcms-ext keys\n\n {2}keys create --name NAME/],
      [['migrate', '-h'], /^Usage: bcms-ext migrate\n\n {2}migrate \[--database URL/],
      [['rollback', 'NAME', '--help'], /^Usage: bcms-ext rollback\n[\s\S]* {2}rollback NAME \[--kind KIND\]/],
      [['jobs', '--help'], /^Usage: bcms-ext jobs\n[\s\S]* {2}jobs \[NAME\]/],
      [['create', 'plugin', '-h'], /^Usage: bcms-ext create\n\n {2}create plugin NAME/],
    ] as const) {
      const help = capture();
      expect([argv.join(' '), await main(argv, help.io), help.err.join('')]).toEqual([argv.join(' '), 0, '']);
      expect(help.out.join('')).toMatch(shows);
      // Only its own lines: not another command's.
      expect(help.out.join('')).not.toMatch(/signing-key \[--out FILE\]/);
    }
  });
});

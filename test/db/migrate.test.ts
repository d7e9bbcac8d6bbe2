import os from 'node:os';
import { migrate, MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE } from '../../lib';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';

describe.each(backends())('migrations on %s', (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    if (backend === 'pglite') {
      // A new embedded database is made from a template that is already migrated (see
      // test/db/embedded.test.ts): taken back to a database without our tables, as a server's is.
      await database.knex.migrate.rollback({ directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] }, true);
      expect(await database.knex.schema.hasTable('bcms_templates')).toBe(false);
    }
  });
  afterAll(() => database.close());

  test("a host's own knex migrations are untouched, and ours keep their own table", async () => {
    const knex = database.knex;
    // The host's migration history, in knex's default table.
    await knex.schema.createTable('knex_migrations', (t) => {
      t.increments('id');
      t.string('name');
      t.integer('batch');
      t.timestamp('migration_time');
    });
    await knex('knex_migrations').insert({ name: '001_host_users.js', batch: 1, migration_time: new Date() });

    // From another working directory: the directory is absolute.
    const cwd = process.cwd();
    process.chdir(os.tmpdir());
    let applied: string[];
    try {
      applied = await migrate(knex);
    } finally {
      process.chdir(cwd);
    }
    expect(MIGRATIONS_TABLE).toBe('bcms_migrations');
    const ours = [
      '20261122000000_content_store.js',
      '20261122010000_api_keys.js',
      '20261122020000_deployments.js',
      '20261123000000_documents.js',
      '20261123010000_bcms_client_keys.js',
      '20261123020000_text_ids.js',
      '20261123030000_api_key_plugins.js',
      '20261125000000_deployment_load_errors.js',
      '20261126000000_api_key_expiry.js',
      '20261127000000_deployment_signatures.js',
      '20261128000000_idempotency_keys.js',
      '20261129000000_rate_limits.js',
      '20261129010000_extension_role.js',
      '20261129020000_events_and_jobs.js',
      '20261129030000_deployment_kinds_events_jobs.js',
    ];
    expect(applied).toEqual(ours);
    expect((await knex('bcms_migrations').select('name').orderBy('id')).map((row) => row.name)).toEqual(ours);
    expect(await knex('knex_migrations').select('name')).toEqual([{ name: '001_host_users.js' }]);
    expect(await knex.schema.hasTable('bcms_templates')).toBe(true);
    expect(await knex.schema.hasTable('bcms_entries')).toBe(true);
  });

  test('running again, or twice at once, applies nothing more', async () => {
    const [a, b] = await Promise.all([migrate(database.knex), migrate(database.knex)]);
    expect([...a, ...b]).toEqual([]);
    expect(await migrate(database.knex)).toEqual([]);
  });

  test('a lock table with two free rows (two instances created it at once) is repaired, not "locked" for ever', async () => {
    const knex = database.knex;
    const config = { directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] };
    const [last] = (await knex(MIGRATIONS_TABLE).select('name').orderBy('id', 'desc').limit(1)) as { name: string }[];
    await knex.migrate.down(config); // something to apply, so that knex's migrator (and its lock) runs
    await knex(`${MIGRATIONS_TABLE}_lock`).insert({ is_locked: 0 });
    expect(await migrate(knex)).toEqual([last!.name]);
    expect(await knex(`${MIGRATIONS_TABLE}_lock`).select('is_locked')).toEqual([{ is_locked: 0 }]);
  });

  test('template_id is indexed and references templates; nested data is JSONB', async () => {
    const columns = await database.knex('information_schema.columns').select('column_name', 'data_type').where({ table_name: 'bcms_entries' }).whereRaw('table_schema = current_schema()');
    const types = Object.fromEntries(columns.map((c: { column_name: string; data_type: string }) => [c.column_name, c.data_type]));
    expect(types).toMatchObject({ meta: 'jsonb', content: 'jsonb', template_id: 'text', created_at: 'timestamp with time zone' });
    const indexes = await database.knex.raw("select indexdef from pg_indexes where tablename = 'bcms_entries' and schemaname = current_schema()");
    expect(indexes.rows.map((r: { indexdef: string }) => r.indexdef).join('\n')).toMatch(/\(template_id, created_at, seq\)/);
    const fks = await database.knex.raw("select confdeltype from pg_constraint where contype = 'f' and conrelid = 'bcms_entries'::regclass");
    expect(fks.rows).toEqual([{ confdeltype: 'c' }]);
  });
});

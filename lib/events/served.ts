import type { Knex } from 'knex';

/**
 * Records what an instance serves (`bcms_event_handlers` or `bcms_jobs`, one row a name, merged),
 * and marks inactive the deployed ones that were undeployed: versions of them were deployed and
 * none is active now, as the deployments table says (not this instance's view of it).
 */
export async function recordServed(db: Knex, table: 'bcms_event_handlers' | 'bcms_jobs', kind: 'event' | 'job', rows: Record<string, unknown>[]): Promise<void> {
  if (rows.length > 0) {
    await db(table)
      .insert(rows.map((row) => ({ ...row, active: true, seen_at: db.raw('clock_timestamp()') })))
      .onConflict('name')
      .merge();
  }
  await db(table)
    .where({ source: 'deployed', active: true })
    .whereIn('name', db('bcms_deployments').select('name').where({ kind }))
    .whereNotIn('name', db('bcms_deployments').select('name').where({ kind, active: true }))
    .update({ active: false });
}

import type { Knex } from 'knex';
import { until as waitUntil } from './wait';

/** Far ahead: no engine claims the pending, retrying or running rows these tests write. */
export const LATER = new Date('2099-01-01T00:00:00.000Z');
const minutesAgo = (minutes: number): Date => new Date(Date.now() - minutes * 60_000);

/**
 * What the engine would have written: three handlers (one inactive), 30 events delivered to
 * `entry-log` in every status, 3 failed deliveries to `audit`; two jobs (one inactive) with runs.
 */
export async function seedEventsAndJobs(knex: Knex): Promise<void> {
  await knex('bcms_event_handlers').insert([
    { name: 'entry-log', scope: 'ENTRY', method: 'ALL', source: 'registry', active: true },
    { name: 'audit', scope: 'ALL', method: 'ALL', source: 'deployed', active: true },
    { name: 'gone', scope: 'TEMPLATE', method: 'DELETE', source: 'deployed', active: false },
  ]);
  const statuses = ['delivered', 'failed', 'pending', 'retrying', 'running', 'delivered'] as const;
  for (let i = 0; i < 30; i++) {
    const eventId = ((await knex.raw("select nextval('bcms_event_ids') as id")) as { rows: { id: string }[] }).rows[0]?.id;
    const event = { event_id: eventId, scope: 'ENTRY', method: i % 2 === 0 ? 'ADD' : 'UPDATE', doc: `ENTRY:e${i}`, payload: JSON.stringify({ n: i }) };
    const status = statuses[i % statuses.length] as (typeof statuses)[number];
    const finished = status === 'delivered' || status === 'failed';
    await knex('bcms_event_deliveries').insert({
      ...event,
      handler: 'entry-log',
      status,
      attempts: status === 'failed' ? 5 : status === 'pending' ? 0 : 1,
      run_at: finished ? minutesAgo(60 - i) : LATER,
      lease_until: status === 'running' ? LATER : null,
      created_at: minutesAgo(60 - i),
      started_at: status === 'pending' ? null : minutesAgo(60 - i),
      finished_at: finished ? minutesAgo(60 - i) : null,
      duration_ms: finished ? 10 + i : null,
      error: status === 'failed' || status === 'retrying' ? `Error: boom ${i}` : null,
    });
    if (i < 3) {
      await knex('bcms_event_deliveries').insert({ ...event, handler: 'audit', status: 'failed', attempts: 5, error: `TypeError: audit ${i}`, finished_at: minutesAgo(1), duration_ms: 7 });
    }
  }
  await knex('bcms_jobs').insert([
    { name: 'nightly', cron: '0 3 * * *', source: 'deployed', active: true },
    { name: 'paused', cron: '*/5 * * * *', source: 'registry', active: false },
  ]);
  const day = (n: number) => new Date(Date.UTC(2026, 10, n, 3));
  await knex('bcms_job_runs').insert([
    { job: 'nightly', tick_at: day(20), status: 'succeeded', instance: 'a', started_at: day(20), finished_at: new Date(day(20).getTime() + 1500), duration_ms: 1500 },
    { job: 'nightly', tick_at: day(21), status: 'failed', instance: 'b', started_at: day(21), finished_at: new Date(day(21).getTime() + 20), duration_ms: 20, error: 'Error: no network' },
    {
      job: 'nightly',
      tick_at: day(22),
      status: 'timed_out',
      instance: 'a',
      started_at: day(22),
      finished_at: new Date(day(22).getTime() + 300_000),
      duration_ms: 300_000,
      error: 'ran past jobTimeoutMs (300000 ms)',
    },
    { job: 'nightly', tick_at: day(23), status: 'skipped', instance: 'b', started_at: day(23), finished_at: day(23), duration_ms: 0 },
    { job: 'nightly', tick_at: day(24), status: 'running', instance: 'a', started_at: day(24), lease_until: LATER },
  ]);
}

/**
 * Waits until `check` holds (polling every 25 ms): deliveries and ticks come when they come, later
 * on a loaded machine, so there is no limit but the test's own (Jest's). `_what` says, to the
 * reader, what is awaited.
 */
export async function until(check: () => boolean | Promise<boolean>, _what: string): Promise<void> {
  await waitUntil(check, 25);
}

/**
 * What the event and job tables say, for people: each event handler with its recent deliveries,
 * each job with its recent runs (`GET /api/extensions/event-deliveries`, `GET /api/extensions/jobs`,
 * `bcms-ext events`, `bcms-ext jobs`, the shell's Developers section). Reads only: the engine
 * writes these rows.
 */
import type { Knex } from 'knex';
import { nextTick } from './check';

export const DELIVERY_STATUSES = ['pending', 'running', 'retrying', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export const RUN_STATUSES = ['running', 'succeeded', 'failed', 'timed_out', 'skipped'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Deliveries or runs listed per handler or job: 20 unless asked, never more than 200 (one answer stays small). */
export const LIST_LIMIT = Object.freeze({ default: 20, max: 200 });

/** One delivery of one event to one handler. Times are ISO 8601 (UTC), or null before they happen. */
export interface ListedDelivery {
  /** bigint in the database: a string, so that no id is rounded. */
  id: string;
  eventId: string;
  scope: string;
  method: string;
  /** `ENTRY:<id>`, `TEMPLATE:<id>`; null for a custom emit. */
  doc: string | null;
  status: DeliveryStatus;
  attempts: number;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  /** When it is (or was) due: after a failed attempt, when it is tried again. */
  runAt: string;
  /** The last attempt's error, or null. */
  error: string | null;
}

export interface ListedHandler {
  name: string;
  scope: string;
  method: string;
  source: 'registry' | 'deployed';
  active: boolean;
  /** When an instance last named it: a registry handler no instance has named for an hour gets no new deliveries. */
  seenAt: string;
  /** Every delivery of the handler, by status (not only those listed). */
  counts: Record<DeliveryStatus, number>;
  /** Most recent first. */
  deliveries: ListedDelivery[];
}

export interface ListedRun {
  id: string;
  tickAt: string;
  status: RunStatus;
  /** The instance that ran it (or skipped it). */
  instance: string | null;
  startedAt: string;
  finishedAt: string | null;
  durationMs: number | null;
  error: string | null;
}

export interface ListedJob {
  name: string;
  /** Its five cron fields, joined by spaces. */
  cron: string;
  source: 'registry' | 'deployed';
  active: boolean;
  seenAt: string;
  /** The next tick after now (an ISO time; ticks are read in the service's time zone), or null for an inactive job. */
  nextTickAt: string | null;
  /** Most recent tick first. */
  runs: ListedRun[];
}

/** pg gives timestamptz as a Date, int8 as a string; PGlite may give other JavaScript types: one form for the answer. */
function iso(value: unknown): string {
  return (value instanceof Date ? value : new Date(value as string)).toISOString();
}
const isoOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : iso(value));
const numberOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

/**
 * The next tick of a job's cron after `after`, as the scheduler reads the fields (lib/events/check.ts); null for
 * fields cron-parser refuses (the job then never runs, and the list must still answer).
 */
export function nextTickAfter(cron: string, after: Date): Date | null {
  try {
    return nextTick(cron, after);
  } catch {
    return null;
  }
}

/** Each handler (or the one named), by name, with its counts and its `limit` most recent deliveries (of one status, if asked). */
export async function listEventHandlers(knex: Knex, query: { limit: number; handler?: string; status?: DeliveryStatus }): Promise<ListedHandler[]> {
  const { limit, handler, status } = query;
  const handlers = await knex('bcms_event_handlers')
    .select('name', 'scope', 'method', 'source', 'active', 'seen_at')
    .modify((builder) => void (handler === undefined ? builder : builder.where('name', handler)))
    .orderBy('name');
  if (handlers.length === 0) return [];
  const names = handlers.map((row: { name: string }) => row.name);

  const counted = await knex('bcms_event_deliveries').select('handler', 'status', knex.raw('count(*)::int as count')).whereIn('handler', names).groupBy('handler', 'status');
  // Per handler, its `limit` newest (the (handler, id) index walked backwards).
  const recent =
    limit === 0
      ? { rows: [] }
      : await knex.raw(
          `select d.id, d.event_id, d.handler, d.doc, d.status, d.attempts, d.created_at, d.started_at, d.finished_at, d.duration_ms, d.run_at, d.error,
                  d.scope, d.method
           from bcms_event_handlers h
           cross join lateral (
             select * from bcms_event_deliveries d
             where d.handler = h.name ${status === undefined ? '' : 'and d.status = ?'}
             order by d.id desc limit ?
           ) d
           where h.name = any(?::text[])
           order by h.name, d.id desc`,
          [...(status === undefined ? [] : [status]), limit, names],
        );

  const byName = new Map<string, ListedHandler>();
  for (const row of handlers) {
    byName.set(row.name, {
      name: row.name,
      scope: row.scope,
      method: row.method,
      source: row.source,
      active: row.active === true,
      seenAt: iso(row.seen_at),
      counts: { pending: 0, running: 0, retrying: 0, delivered: 0, failed: 0 },
      deliveries: [],
    });
  }
  for (const row of counted as { handler: string; status: string; count: number }[]) {
    const counts = byName.get(row.handler)?.counts as Record<string, number> | undefined;
    if (counts !== undefined) counts[row.status] = Number(row.count);
  }
  for (const row of (recent as { rows: Record<string, unknown>[] }).rows) {
    byName.get(row.handler as string)?.deliveries.push({
      id: String(row.id),
      eventId: String(row.event_id),
      scope: row.scope as string,
      method: row.method as string,
      doc: (row.doc as string | null) ?? null,
      status: row.status as DeliveryStatus,
      attempts: Number(row.attempts),
      createdAt: iso(row.created_at),
      startedAt: isoOrNull(row.started_at),
      finishedAt: isoOrNull(row.finished_at),
      durationMs: numberOrNull(row.duration_ms),
      runAt: iso(row.run_at),
      error: (row.error as string | null) ?? null,
    });
  }
  return [...byName.values()];
}

/** Each job (or the one named), by name, with its next tick and its `limit` most recent runs. */
export async function listJobs(knex: Knex, query: { limit: number; job?: string }, now = new Date()): Promise<ListedJob[]> {
  const { limit, job } = query;
  const jobs = await knex('bcms_jobs')
    .select('name', 'cron', 'source', 'active', 'seen_at')
    .modify((builder) => void (job === undefined ? builder : builder.where('name', job)))
    .orderBy('name');
  if (jobs.length === 0) return [];
  const names = jobs.map((row: { name: string }) => row.name);
  // Newest tick first: the (job, tick_at) unique index walked backwards.
  const recent =
    limit === 0
      ? { rows: [] }
      : await knex.raw(
          `select r.id, r.job, r.tick_at, r.status, r.instance, r.started_at, r.finished_at, r.duration_ms, r.error
           from bcms_jobs j
           cross join lateral (
             select * from bcms_job_runs r where r.job = j.name order by r.tick_at desc, r.id desc limit ?
           ) r
           where j.name = any(?::text[])
           order by j.name, r.tick_at desc, r.id desc`,
          [limit, names],
        );

  const byName = new Map<string, ListedJob>();
  for (const row of jobs) {
    const active = row.active === true;
    byName.set(row.name, {
      name: row.name,
      cron: row.cron,
      source: row.source,
      active,
      seenAt: iso(row.seen_at),
      nextTickAt: active ? isoOrNull(nextTickAfter(row.cron, now)) : null,
      runs: [],
    });
  }
  for (const row of (recent as { rows: Record<string, unknown>[] }).rows) {
    byName.get(row.job as string)?.runs.push({
      id: String(row.id),
      tickAt: iso(row.tick_at),
      status: row.status as RunStatus,
      instance: (row.instance as string | null) ?? null,
      startedAt: iso(row.started_at),
      finishedAt: isoOrNull(row.finished_at),
      durationMs: numberOrNull(row.duration_ms),
      error: (row.error as string | null) ?? null,
    });
  }
  return [...byName.values()];
}

import type { Knex } from 'knex';
import { listenOn } from '../deploy/listen';
import type { ContentStore } from '../db/store';
import { withDeadline } from '../http/deadline';
import type { Logger } from '../logger';
import { eventPayload } from './payload';
import type { BCMSEvent } from './types';

/** The channel `bcms_emit_event` notifies (migrations/20261129020000_events_and_jobs.js). */
export const EVENTS_CHANNEL = 'bcms_events';
/** Tries of a delivery, the first included; then it is `failed`. */
export const MAX_ATTEMPTS = 5;
/** The wait before the second try; doubled before each next (1, 2, 4, 8 s). */
const FIRST_BACKOFF_S = 1;
/** Deliveries claimed at once: the handlers of one claim run side by side. */
const BATCH = 100;
/** What the next claim waits for at most without a notification: retries that came due, leases that ran out. */
const POLL_MS = 1000;
/** Past the handler's time limit, how long a claim is kept before another instance may take the delivery (its instance died). */
const LEASE_MARGIN_MS = 10_000;

/** A handler this instance serves, by the name deliveries are kept under. */
export interface ServedEvent {
  name: string;
  source: 'registry' | 'deployed';
  event: BCMSEvent;
}

interface Claimed {
  id: string;
  handler: string;
  scope: string;
  method: string;
  doc: string | null;
  payload: unknown;
}

interface Outcome {
  id: string;
  error: string | null;
  durationMs: number;
}

/**
 * Delivers recorded events to the handlers this instance serves. Deliveries are rows
 * (`bcms_event_deliveries`) written with the event in the write's own transaction, so nothing
 * is lost to a process that dies: every instance claims due ones with `FOR UPDATE SKIP LOCKED`
 * (each runs once), one document's only once its earlier ones are finished (commit order),
 * and records the outcome; a handler that throws is tried again after 1, 2, 4 and 8 s, then the
 * delivery is `failed`. A claim that is never answered (its instance died) is taken again once
 * its lease runs out. NOTIFY wakes every instance at once; a poll covers the retries.
 */
export class EventDeliveries {
  private served = new Map<string, ServedEvent>();
  private pumping: Promise<void> | undefined;
  private again = false;
  private stopListening: (() => Promise<void>) | undefined;
  private poll: NodeJS.Timeout | undefined;
  private readonly running = new Set<Promise<void>>();
  private readonly finished: Outcome[] = [];
  private flushing: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    private readonly options: { instance: string; timeoutMs: number },
  ) {}

  /**
   * The handlers this instance serves from now on. Each is recorded (scope, method) so that
   * writes on any instance record deliveries for it; a deployed one is active while its
   * deployment is (the deployments table says, not this instance's view of it).
   */
  async serve(handlers: readonly ServedEvent[]): Promise<void> {
    this.served = new Map(handlers.map((handler) => [handler.name, handler]));
    await this.store.run(async (db) => {
      if (handlers.length > 0) {
        await db('bcms_event_handlers')
          .insert(handlers.map(({ name, source, event }) => ({ name, source, scope: String(event.config.scope), method: String(event.config.method), active: true, seen_at: db.raw('clock_timestamp()') })))
          .onConflict('name')
          .merge();
      }
      await db('bcms_event_handlers')
        .where({ source: 'deployed', active: true })
        .whereNotIn('name', db('bcms_deployments').select('name').where({ kind: 'event', active: true }))
        .update({ active: false });
    });
    if (handlers.length > 0) this.listen();
    this.wake();
  }

  /** Registry handlers stay given deliveries while an instance names them (an hour, DESIGN.md): called every few minutes. */
  async keepAlive(): Promise<void> {
    const names = [...this.served.values()].filter((handler) => handler.source === 'registry').map((handler) => handler.name);
    if (names.length === 0) return;
    await this.store.run((db) => db('bcms_event_handlers').whereIn('name', names).update({ seen_at: db.raw('clock_timestamp()'), active: true }));
  }

  /** Claims and runs what is due, until nothing is; a call while it runs makes it look once more. */
  wake(): void {
    if (this.closed || this.served.size === 0) return;
    if (this.pumping !== undefined) {
      this.again = true;
      return;
    }
    this.pumping = this.pump()
      .catch((error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not claim event deliveries (tried again within a second)'))
      .finally(() => {
        this.pumping = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private listen(): void {
    if (this.stopListening !== undefined || this.closed) return;
    this.stopListening = listenOn(this.store.database.knex, this.logger, { channel: EVENTS_CHANNEL, what: 'events', onNotify: () => this.wake(), onListening: () => this.wake() });
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.poll.unref();
  }

  private async pump(): Promise<void> {
    for (;;) {
      const room = BATCH - this.running.size;
      if (room <= 0 || this.closed) return;
      const claimed = await this.claim(room);
      for (const delivery of claimed) this.start(delivery);
      if (claimed.length < room) return;
    }
  }

  private claim(limit: number): Promise<Claimed[]> {
    const names = [...this.served.keys()];
    const leaseMs = this.options.timeoutMs + LEASE_MARGIN_MS;
    return this.store.run(async (db) => {
      const { rows } = (await db.raw(
        `with next as (
           select d.id from bcms_event_deliveries d
           where d.status in ('pending', 'retrying', 'running') and d.run_at <= clock_timestamp()
             and d.handler = any(?)
             and (d.status <> 'running' or d.lease_until < clock_timestamp())
             and not exists (
               select 1 from bcms_event_deliveries earlier
               where earlier.handler = d.handler and earlier.doc = d.doc and earlier.id < d.id
                 and earlier.status in ('pending', 'retrying', 'running'))
           order by d.run_at, d.id
           limit ?
           for update skip locked)
         update bcms_event_deliveries d
         set status = 'running', attempts = d.attempts + 1, started_at = clock_timestamp(),
             lease_until = clock_timestamp() + ? * interval '1 millisecond', instance = ?
         from next, bcms_events e
         where d.id = next.id and e.id = d.event_id
         returning d.id, d.handler, e.scope, e.method, e.doc, e.payload`,
        [names, limit, leaseMs, this.options.instance],
      )) as { rows: (Omit<Claimed, 'id'> & { id: string | number })[] };
      return rows.map((row) => ({ ...row, id: String(row.id) }));
    });
  }

  private start(delivery: Claimed): void {
    const served = this.served.get(delivery.handler);
    const began = Date.now();
    const run = (async (): Promise<void> => {
      let error: string | null = null;
      try {
        if (served === undefined) throw new Error(`the handler "${delivery.handler}" is no longer served here`);
        const data = { scope: delivery.scope, method: delivery.method, payload: eventPayload(delivery.scope, delivery.doc, delivery.payload) };
        const late = (): Error => new Error(`the handler ran past its time-out of ${this.options.timeoutMs} ms`);
        await withDeadline(Promise.resolve().then(() => served.event.handler(data)), this.options.timeoutMs, late);
      } catch (thrown) {
        error = thrown instanceof Error ? thrown.message : String(thrown);
        this.logger.warn({ handler: delivery.handler, delivery: delivery.id, err: thrown }, 'bcms-extensions: an event handler failed (tried again with backoff)');
      }
      this.finished.push({ id: delivery.id, error, durationMs: Date.now() - began });
      this.flush();
    })();
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /** Outcomes are written together: one statement for those that finished meanwhile. */
  private flush(): void {
    if (this.flushing !== undefined) return;
    this.flushing = (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      while (this.finished.length > 0) {
        const outcomes = this.finished.splice(0);
        await this.record(outcomes).catch((error: unknown) => {
          // Left running: its lease runs out and it is delivered again (at least once).
          this.logger.error({ err: error, deliveries: outcomes.length }, 'bcms-extensions: could not record event deliveries; they will be delivered again');
        });
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.finished.length > 0) this.flush();
      // What finished may have been holding a document's next delivery.
      this.wake();
    });
  }

  private record(outcomes: Outcome[]): Promise<void> {
    return this.store.run(async (db: Knex) => {
      await db.raw(
        `update bcms_event_deliveries d
         set status = case when v.error is null then 'delivered' when d.attempts >= ? then 'failed' else 'retrying' end,
             run_at = case when v.error is null then d.run_at else clock_timestamp() + ? * power(2, d.attempts - 1) * interval '1 second' end,
             finished_at = clock_timestamp(), duration_ms = v.duration_ms, error = v.error, lease_until = null
         from (select unnest(?::bigint[]) as id, unnest(?::text[]) as error, unnest(?::int[]) as duration_ms) v
         where d.id = v.id and d.status = 'running' and d.instance = ?`,
        [MAX_ATTEMPTS, FIRST_BACKOFF_S, outcomes.map((o) => o.id), outcomes.map((o) => o.error) as string[], outcomes.map((o) => o.durationMs), this.options.instance],
      );
    });
  }

  /** Stops claiming; waits for the handlers running now and records their outcomes. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.poll !== undefined) clearInterval(this.poll);
    await this.stopListening?.();
    await this.pumping;
    await Promise.allSettled([...this.running]);
    while (this.flushing !== undefined) await this.flushing;
  }
}

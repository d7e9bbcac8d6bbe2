import type { Knex } from 'knex';
import { listenOn } from '../deploy/listen';
import type { ContentStore } from '../db/store';
import { withDeadline } from '../http/deadline';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { eventPayload } from './payload';
import { recordServed } from './served';
import type { BCMSEvent } from './types';

/** The channel `bcms_record_event` notifies (migrations/20261129020000_events_and_jobs.js). */
export const EVENTS_CHANNEL = 'bcms_events';
/** Tries of a delivery, the first included; then it is `failed`. */
export const MAX_ATTEMPTS = 5;
/** The wait before the second try; doubled before each next (1, 2, 4, 8 s). */
const FIRST_BACKOFF_S = 1;
/** Deliveries claimed at once: the handlers of one claim run side by side. */
const BATCH = 500;
/** How long a wake-up waits before it claims: the writes of a busy moment are claimed in one statement. */
const GATHER_MS = 20;
/** Empty claims in a row (GATHER_MS apart) after which an instance waits for notifications again. */
const IDLE_CLAIMS = 10;
/** What the next claim waits for at most without a notification: retries that came due, leases that ran out. */
const POLL_MS = 1000;
/** Past the handler's time limit, how long a claim is kept before another instance may take the delivery (its instance died). */
const LEASE_MARGIN_MS = 10_000;

/** What is due: a handler's delivery not finished, not claimed (or its lease ran out), and the first of its document's not finished. */
const DUE = `d.status in ('pending', 'retrying', 'running') and d.run_at <= clock_timestamp()
  and d.handler = any(?)
  and (d.status <> 'running' or d.lease_until < clock_timestamp())
  and not exists (
    select 1 from bcms_event_deliveries earlier
    where earlier.handler = d.handler and earlier.doc = d.doc and earlier.id < d.id
      and earlier.status in ('pending', 'retrying', 'running'))`;

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
 * delivery is `failed`. A claim whose instance died is taken again once its lease ran out.
 * NOTIFY wakes idle instances at once; a poll covers the retries.
 */
export class EventDeliveries {
  private served = new Map<string, ServedEvent>();
  private pumping: Promise<void> | undefined;
  private gathering: NodeJS.Timeout | undefined;
  /** Claims in a row that found nothing: past IDLE_CLAIMS, the instance LISTENs rather than looks. */
  private idleClaims = 0;
  private again = false;
  private stopListening: (() => Promise<void>) | undefined;
  private poll: NodeJS.Timeout | undefined;
  /** Deliveries under way here, and the outcomes not yet recorded. */
  private readonly running = new Set<Promise<void>>();
  private inFlight = 0;
  private readonly finished: Outcome[] = [];
  private flushing: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    private readonly options: { instance: string; timeoutMs: number; metrics?: Pick<Metrics, 'delivery'> },
  ) {}

  /**
   * The handlers this instance serves from now on. Each is recorded (scope, method) so that
   * writes on any instance record deliveries for it.
   */
  async serve(handlers: readonly ServedEvent[]): Promise<void> {
    this.served = new Map(handlers.map((handler) => [handler.name, handler]));
    const rows = handlers.map(({ name, source, event }) => ({ name, source, scope: String(event.config.scope), method: String(event.config.method) }));
    await this.store.run((db) => recordServed(db, 'bcms_event_handlers', 'event', rows));
    if (handlers.length > 0) this.start();
    this.wake();
  }

  /** Registry handlers are given deliveries while an instance has named them within the hour (`bcms_record_event`): called every few minutes. */
  async keepAlive(): Promise<void> {
    const names = [...this.served.values()].filter((handler) => handler.source === 'registry').map((handler) => handler.name);
    if (names.length === 0) return;
    await this.store.run((db) =>
      db('bcms_event_handlers')
        .whereIn('name', names)
        .update({ seen_at: db.raw('clock_timestamp()'), active: true }),
    );
  }

  /**
   * Claims and runs what is due, until nothing is; a call while it runs makes it look once more.
   * It waits a few milliseconds first, so that the writes of a busy moment are claimed together.
   */
  wake(): void {
    if (this.closed || this.served.size === 0) return;
    if (this.pumping !== undefined) {
      this.again = true;
      return;
    }
    if (this.gathering !== undefined) return;
    this.gathering = setTimeout(() => {
      this.gathering = undefined;
      this.pumping = this.pump()
        .then((found) => this.pace(found))
        .catch((error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not claim event deliveries (tried again within a second)'))
        .finally(() => {
          this.pumping = undefined;
          if (this.again) {
            this.again = false;
            this.wake();
          }
        });
    }, GATHER_MS);
  }

  /**
   * While there is work, look again every few milliseconds and do not LISTEN; once claims come
   * back empty a few times, LISTEN again. A listening session makes every write that notifies
   * dearer (Postgres queues each notification for it: a sixth of the writes a second, measured),
   * and a busy instance would be woken for what it claims anyway.
   */
  private pace(found: boolean): void {
    if (found) {
      this.idleClaims = 0;
      this.setListening(false);
      this.again = true;
    } else if (++this.idleClaims < IDLE_CLAIMS) {
      this.again = true;
    } else {
      this.setListening(true);
    }
  }

  private setListening(on: boolean): void {
    if (on && this.stopListening === undefined && !this.closed) {
      this.stopListening = listenOn(this.store.database.knex, this.logger, { channel: EVENTS_CHANNEL, what: 'events', onNotify: () => this.wake(), onListening: () => this.wake() });
    } else if (!on && this.stopListening !== undefined) {
      const stop = this.stopListening;
      this.stopListening = undefined;
      void stop();
    }
  }

  private start(): void {
    if (this.poll !== undefined || this.closed) return;
    this.setListening(true);
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.poll.unref();
  }

  /** Claims while there is room; whether there was anything to claim (or no room: busy). */
  private async pump(): Promise<boolean> {
    let found = false;
    for (;;) {
      const room = BATCH - this.inFlight;
      if (room <= 0) return true;
      if (this.closed) return found;
      const claimed = await this.claimBatch(room);
      found ||= claimed > 0;
      if (claimed < room) return found;
    }
  }

  /**
   * Claims up to `limit` due deliveries and starts them side by side. Resolves to the number
   * claimed, once they are running. A claim is a `running` row with a lease, committed at once:
   * no connection is held while handlers run (they may need the pool themselves), and one whose
   * instance died is taken again by another once its lease ran out.
   */
  private async claimBatch(limit: number): Promise<number> {
    const names = [...this.served.keys()];
    const claimed = await this.bookkeeping(async (db) => {
      const { rows } = (await db.raw(
        `with next as (
           select d.id from bcms_event_deliveries d
           where ${DUE}
           order by d.run_at, d.id
           limit ?
           for update skip locked)
         update bcms_event_deliveries d
         set status = 'running', attempts = d.attempts + 1, started_at = clock_timestamp(),
             lease_until = clock_timestamp() + ? * interval '1 millisecond', instance = ?
         from next
         where d.id = next.id
         returning d.id, d.handler, d.scope, d.method, d.doc, d.payload`,
        [names, limit, this.options.timeoutMs + LEASE_MARGIN_MS, this.options.instance],
      )) as { rows: (Omit<Claimed, 'id'> & { id: string | number })[] };
      return rows.map((row) => ({ ...row, id: String(row.id) }));
    });
    for (const delivery of claimed) {
      this.inFlight += 1;
      const run = this.deliver(delivery).then((outcome) => {
        this.inFlight -= 1;
        this.finished.push(outcome);
        this.flush();
      });
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
    return claimed.length;
  }

  /** Runs a handler within its time limit: what it threw, or null. */
  private async deliver(delivery: Claimed): Promise<Outcome> {
    const served = this.served.get(delivery.handler);
    const began = Date.now();
    let error: string | null = null;
    try {
      if (served === undefined) throw new Error(`the handler "${delivery.handler}" is no longer served here`);
      const data = { scope: delivery.scope, method: delivery.method, payload: eventPayload(delivery.scope, delivery.doc, delivery.payload) };
      const late = (): Error => new Error(`the handler ran past its time-out of ${this.options.timeoutMs} ms`);
      await withDeadline(
        Promise.resolve().then(() => served.event.handler(data)),
        this.options.timeoutMs,
        late,
      );
    } catch (thrown) {
      error = thrown instanceof Error ? thrown.message : String(thrown);
      this.logger.warn({ handler: delivery.handler, delivery: delivery.id, err: thrown }, 'bcms-extensions: an event handler failed (tried again with backoff)');
    }
    return { id: delivery.id, error, durationMs: Date.now() - began };
  }

  /** Outcomes are written together: one statement for those that finished meanwhile. */
  private flush(): void {
    if (this.flushing !== undefined) return;
    this.flushing = (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      while (this.finished.length > 0) {
        const outcomes = this.finished.splice(0);
        await this.bookkeeping((db) => this.record(db, outcomes)).then(
          (recorded) => this.count(recorded),
          (error: unknown) => {
            // Left running: its lease runs out and it is delivered again (at least once).
            this.logger.error({ err: error, deliveries: outcomes.length }, 'bcms-extensions: could not record event deliveries; they will be delivered again');
          },
        );
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.finished.length > 0) this.flush();
      // What finished may have been holding a document's next delivery.
      this.wake();
    });
  }

  /** Outcomes recorded, for the metrics: as `record` decided them, those it recorded only (a claim taken back by another instance is that one's to count). */
  private count(recorded: readonly { handler: string; status: string }[]): void {
    const metrics = this.options.metrics;
    if (metrics === undefined) return;
    for (const { handler, status } of recorded) metrics.delivery(handler, status as 'delivered' | 'retrying' | 'failed');
  }

  /** `delivered`, or `retrying` after 1, 2, 4, 8 s, or `failed` at the fifth try; only while the claim is still this instance's. */
  private async record(db: Knex.Transaction, outcomes: Outcome[]): Promise<{ handler: string; status: string }[]> {
    const { rows } = (await db.raw(
      `update bcms_event_deliveries d
       set status = case when v.error is null then 'delivered' when d.attempts >= ? then 'failed' else 'retrying' end,
           run_at = case when v.error is null then d.run_at else clock_timestamp() + ? * power(2, d.attempts - 1) * interval '1 second' end,
           finished_at = clock_timestamp(), duration_ms = v.duration_ms, error = v.error, lease_until = null
       from (select unnest(?::bigint[]) as id, unnest(?::text[]) as error, unnest(?::int[]) as duration_ms) v
       where d.id = v.id and d.status = 'running' and d.instance = ?
       returning d.handler, d.status`,
      [MAX_ATTEMPTS, FIRST_BACKOFF_S, outcomes.map((o) => o.id), outcomes.map((o) => o.error) as string[], outcomes.map((o) => o.durationMs), this.options.instance],
    )) as { rows: { handler: string; status: string }[] };
    return rows;
  }

  /**
   * Claims and outcomes commit without waiting for their WAL to reach the disk (the writes'
   * commits do): a crash of the database may lose the last of them, and then a delivery is made
   * again, as at-least-once allows. Waiting would make each claim a disk flush of its own, which
   * writes wait behind (a third of the writes a second, measured on the server).
   */
  private bookkeeping<T>(work: (db: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.store.run((db) =>
      db.transaction(async (trx) => {
        await trx.raw('set local synchronous_commit = off');
        return work(trx);
      }),
    );
  }

  /** Stops claiming; waits for the handlers running now and records their outcomes. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.poll !== undefined) clearInterval(this.poll);
    if (this.gathering !== undefined) clearTimeout(this.gathering);
    await this.stopListening?.();
    await this.pumping;
    await Promise.allSettled([...this.running]);
    while (this.flushing !== undefined) await this.flushing;
  }
}

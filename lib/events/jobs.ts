import type { ContentStore } from '../db/store';
import { withDeadline } from '../http/deadline';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { cronLine, nextTick } from './check';
import { recordServed } from './served';
import type { BCMSJob } from './types';

/** A job this instance serves, by the name its runs are kept under. */
export interface ServedJob {
  name: string;
  source: 'registry' | 'deployed';
  job: BCMSJob;
}

/** setTimeout's longest wait; a tick further off is waited for in steps. */
const LONGEST_WAIT_MS = 2 ** 31 - 1;
/** Past `jobTimeoutMs`, how long a run's claim holds before the next tick may run (its instance died mid-run). */
const LEASE_MARGIN_MS = 30_000;

interface Scheduled {
  served: ServedJob;
  line: string;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Runs each job on its cron's ticks, once across every instance: every instance that serves the
 * job wakes at the tick, and the one whose insert of `(job, tick)` into `bcms_job_runs` wins runs
 * it; the others find the row and do nothing (graphile-worker's way with cron). A tick whose job is
 * still running is recorded `skipped` instead. A run past `jobTimeoutMs` is recorded `timed_out`.
 * Ticks are read in the process's time zone, as BCMS's cron jobs are: instances must share one.
 */
export class JobScheduler {
  private scheduled = new Map<string, Scheduled>();
  private readonly running = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    private readonly options: { instance: string; timeoutMs: number; metrics?: Pick<Metrics, 'jobRun'> },
  ) {}

  /** The jobs this instance runs from now on: recorded (for the listing), and their ticks awaited. */
  async serve(all: readonly ServedJob[]): Promise<void> {
    // Checked when they were loaded; one that cannot be read now is left out, and the others go on.
    const lines = new Map<string, string>();
    for (const served of all) {
      try {
        lines.set(served.name, cronLine(served.job.cron, `job "${served.name}"`));
      } catch (error) {
        this.logger.error({ err: error, job: served.name }, "bcms-extensions: a job's cron cannot be read; it is not scheduled");
      }
    }
    const jobs = all.filter((served) => lines.has(served.name));
    await this.store.run((db) =>
      recordServed(
        db,
        'bcms_jobs',
        'job',
        jobs.map(({ name, source }) => ({ name, source, cron: lines.get(name) })),
      ),
    );
    if (this.closed) return;
    const next = new Map<string, Scheduled>();
    for (const served of jobs) {
      const line = lines.get(served.name) as string;
      const kept = this.scheduled.get(served.name);
      if (kept !== undefined && kept.line === line) {
        kept.served = served; // a new version of the same schedule: its next tick runs the new handler
        next.set(served.name, kept);
        continue;
      }
      if (kept !== undefined) clearTimeout(kept.timer);
      const scheduled: Scheduled = { served, line, timer: undefined };
      next.set(served.name, scheduled);
      this.arm(scheduled, new Date());
    }
    for (const [name, gone] of this.scheduled) if (!next.has(name)) clearTimeout(gone.timer);
    this.scheduled = next;
  }

  /** Waits for the first tick after `after`; a job whose schedule cannot be read is logged and left unscheduled, the others go on. */
  private arm(scheduled: Scheduled, after: Date): void {
    let tick: Date;
    try {
      tick = nextTick(scheduled.line, after);
    } catch (error) {
      this.logger.error({ err: error, job: scheduled.served.name, cron: scheduled.line }, 'bcms-extensions: a job has no next tick; it is not scheduled');
      return;
    }
    const wait = tick.getTime() - Date.now();
    if (wait > LONGEST_WAIT_MS) {
      scheduled.timer = setTimeout(() => this.arm(scheduled, after), LONGEST_WAIT_MS);
    } else {
      scheduled.timer = setTimeout(() => this.fire(scheduled, tick), Math.max(0, wait));
    }
    scheduled.timer.unref();
  }

  private fire(scheduled: Scheduled, tick: Date): void {
    if (this.closed || this.scheduled.get(scheduled.served.name) !== scheduled) return;
    this.arm(scheduled, tick);
    const run = this.runTick(scheduled.served, tick).catch((error: unknown) =>
      this.logger.error({ err: error, job: scheduled.served.name, tick }, 'bcms-extensions: a job tick could not be claimed or recorded'),
    );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  private async runTick({ name, job }: ServedJob, tick: Date): Promise<void> {
    const { timeoutMs, instance } = this.options;
    const claimed = await this.store.run(async (db) => {
      const { rows } = (await db.raw(
        `insert into bcms_job_runs (job, tick_at, status, instance, lease_until, finished_at, error)
         select ?, ?, going.status, ?, clock_timestamp() + ? * interval '1 millisecond',
                case when going.status = 'skipped' then clock_timestamp() end,
                case when going.status = 'skipped' then 'the run of an earlier tick was still going' end
         from (select case when exists (
                 select 1 from bcms_job_runs where job = ? and status = 'running' and lease_until > clock_timestamp()
               ) then 'skipped' else 'running' end as status) going
         on conflict (job, tick_at) do nothing
         returning id, status`,
        [name, tick, instance, timeoutMs + LEASE_MARGIN_MS, name],
      )) as { rows: { id: string | number; status: string }[] };
      return rows[0];
    });
    if (claimed?.status === 'skipped') this.options.metrics?.jobRun(name, 'skipped');
    if (claimed === undefined || claimed.status !== 'running') return; // another instance has this tick, or a run is still going
    const began = Date.now();
    let status: 'succeeded' | 'failed' | 'timed_out' = 'succeeded';
    let error: string | null = null;
    try {
      const late = (): Error => Object.assign(new Error(`the job ran past jobTimeoutMs (${timeoutMs} ms)`), { timedOut: true });
      await withDeadline(
        Promise.resolve().then(() => job.handler()),
        timeoutMs,
        late,
      );
    } catch (thrown) {
      error = thrown instanceof Error ? thrown.message : String(thrown);
      // Its isolate (if it has one) ended it at the same limit, with an error of its own.
      status = (thrown as { timedOut?: boolean }).timedOut === true || Date.now() - began >= timeoutMs ? 'timed_out' : 'failed';
      this.logger.warn({ job: name, tick, err: thrown }, `bcms-extensions: a job run ${status === 'failed' ? 'failed' : 'timed out'}`);
    }
    await this.store.run((db) =>
      db('bcms_job_runs')
        .where({ id: String(claimed.id) })
        .update({ status, error, finished_at: db.raw('clock_timestamp()'), duration_ms: Date.now() - began, lease_until: null }),
    );
    this.options.metrics?.jobRun(name, status);
  }

  /** Stops waiting for ticks; waits for the runs going now to be recorded. */
  async close(): Promise<void> {
    this.closed = true;
    for (const scheduled of this.scheduled.values()) clearTimeout(scheduled.timer);
    await Promise.allSettled([...this.running]);
  }
}

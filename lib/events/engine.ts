import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { isEmbedded } from '../db/connection';
import type { ContentStore } from '../db/store';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import { checkEvent, checkJob, cronLine } from './check';
import { EventDeliveries, type ServedEvent } from './deliveries';
import { JobScheduler, type ServedJob } from './jobs';
import type { BCMSEvent, BCMSJob } from './types';

/** What is deployed now, by deployment name (a file's name): LiveExtensions gives it after each swap. */
export interface DeployedHandlers {
  /** The registry's names: a deployment of one of them is not served. */
  setRegistryNames(kind: 'event' | 'job', names: Iterable<string>): void;
  deployedEvents(): ReadonlyMap<string, BCMSEvent>;
  deployedJobs(): ReadonlyMap<string, BCMSJob>;
  onDeployedChange(listener: () => void): void;
}

/** The routers of this process: at start, embedded PGlite's `running` rows of another are not taken up. */
const LIVE_INSTANCES = new Set<string>();
/** How long finished deliveries and job runs are kept. */
const RETENTION_DAYS = 7;
/** How often an instance says it still serves its registry's handlers (they get no deliveries an hour after the last), and prunes. */
const KEEP_ALIVE_MS = 10 * 60_000;

/**
 * One router's events and jobs: the registry's (loaded from their factories when the router
 * starts) and the deployed ones (taken up at each swap), delivered and run by `EventDeliveries`
 * and `JobScheduler`.
 */
export class EventsAndJobs {
  private readonly deliveries: EventDeliveries;
  private readonly scheduler: JobScheduler;
  private registry: { events: ServedEvent[]; jobs: ServedJob[] } = { events: [], jobs: [] };
  private deployed: DeployedHandlers | undefined;
  private updating: Promise<void> = Promise.resolve();
  private keepAlive: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly instance: string;

  /** Throws at once on a registry that is not arrays of factories. */
  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    settings: { functionTimeoutMs: number; jobTimeoutMs: number },
    private readonly modules: { events?: unknown; jobs?: unknown },
    metrics?: Pick<Metrics, 'delivery' | 'jobRun'>,
  ) {
    for (const [key, maker] of [
      ['events', 'createBcmsEvent'],
      ['jobs', 'createBcmsJob'],
    ] as const) {
      const list = modules[key];
      if (list !== undefined && (!Array.isArray(list) || list.some((entry) => typeof entry !== 'function'))) {
        throw new TypeError(`registry.${key} must be an array of ${maker}(async () => ...) factories`);
      }
    }
    const instance = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.instance = instance;
    LIVE_INSTANCES.add(instance);
    this.deliveries = new EventDeliveries(store, logger, { instance, timeoutMs: settings.functionTimeoutMs, metrics });
    this.scheduler = new JobScheduler(store, logger, { instance, timeoutMs: settings.jobTimeoutMs, metrics });
  }

  /**
   * Runs the registry's factories (rejects with one that cannot work), or takes what their isolates
   * made of them (`isolate: 'all'`), and names each: by its own `name`, else by its position and
   * config, which every instance with the same registry shares.
   */
  async loadRegistry(isolated?: { events(): Promise<BCMSEvent[]>; jobs(): Promise<BCMSJob[]> }): Promise<void> {
    const run = (factories: unknown): Promise<unknown[]> => Promise.all(((factories ?? []) as (() => Promise<unknown>)[]).map((factory) => factory()));
    const [madeEvents, madeJobs] = await Promise.all([isolated?.events() ?? run(this.modules.events), isolated?.jobs() ?? run(this.modules.jobs)]);
    const events = madeEvents.map((made, index) => {
      const event = checkEvent(made, `registry.events[${index}]`);
      return { name: event.name ?? `event:${index}:${event.config.scope}:${event.config.method}`, source: 'registry' as const, event };
    });
    const jobs = madeJobs.map((made, index) => {
      const job = checkJob(made, `registry.jobs[${index}]`);
      return { name: job.name ?? `job:${index}:${cronLine(job.cron, `registry.jobs[${index}]`)}`, source: 'registry' as const, job };
    });
    for (const [kind, list] of [
      ['events', events],
      ['jobs', jobs],
    ] as const) {
      const names = list.map((entry) => entry.name);
      const twice = names.findIndex((name, index) => names.indexOf(name) !== index);
      if (twice !== -1) throw new TypeError(`registry.${kind}[${names.indexOf(names[twice] as string)}] and registry.${kind}[${twice}] are both named "${names[twice]}": give each its own name`);
    }
    this.registry = { events, jobs };
  }

  /**
   * Serves the registry's handlers and jobs, and the deployed ones, now and after every deployment
   * change. Resolves once the registry's are recorded (a write from then on has their deliveries),
   * or found unrecordable for now (the database is away: tried again).
   */
  start(deployed?: DeployedHandlers): Promise<void> {
    this.deployed = deployed;
    deployed?.setRegistryNames(
      'event',
      this.registry.events.map((entry) => entry.name),
    );
    deployed?.setRegistryNames(
      'job',
      this.registry.jobs.map((entry) => entry.name),
    );
    deployed?.onDeployedChange(() => void this.update());
    // Embedded PGlite is one process's: what is `running` at its start was left by a process that ended.
    const first = (isEmbedded(this.store.database.knex) ? this.recoverLeftRunning() : Promise.resolve()).then(() => this.update());
    this.keepAlive = setInterval(() => {
      this.deliveries.keepAlive().catch((error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not record that this instance serves its event handlers'));
      this.prune().catch((error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not prune old event deliveries and job runs (tried again later)'));
    }, KEEP_ALIVE_MS);
    this.keepAlive.unref();
    return first;
  }

  /**
   * Finished deliveries (each holds its event) and job runs are kept for a week (the lists show
   * them), then deleted; unfinished ones are kept until finished,
   * or for a week when no handler will take them (undeployed, or served by no instance). A run
   * whose instance ended mid-run is marked failed once its lease ran out. Any instance may prune:
   * doing it twice does nothing more.
   */
  async prune(): Promise<void> {
    await this.store.run(async (db) => {
      const before = db.raw(`clock_timestamp() - ? * interval '1 day'`, [RETENTION_DAYS]);
      await db('bcms_event_deliveries').whereIn('status', ['delivered', 'failed']).where('finished_at', '<', before).delete();
      await db('bcms_job_runs').whereNot('status', 'running').where('started_at', '<', before).delete();
      // Deliveries no handler will take: its handler undeployed, or no instance has served it, for a week.
      const gone = db('bcms_event_handlers')
        .select('name')
        .where('active', false)
        .orWhere((where) => where.where('source', 'registry').andWhere('seen_at', '<', before));
      await db('bcms_event_deliveries').whereIn('status', ['pending', 'retrying']).where('created_at', '<', before).whereIn('handler', gone).delete();
      // A run whose instance ended mid-run (its lease ran out) is over.
      await db('bcms_job_runs')
        .where('status', 'running')
        .where('lease_until', '<', db.raw('clock_timestamp()'))
        .update({ status: 'failed', finished_at: db.raw('clock_timestamp()'), lease_until: null, error: 'its instance ended before it finished' });
    });
  }

  /** Deliveries and runs the last process left `running`: delivered again now, rather than when their lease runs out. */
  private async recoverLeftRunning(): Promise<void> {
    try {
      await this.store.run(async (db) => {
        const ended = 'its process ended before it finished';
        // Not those of another router of this process on the same database: they are still running.
        const live = [...LIVE_INSTANCES];
        await db('bcms_event_deliveries')
          .where({ status: 'running' })
          .whereNotIn('instance', live)
          .update({ status: 'retrying', run_at: db.raw('clock_timestamp()'), lease_until: null, error: ended });
        await db('bcms_job_runs')
          .where({ status: 'running' })
          .whereNotIn('instance', live)
          .update({ status: 'failed', finished_at: db.raw('clock_timestamp()'), lease_until: null, error: ended });
      });
    } catch (error) {
      this.logger.warn({ err: error }, 'bcms-extensions: could not take up the deliveries and job runs a previous process left running (their leases will)');
    }
  }

  /** One update at a time, in order: the last one says what is served. */
  private update(): Promise<void> {
    this.updating = this.updating.then(async () => {
      if (this.closed) return;
      // LiveExtensions leaves out deployed ones named like the registry's (setRegistryNames).
      const events = [...this.registry.events, ...[...(this.deployed?.deployedEvents() ?? [])].map(([name, event]) => ({ name, source: 'deployed' as const, event }))];
      const jobs = [...this.registry.jobs, ...[...(this.deployed?.deployedJobs() ?? [])].map(([name, job]) => ({ name, source: 'deployed' as const, job }))];
      try {
        await Promise.all([this.deliveries.serve(events), this.scheduler.serve(jobs)]);
      } catch (error) {
        // The database is away: the next change, or the keep-alive, tries again.
        this.logger.error({ err: error }, 'bcms-extensions: could not take up the event handlers and jobs (tried again at the next deployment change)');
        setTimeout(() => void this.update(), 5000).unref();
      }
    });
    return this.updating;
  }

  /** Stops claiming deliveries and ticks; waits a moment for those under way to be recorded. */
  async close(): Promise<void> {
    this.closed = true;
    LIVE_INSTANCES.delete(this.instance);
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    // A run that lasts longer is left to its lease: another instance takes the delivery again.
    // An update under way is waited for as long (a database the host closed first never answers).
    const waited = Promise.all([this.updating, this.deliveries.close(), this.scheduler.close()]);
    await Promise.race([waited, new Promise((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref())]);
  }
}

/** How long close() waits for handlers and jobs under way. */
const CLOSE_WAIT_MS = 5000;

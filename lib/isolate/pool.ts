/**
 * The isolates of one extension (lib/isolate/host.ts runs each): a call goes to the least busy, a
 * second starts while every one is busy (a CPU-bound handler then uses another core), one idle for
 * long beyond the first is ended, and one that dies is replaced, at once, or after a backoff when
 * they keep dying soon after they load (a crash loop).
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Request } from 'express';
import { BcmsHttpError, isClosing } from '../http/errors';
import type { IsolateAnswer } from './answer';
import { crashed, ExtensionLoadError, Isolate, type IsolateServices, type NewCall } from './host';
import type { ExtensionKind, ExtensionSource, WireExtension } from './protocol';
import { outsideRequests } from '../tracing';

/** An isolate that ends by itself this soon after loading is in a crash loop: its restarts back off. */
export const CRASH_LOOP_MS = 10_000;
/** The first restart after such an end waits this long; each next one twice as long, up to RESTART_MAX_MS. */
export const RESTART_FIRST_MS = 1_000;
export const RESTART_MAX_MS = 60_000;

/** How many isolates one extension may use: one per core (at most four), so a CPU-bound one uses them all. */
export const MAX_ISOLATES_PER_EXTENSION = Math.max(1, Math.min(4, os.availableParallelism?.() ?? os.cpus().length));
/** An isolate beyond an extension's first that has had no call for this long is ended (each holds about 50 MB). */
export const IDLE_ISOLATE_MS = 30_000;

/**
 * The isolates of one loaded extension. Made once its first isolate loaded (`IsolatePool.start`):
 * that load is the check that a bundle works.
 */
export class IsolatePool {
  private isolates: Isolate[] = [];
  private starting: Promise<Isolate> | undefined;
  /** The isolate `starting` loads. */
  private loading: Isolate | undefined;
  private closed = false;
  /** While the pool has more than one isolate: ends those idle past IDLE_ISOLATE_MS. */
  private shrinking: NodeJS.Timeout | undefined;
  /** Isolates in a row that ended by themselves while loading or soon after (a crash loop). */
  private failures = 0;
  /** Why the last one did, for the deployments list. */
  private lastError: string | undefined;
  /** While backing off: when the next isolate starts (ms, performance.now()), and its timer. */
  private retryAt = 0;
  private restarting: NodeJS.Timeout | undefined;

  private constructor(
    readonly label: string,
    readonly kind: ExtensionKind,
    readonly name: string,
    private readonly source: ExtensionSource,
    private readonly services: IsolateServices,
    readonly extension: WireExtension,
  ) {}

  /** Loads the extension in a first isolate; rejects with an ExtensionLoadError. */
  static async start(label: string, kind: ExtensionKind, name: string, source: ExtensionSource, services: IsolateServices): Promise<IsolatePool> {
    let pool: IsolatePool | undefined;
    // Outside the request that may have asked for it: its pipes' callbacks would run in that request's context for its whole life.
    const first = outsideRequests(() => new Isolate(label, services, { kind, name, source }, (isolate, reason) => pool?.lost(isolate, reason)));
    const extension = await first.load(kind, name, source);
    if (extension?.kind !== kind || (name !== '' && extension.name !== name)) {
      first.end();
      throw new ExtensionLoadError('BUNDLE_LOAD_FAILED', 'the isolate answered for another extension');
    }
    pool = new IsolatePool(label, kind, extension.name, source, services, extension);
    pool.isolates.push(first);
    return pool;
  }

  /**
   * Runs a call on an idle isolate, else on a new one while the pool may grow (a CPU-bound or
   * spinning call does not hold up the next), else on the least busy.
   */
  call(message: NewCall, request: Request | undefined, timeoutMs: number, timeout: () => Error): Promise<IsolateAnswer> {
    let chosen: Isolate | undefined;
    for (const isolate of this.isolates) {
      if (isolate.isAlive && (chosen === undefined || isolate.inFlight < chosen.inFlight)) chosen = isolate;
    }
    const plugin = this.kind === 'plugin' ? this.name : undefined;
    const run = (isolate: Isolate): Promise<IsolateAnswer> => isolate.call(message, request, plugin, timeoutMs, timeout);
    if (chosen !== undefined && (chosen.inFlight === 0 || this.isolates.length >= MAX_ISOLATES_PER_EXTENSION || this.closed)) return run(chosen);
    if (this.closed) return Promise.reject(crashed('The extension was replaced.'));
    // A crash loop: requests do not start isolates faster than the backoff does.
    if (chosen === undefined && this.restarting !== undefined) {
      const seconds = Math.max(1, Math.ceil((this.retryAt - performance.now()) / 1000));
      return Promise.reject(crashed(`The extension keeps failing (${this.lastError ?? 'its isolate ended'}); it is started again in ${seconds} s.`));
    }
    const busy = chosen;
    return this.spawn().then(run, (error: unknown) => (busy?.isAlive ? run(busy) : Promise.reject(error instanceof BcmsHttpError ? error : crashed('The extension could not be restarted.'))));
  }

  /** Another isolate, loaded; one at a time. */
  private spawn(): Promise<Isolate> {
    this.starting ??= (async () => {
      const isolate = outsideRequests(() => new Isolate(this.label, this.services, { kind: this.kind, name: this.name, source: this.source }, (gone, reason) => this.lost(gone, reason)));
      this.loading = isolate;
      try {
        await isolate.load(this.kind, this.name, this.source);
      } catch (error) {
        if (this.closed) throw crashed('The extension was replaced.');
        // The service is closing (Isolation.stopLoading): nothing to say of the extension.
        if (isClosing(error)) throw error;
        this.services.logger.error({ extension: this.label, err: error }, 'bcms-extensions: an isolate could not load the extension');
        this.failed((error as Error)?.message ?? String(error));
        throw error;
      }
      if (this.closed) {
        isolate.end();
        throw crashed('The extension was replaced.');
      }
      this.isolates.push(isolate);
      if (this.isolates.length > 1) this.shrinking ??= setInterval(() => this.shrink(), IDLE_ISOLATE_MS / 3).unref();
      return isolate;
    })().finally(() => {
      this.starting = undefined;
      this.loading = undefined;
    });
    return this.starting;
  }

  /** Ends the isolates beyond the first that had no call for IDLE_ISOLATE_MS. */
  private shrink(): void {
    const now = performance.now();
    for (const isolate of this.isolates.slice(1)) {
      if (isolate.inFlight === 0 && now - isolate.lastActive > IDLE_ISOLATE_MS) {
        this.isolates = this.isolates.filter((each) => each !== isolate);
        isolate.end();
      }
    }
    if (this.isolates.length <= 1) {
      clearInterval(this.shrinking);
      this.shrinking = undefined;
    }
  }

  private lost(isolate: Isolate, reason: string): void {
    const known = this.isolates.includes(isolate);
    this.isolates = this.isolates.filter((each) => each !== isolate);
    if (this.closed || !known) return;
    this.services.logger.error({ extension: this.label, reason }, `bcms-extensions: an isolate of ${this.label} ended (${reason}); it is replaced`);
    // A crash loop is an isolate that ends by itself, with no call in flight, while loading or soon
    // after (top-level code that exits, a timer that throws). One that crashed answering a call (a
    // handler's bug, for that request), or lived a while, is restarted at once; one the service
    // ended was replaced already.
    if (isolate.endedByService) {
      if (this.isolates.length === 0) this.spawn().catch(() => {});
      return;
    }
    this.services.metrics.isolateCrashed(this.kind);
    const young = isolate.loadedAt === undefined || performance.now() - isolate.loadedAt < CRASH_LOOP_MS;
    if (!young) this.failures = 0;
    if (young && !isolate.diedAnswering) {
      this.failed(reason);
      return;
    }
    this.lastError = reason;
    if (this.isolates.length === 0) this.spawn().catch(() => {});
  }

  /**
   * An isolate ended by itself, or one could not load: the next starts after a backoff that
   * doubles with each failure in a row (RESTART_FIRST_MS to RESTART_MAX_MS), while none is left.
   */
  private failed(reason: string): void {
    this.failures += 1;
    this.lastError = reason;
    if (this.closed || this.restarting !== undefined || this.isolates.some((isolate) => isolate.isAlive)) return;
    const delay = Math.min(RESTART_FIRST_MS * 2 ** (this.failures - 1), RESTART_MAX_MS);
    this.retryAt = performance.now() + delay;
    this.restarting = setTimeout(() => {
      this.restarting = undefined;
      if (!this.closed && !this.isolates.some((isolate) => isolate.isAlive)) this.spawn().catch(() => {});
    }, delay).unref();
  }

  /**
   * `running`, or `failing` while its isolates end by themselves soon after they load (with why
   * the last one did): for the deployments list. One that has lived past CRASH_LOOP_MS since is
   * running again.
   */
  health(): { state: 'running' | 'failing'; lastError?: string } {
    const now = performance.now();
    if (this.failures > 0 && this.isolates.some((isolate) => isolate.isAlive && isolate.loadedAt !== undefined && now - isolate.loadedAt >= CRASH_LOOP_MS)) this.failures = 0;
    if (this.failures === 0) return { state: 'running' };
    return { state: 'failing', ...(this.lastError === undefined ? {} : { lastError: this.lastError }) };
  }

  /**
   * Ends every isolate once its calls are answered (each is bounded by its time-out): nothing the
   * extension started keeps running. No isolate is started any more; a request that matched this
   * version before it was replaced is still answered by an isolate left, until they are ended.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.shrinking);
    clearTimeout(this.restarting);
    // One loading is not waited for: it was going to serve calls that no longer come.
    this.loading?.end();
    await this.starting?.catch(() => {});
    const ending = this.isolates.map(async (isolate) => {
      while (isolate.isAlive && isolate.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 20));
      isolate.end();
      await isolate.gone;
    });
    await Promise.all(ending);
  }
}

import type { BCMSEvent, BCMSJob } from '../events/types';
import type { BcmsFunction } from '../function/types';
import type { Logger } from '../logger';
import type { BcmsPlugin } from '../plugin/types';
import { withDeadline } from '../http/deadline';
import { bundleFilename, extensionLabel, loadExtension, type LoadedExtension } from './load';
import { activeDeployments, type ActiveDeployment } from './store';

/** What is live from deployments: each is swapped in whole, so a request in flight keeps what it matched. */
export interface DeployedSet {
  plugins: readonly BcmsPlugin[];
  functions: ReadonlyMap<string, BcmsFunction>;
  /** Plugin name → its UI files (path → bytes), for plugins deployed with a UI. */
  uis: ReadonlyMap<string, ReadonlyMap<string, Buffer>>;
  /** Deployment name (its file's, `src/events/<name>.ts`) → the event handler; its `name` is the same. */
  events: ReadonlyMap<string, BCMSEvent>;
  /** Deployment name (`src/jobs/<name>.ts`) → the job; its `name` is the same. */
  jobs: ReadonlyMap<string, BCMSJob>;
}

/** How a version fares on this instance, as the deployments list shows it. */
export interface ExtensionHealth {
  /** `failing`: its isolates end by themselves soon after they load, and are restarted with backoff. */
  state: 'running' | 'failing';
  /** Why the last isolate ended, or could not load. */
  lastError?: string;
}

/** A loaded extension, what ends it once it is replaced (its isolates), and how it fares. */
export type RunningExtension = LoadedExtension & { close?(): Promise<void>; health?(): ExtensionHealth };

interface Live {
  id: string;
  extension: RunningExtension;
  ui: Map<string, Buffer> | null;
}

/**
 * The deployed plugins, functions, events and jobs of this instance: loaded from the active deployments at start
 * and again whenever a deployment changes (on any instance), then handed to `swap` in one piece.
 * A version that is replaced, rolled back or undeployed is ended once the swap is done.
 */
export class DeployedExtensions {
  private loaded = new Map<string, Live>();
  /** Versions loaded by the deploy check, taken up by the next load rather than loaded again. */
  private readonly adopted = new Map<string, RunningExtension>();
  private running: Promise<void> | undefined;
  /** While a load runs: once it has read what is active, each version it takes up (`kind:name`) → its load. */
  private loading: Promise<ReadonlyMap<string, Promise<void>>> | undefined;
  /** Reloads asked for, and the number the last finished load covers: a caller waits for a load that began after its call. */
  private requested = 0;
  private covered = 0;
  private waiters: { upTo: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private closed = false;
  /** The error of a deployment (by id) that failed to load here. */
  readonly failures = new Map<string, string>();

  constructor(
    private readonly deps: {
      read: () => Promise<ActiveDeployment[]>;
      /** Loads a version: in isolates, or in the service's process (`isolate: 'none'`). */
      start: (deployment: ActiveDeployment) => Promise<RunningExtension>;
      /** Keeps why a version did not load (rollback refuses it). */
      recordFailure: (id: string, message: string) => Promise<void>;
      logger: Logger;
      swap: (set: DeployedSet) => void;
      /** `false` (`deployments: 'off'`): nothing deployed runs here. */
      enabled: boolean;
    },
  ) {}

  /**
   * How each version this instance serves or tried fares here, by deployment id: `running`,
   * `failing` (a crash loop: restarted with backoff), `failed` (it did not load here).
   */
  health(): Map<string, { state: 'running' | 'failing' | 'failed'; lastError?: string }> {
    const states = new Map<string, { state: 'running' | 'failing' | 'failed'; lastError?: string }>();
    for (const [id, message] of this.failures) states.set(id, { state: 'failed', lastError: message });
    for (const entry of this.loaded.values()) states.set(entry.id, entry.extension.health?.() ?? { state: 'running' });
    return states;
  }

  /** Whether a deployment (by id) is what this instance serves now. */
  isLive(id: string): boolean {
    for (const entry of this.loaded.values()) if (entry.id === id) return true;
    return false;
  }

  /** A version the deploy check loaded: the next load takes it up as it is. */
  adopt(id: string, extension: RunningExtension): void {
    this.adopted.set(id, extension);
  }

  /** Ends an adopted version that no load took up (another version went live first). */
  discard(id: string): void {
    const extension = this.adopted.get(id);
    this.adopted.delete(id);
    void extension?.close?.();
  }

  /**
   * While a load runs, a promise that settles once `kind` `name` is live (or failed), if that load
   * takes it up: a request for it waits rather than answering 404. Others never wait on it.
   */
  pending(kind: 'plugin' | 'function', name: string): Promise<void> | undefined {
    return this.loading?.then((loads) => loads.get(`${kind}:${name}`));
  }

  /**
   * Loads what is active now. Resolves once a load that began after this call has finished: calls
   * made while one runs are folded into one more run after it.
   */
  reload(): Promise<void> {
    if (!this.deps.enabled || this.closed) return Promise.resolve();
    const upTo = ++this.requested;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ upTo, resolve, reject }));
    this.running ??= this.drain();
    return done;
  }

  /** Waits for a load under way, then ends every version this instance runs. */
  async close(): Promise<void> {
    this.closed = true;
    await this.running?.catch(() => {});
    const ending = [...this.loaded.values()].map((entry) => entry.extension.close?.());
    ending.push(...[...this.adopted.values()].map((extension) => extension.close?.()));
    this.loaded = new Map();
    this.adopted.clear();
    await Promise.all(ending);
  }

  private async drain(): Promise<void> {
    while (this.covered < this.requested && !this.closed) {
      const upTo = this.requested;
      let failure: unknown;
      let read: (loads: ReadonlyMap<string, Promise<void>>) => void = () => {};
      this.loading = new Promise((resolve) => (read = resolve));
      try {
        await this.load(await this.deps.read(), read);
      } catch (error) {
        failure = error;
      }
      read(new Map());
      this.loading = undefined;
      this.covered = upTo;
      const ready = this.waiters.filter((waiter) => waiter.upTo <= upTo);
      this.waiters = this.waiters.filter((waiter) => waiter.upTo > upTo);
      for (const waiter of ready) {
        if (failure === undefined) waiter.resolve();
        else waiter.reject(failure);
      }
    }
    for (const waiter of this.waiters.splice(0)) waiter.resolve();
    this.running = undefined;
  }

  /**
   * Takes up what is active: each new version in its own isolates, side by side, so one that cannot
   * load holds up no other. Each goes live as soon as it has loaded (the tables are swapped whole
   * each time); what it replaces serves until then, and is ended after.
   */
  private async load(active: ActiveDeployment[], announce: (loads: ReadonlyMap<string, Promise<void>>) => void): Promise<void> {
    const keyOf = (deployment: { kind: string; name: string }): string => `${deployment.kind}:${deployment.name}`;
    const next = new Map<string, Live>();
    for (const deployment of active) {
      const current = this.loaded.get(keyOf(deployment));
      if (current !== undefined) next.set(keyOf(deployment), current);
    }
    const publish = (): void => {
      const plugins: BcmsPlugin[] = [];
      const functions = new Map<string, BcmsFunction>();
      const uis = new Map<string, ReadonlyMap<string, Buffer>>();
      const events = new Map<string, BCMSEvent>();
      const jobs = new Map<string, BCMSJob>();
      for (const { extension, ui } of next.values()) {
        if (extension.kind === 'plugin') {
          plugins.push(extension.plugin);
          if (ui !== null) uis.set(extension.name, ui);
        } else if (extension.kind === 'function') {
          functions.set(extension.name, extension.definition);
        } else if (extension.kind === 'event') {
          events.set(extension.name, extension.event);
        } else {
          jobs.set(extension.name, extension.job);
        }
      }
      this.deps.swap({ plugins, functions, uis, events, jobs });
    };
    const loads = new Map<string, Promise<void>>();
    for (const deployment of active) {
      const key = keyOf(deployment);
      if (this.loaded.get(key)?.id === deployment.id) continue;
      loads.set(
        key,
        this.takeUp(deployment).then((live) => {
          if (live === undefined) return;
          next.set(key, live);
          publish();
        }),
      );
    }
    announce(loads);
    await Promise.all(loads.values());
    publish();
    const retired = [...this.loaded.values()].filter((entry) => next.get(keyOf(entry.extension)) !== entry);
    this.loaded = next;
    // Replaced, rolled back or undeployed: ended once its calls are answered.
    for (const entry of retired) void entry.extension.close?.();
  }

  /**
   * Loads a version, trying again (after LOAD_RETRY_MS, then twice that) when what stopped it may
   * pass: it loaded where it was deployed, so a crash while loading or a machine too busy here
   * should not leave this instance on another version than the rest.
   */
  private async startRetrying(deployment: ActiveDeployment): Promise<RunningExtension> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.deps.start(deployment);
      } catch (error) {
        const transient = (error as { transient?: unknown })?.transient === true;
        if (!transient || attempt >= LOAD_RETRIES || this.closed) throw error;
        this.deps.logger.warn(
          { err: error, extension: labelOf(deployment), kind: deployment.kind, version: deployment.version, attempt: attempt + 1 },
          'bcms-extensions: a deployment did not load on this instance; trying again',
        );
        await new Promise((resolve) => setTimeout(resolve, LOAD_RETRY_MS * 2 ** attempt));
        if (this.closed) throw error;
      }
    }
  }

  /** One version, loaded (or the one the deploy check loaded); undefined when it does not load here. */
  private async takeUp(deployment: ActiveDeployment): Promise<Live | undefined> {
    try {
      const adopted = this.adopted.get(deployment.id);
      this.adopted.delete(deployment.id);
      const extension = adopted ?? (await this.startRetrying(deployment));
      const ui = deployment.ui === null ? null : new Map(Object.entries(deployment.ui).map(([file, base64]) => [file, Buffer.from(base64, 'base64')] as const));
      this.deps.logger.info({ extension: labelOf(deployment), kind: deployment.kind, version: deployment.version }, 'bcms-extensions: deployment live');
      return { id: deployment.id, extension, ui };
    } catch (error) {
      // Ended by close(): it says nothing of the version.
      if (this.closed) return undefined;
      // It loaded where it was deployed; here it does not: what this instance had keeps serving, and it says so.
      const message = (error as Error)?.message ?? String(error);
      this.failures.set(deployment.id, message);
      this.deps.logger.error({ err: error, extension: labelOf(deployment), kind: deployment.kind, version: deployment.version }, 'bcms-extensions: a deployment failed to load on this instance');
      await this.deps.recordFailure(deployment.id, message).catch(() => {});
      return undefined;
    }
  }
}

/** Tries after the first, for a version that did not load here for a reason that may pass; and the first wait. */
const LOAD_RETRIES = 2;
const LOAD_RETRY_MS = 1_000;

/**
 * `isolate: 'none'`: a version loaded in the service's own process, within `loadTimeoutMs` of wall
 * time (past it the service stops waiting, though the code runs on: it cannot be stopped there).
 */
export function loadInProcess(deployment: ActiveDeployment, loadTimeoutMs: number): Promise<RunningExtension> {
  const { kind, name, version, code } = deployment;
  return withDeadline(loadExtension(kind, name, code, bundleFilename(kind, name, version)), loadTimeoutMs, () => new Error(`it did not finish loading within ${loadTimeoutMs} ms`));
}

export { activeDeployments };

/** A version as log lines name it (`extension`). */
function labelOf(deployment: Pick<ActiveDeployment, 'kind' | 'name' | 'version'>): string {
  return extensionLabel(deployment.kind, deployment.name, deployment.version);
}

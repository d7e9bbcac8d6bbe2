import type { BcmsFunction } from '../function/types';
import type { Logger } from '../logger';
import type { BcmsPlugin } from '../plugin/types';
import { loadExtension, type LoadedExtension } from './load';
import { activeDeployments, type ActiveDeployment } from './store';

/** What is live from deployments: each is swapped in whole, so a request in flight keeps what it matched. */
export interface DeployedSet {
  plugins: readonly BcmsPlugin[];
  functions: ReadonlyMap<string, BcmsFunction>;
  /** Plugin name → its UI files (path → bytes), for plugins deployed with a UI. */
  uis: ReadonlyMap<string, ReadonlyMap<string, Buffer>>;
}

/**
 * The deployed plugins and functions of this instance: loaded from the active deployments at start
 * and again whenever a deployment changes (on any instance), then handed to `swap` in one piece.
 */
export class DeployedExtensions {
  private loaded = new Map<string, { id: string; extension: LoadedExtension; ui: Map<string, Buffer> | null }>();
  private running = false;
  /** Reloads asked for, and the number the last finished load covers: a caller waits for a load that began after its call. */
  private requested = 0;
  private covered = 0;
  private waiters: { upTo: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** The error of a deployment (by id) that failed to load here. */
  readonly failures = new Map<string, string>();

  constructor(
    private readonly read: () => Promise<ActiveDeployment[]>,
    private readonly logger: Logger,
    private readonly swap: (set: DeployedSet) => void,
  ) {}

  /** Whether a deployment (by id) is what this instance serves now. */
  isLive(id: string): boolean {
    for (const entry of this.loaded.values()) if (entry.id === id) return true;
    return false;
  }

  /**
   * Loads what is active now. Resolves once a load that began after this call has finished: calls
   * made while one runs are folded into one more run after it.
   */
  reload(): Promise<void> {
    const upTo = ++this.requested;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ upTo, resolve, reject }));
    if (!this.running) void this.drain();
    return done;
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.covered < this.requested) {
      const upTo = this.requested;
      let failure: unknown;
      try {
        await this.load(await this.read());
      } catch (error) {
        failure = error;
      }
      this.covered = upTo;
      const ready = this.waiters.filter((waiter) => waiter.upTo <= upTo);
      this.waiters = this.waiters.filter((waiter) => waiter.upTo > upTo);
      for (const waiter of ready) {
        if (failure === undefined) waiter.resolve();
        else waiter.reject(failure);
      }
    }
    this.running = false;
  }

  private async load(active: ActiveDeployment[]): Promise<void> {
    const next = new Map<string, { id: string; extension: LoadedExtension; ui: Map<string, Buffer> | null }>();
    for (const deployment of active) {
      const key = `${deployment.kind}:${deployment.name}`;
      const current = this.loaded.get(key);
      if (current?.id === deployment.id) {
        next.set(key, current);
        continue;
      }
      try {
        const filename = `bcms-deployment:${deployment.kind}/${deployment.name}@${deployment.version}.js`;
        // Checked in a worker before it was stored; here too it must load in time, or it is not taken up.
        const extension = await withTimeout(loadExtension(deployment.kind, deployment.name, deployment.code, filename), LOAD_TIMEOUT_MS);
        const ui = deployment.ui === null ? null : new Map(Object.entries(deployment.ui).map(([file, base64]) => [file, Buffer.from(base64, 'base64')] as const));
        next.set(key, { id: deployment.id, extension, ui });
        this.logger.info({ kind: deployment.kind, name: deployment.name, version: deployment.version }, 'bcms-extensions: deployment live');
      } catch (error) {
        // It loaded where it was deployed; here it does not: keep what this instance had, and say so.
        this.failures.set(deployment.id, (error as Error)?.message ?? String(error));
        this.logger.error({ err: error, kind: deployment.kind, name: deployment.name, version: deployment.version }, 'bcms-extensions: a deployment failed to load on this instance');
        if (current !== undefined) next.set(key, current);
      }
    }
    this.loaded = next;
    const plugins: BcmsPlugin[] = [];
    const functions = new Map<string, BcmsFunction>();
    const uis = new Map<string, ReadonlyMap<string, Buffer>>();
    for (const { extension, ui } of next.values()) {
      if (extension.kind === 'plugin') {
        plugins.push(extension.plugin);
        if (ui !== null) uis.set(extension.name, ui);
      } else {
        functions.set(extension.name, extension.definition);
      }
    }
    this.swap({ plugins, functions, uis });
  }
}

/** How long a deployment may take to load in the service (its factory, say). */
export const LOAD_TIMEOUT_MS = 10_000;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`it did not finish loading within ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

export { activeDeployments };

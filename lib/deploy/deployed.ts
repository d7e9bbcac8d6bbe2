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
  private reloading: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly read: () => Promise<ActiveDeployment[]>,
    private readonly logger: Logger,
    private readonly swap: (set: DeployedSet) => void,
  ) {}

  /** Loads what is active now; calls made while one runs are folded into one more run after it. */
  reload(): Promise<void> {
    if (this.reloading !== undefined) {
      this.again = true;
      return this.reloading;
    }
    this.reloading = (async () => {
      do {
        this.again = false;
        await this.load(await this.read());
      } while (this.again);
    })().finally(() => {
      this.reloading = undefined;
    });
    return this.reloading;
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
        const extension = await loadExtension(deployment.kind, deployment.name, deployment.code, filename);
        const ui = deployment.ui === null ? null : new Map(Object.entries(deployment.ui).map(([file, base64]) => [file, Buffer.from(base64, 'base64')] as const));
        next.set(key, { id: deployment.id, extension, ui });
        this.logger.info({ kind: deployment.kind, name: deployment.name, version: deployment.version }, 'bcms-extensions: deployment live');
      } catch (error) {
        // It loaded where it was deployed; here it does not: keep what this instance had, and say so.
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

export { activeDeployments };

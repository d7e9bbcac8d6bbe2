import type { ContentStore } from '../db/store';
import type { Logger } from '../logger';
import type { UiRoutes } from '../ui/assets';
import { activeDeployments, DeployedExtensions, type RunningExtension } from './deployed';
import { listenForDeployments } from './listen';
import type { LiveExtensions } from './live';
import { assertTrusted, type TrustedKeys } from './signing';
import { recordLoadError, type ActiveDeployment } from './store';

/** Starts a deployed version: in isolates, or (`isolate: 'none'`) in the service's process. */
export type StartDeployment = (deployment: ActiveDeployment) => Promise<RunningExtension>;

/**
 * What is deployed, on this instance: the versions it runs (swapped into the live tables), kept
 * up to date by the database's notifications from its start to its close.
 */
export class Deployments {
  readonly deployed: DeployedExtensions;
  private stopListening: (() => Promise<void>) | undefined;
  private closed = false;

  constructor(
    private readonly deps: {
      store: ContentStore;
      live: LiveExtensions;
      ui: UiRoutes;
      logger: Logger;
      /** How a version is loaded: in an isolate, or (`isolate: 'none'`) in the service's process. */
      start: StartDeployment;
      /** `deployments: 'off'`: run none. */
      enabled: boolean;
      /** `deploy.trustedKeys`: a version no pinned key signed never runs here. */
      trusted?: TrustedKeys;
      /** Why no deployed code may run on this instance (production without a sandbox), or undefined. */
      refused?: string;
    },
  ) {
    const { store, live, ui, logger, start, enabled, trusted } = deps;
    this.deployed = new DeployedExtensions({
      read: () => store.run(() => activeDeployments(store.database.knex)),
      // Checked here, against this instance's own pinned keys, whatever the database holds.
      start: async (deployment) => {
        assertTrusted(deployment, deployment.signature, trusted, `Version ${deployment.version} of ${deployment.kind} "${deployment.name}"`);
        return start(deployment);
      },
      recordFailure: (id, message) => store.run(() => recordLoadError(store.database.knex, id, message)),
      logger,
      swap: (set) => {
        live.apply(set);
        ui.setDeployed(set.uis);
      },
      enabled,
    });
  }

  /**
   * Once the router started: a restarted instance serves what is deployed, without waiting on it
   * (each deployment goes live once loaded, and a request for one still loading waits for it);
   * then it hears of every change.
   */
  start(): void {
    const { store, logger, enabled, trusted, refused } = this.deps;
    // Said at start (lib/isolate/sandbox.ts): nothing deployed runs here, and nothing is marked failed for it.
    if (refused !== undefined) return;
    if (!enabled) {
      logger.warn({}, 'bcms-extensions: deployments are off (deployments: "off" or BCMS_DEPLOYMENTS=off): no deployed plugin or function runs on this instance');
      return;
    }
    if (trusted === undefined) {
      logger.warn(
        {},
        'bcms-extensions: deployed bundles are not signed: whoever holds a deploy key (or can write to bcms_deployments) runs code on every instance. ' +
          "Pin the authors' public keys in deploy.trustedKeys to run only the bundles they signed",
      );
    }
    const reload = (): void => void this.deployed.reload().catch((error: unknown) => logger.error({ err: error }, 'bcms-extensions: could not load the deployments (tried again on the next change)'));
    reload();
    if (!this.closed) this.stopListening = listenForDeployments(store.database.knex, logger, reload);
  }

  /** While the deployed plugin a request path names is loading: its load. */
  pluginLoading(url: string): Promise<void> | undefined {
    if (!url.startsWith('/api/plugin/')) return undefined;
    const name = /^\/api\/plugin\/([^/?]+)/.exec(url)?.[1];
    return name === undefined ? undefined : this.deployed.pending('plugin', name);
  }

  /**
   * Takes up nothing more from now on (at once, before it returns its promise); stops listening;
   * loads under way finish (or fail, once the isolates' loads are stopped, recorded nowhere), then
   * every deployed version is ended.
   */
  async close(): Promise<void> {
    this.closed = true;
    const ended = this.deployed.close();
    await this.stopListening?.();
    await ended;
  }
}

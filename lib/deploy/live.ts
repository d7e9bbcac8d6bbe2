import { loadFunctions } from '../function/load';
import type { BCMSEvent, BCMSJob } from '../events/types';
import type { BcmsFunction, BcmsFunctionModule } from '../function/types';
import { awaitsSetup, setUpControllers } from '../plugin/mount';
import { PluginRouteTable } from '../plugin/routes';
import type { BcmsPlugin } from '../plugin/types';
import type { DeployedSet } from './deployed';
import type { DeploymentKind } from './load';

/**
 * The plugins and functions a router serves now: the app's own (the registry) and the deployed
 * ones. A deployment change replaces each table whole, so a request in flight keeps the table it
 * matched; the app's own names always win over a deployment's.
 */
export class LiveExtensions {
  /** The route table of every plugin endpoint. */
  plugins: PluginRouteTable;
  /** Every plugin, the app's own first. */
  allPlugins: readonly BcmsPlugin[];
  /** Undefined until the router's start has loaded the app's functions: requests wait for it. */
  functions: ReadonlyMap<string, BcmsFunction> | undefined;
  private registryFunctions: ReadonlyMap<string, BcmsFunction> = new Map();
  private readonly registryPluginNames: ReadonlySet<string>;

  /** `/api/plugin/<name>/` of each app plugin with a controller whose `setup` has not run; empty once it ran. */
  private awaitingSetup: readonly string[];

  /** The deployed plugins live now (those whose names the app's own do not take). */
  private deployedPlugins: readonly BcmsPlugin[] = [];

  /** The deployed event handlers and jobs live now, by deployment name (those whose names the app's own do not take). */
  private events: ReadonlyMap<string, BCMSEvent> = new Map();
  private jobs: ReadonlyMap<string, BCMSJob> = new Map();
  /** Names of the app's own events and jobs (as the events engine names them): a deployment may not take them. */
  private registryEventNames: ReadonlySet<string> = new Set();
  private registryJobNames: ReadonlySet<string> = new Set();
  private readonly changeListeners: (() => void)[] = [];

  /**
   * Throws, naming the offender, for a registry whose plugins cannot work together. `isolated`
   * (`isolate: 'all'`): their code runs in isolates only, so the table waits for their stand-ins
   * (`setIsolatedRegistry`), and requests for them wait too.
   */
  constructor(
    private registryPlugins: readonly BcmsPlugin[],
    options: { isolated?: boolean } = {},
  ) {
    if (!Array.isArray(registryPlugins as unknown)) throw new TypeError('registry.plugins must be an array of plugins (createBcmsPlugin)');
    this.registryPluginNames = new Set(registryPlugins.map((plugin) => plugin.name));
    if (options.isolated === true) {
      new PluginRouteTable(registryPlugins.map((plugin) => ({ name: plugin.name }))); // the names alone: URL-safe, no duplicate
      this.registryPlugins = [];
      this.plugins = new PluginRouteTable([]);
      this.allPlugins = [];
      this.awaitingSetup = [...this.registryPluginNames].map((name) => `/api/plugin/${name}/`);
      return;
    }
    this.plugins = new PluginRouteTable(registryPlugins);
    this.allPlugins = registryPlugins;
    this.awaitingSetup = registryPlugins.filter((plugin) => (plugin.controllers ?? []).some((controller) => awaitsSetup(controller))).map((plugin) => `/api/plugin/${plugin.name}/`);
  }

  /**
   * The app's own functions (their factories run) and plugins (their setups run, once `database`
   * is ready: a setup may build a repository and read it), in the service's process.
   */
  loadRegistry(modules: readonly BcmsFunctionModule[], database: Promise<void>): Promise<void>[] {
    return [loadFunctions(modules).then((loaded) => this.setRegistryFunctions(loaded)), database.then(() => setUpControllers(this.registryPlugins)).then(() => this.setUpDone())];
  }

  /** `isolate: 'all'`: the app's own plugins, as the stand-ins of their isolates, now loaded. */
  setIsolatedRegistry(plugins: readonly BcmsPlugin[]): void {
    this.registryPlugins = plugins;
    this.allPlugins = [...plugins, ...this.deployedPlugins];
    this.plugins = new PluginRouteTable(this.allPlugins);
    this.awaitingSetup = [];
  }

  /**
   * Whether a request the route table does not serve may be one for an app plugin whose controllers
   * are still being set up: the router waits for its start, then routes it again.
   */
  awaitsSetup(url: string): boolean {
    if (this.awaitingSetup.length === 0) return false;
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    return this.awaitingSetup.some((prefix) => path.startsWith(prefix) || path === prefix.slice(0, -1));
  }

  /** Every setup ran: the table now holds each controller's methods. */
  setUpDone(): void {
    this.plugins = new PluginRouteTable(this.allPlugins);
    this.awaitingSetup = [];
  }

  /** Whether the app itself has a plugin, function, event or job of this name (a deployment may not take it). */
  isRegistryName(kind: DeploymentKind, name: string): boolean {
    if (kind === 'plugin') return this.registryPluginNames.has(name);
    if (kind === 'function') return this.registryFunctions.has(name);
    return (kind === 'event' ? this.registryEventNames : this.registryJobNames).has(name);
  }

  /**
   * The names the app's own events or jobs go by (set by the events engine once it has named
   * them): deliveries and runs are kept by name, so a deployment may not take one, and a deployed
   * version of that name already live is left out of `deployedEvents()` / `deployedJobs()`.
   */
  setRegistryNames(kind: 'event' | 'job', names: Iterable<string>): void {
    if (kind === 'event') this.registryEventNames = new Set(names);
    else this.registryJobNames = new Set(names);
  }

  /** The deployed event handlers live now, by deployment name (a new map after each swap). */
  deployedEvents(): ReadonlyMap<string, BCMSEvent> {
    return this.events;
  }

  /** The deployed jobs live now, by deployment name (a new map after each swap). */
  deployedJobs(): ReadonlyMap<string, BCMSJob> {
    return this.jobs;
  }

  /**
   * Calls `listener` after each swap of what is deployed (a deploy, an undeploy, a rollback, on
   * this instance or another), once the new tables are in place: the events engine reads
   * `deployedEvents()` and `deployedJobs()` again then. It should not throw: what it throws is
   * caught and dropped, so that one listener never stops the swap or the others.
   */
  onDeployedChange(listener: () => void): void {
    if (typeof listener !== 'function') throw new TypeError('onDeployedChange: argument listener must be a function');
    this.changeListeners.push(listener);
  }

  /** The app's own functions, once their factories ran. */
  setRegistryFunctions(functions: ReadonlyMap<string, BcmsFunction>): void {
    this.registryFunctions = functions;
  }

  /** Serving starts: with what deployments went live, or the app's own functions alone. */
  open(): void {
    this.functions ??= new Map(this.registryFunctions);
  }

  /** Swaps in a deployed set. */
  apply(set: DeployedSet): void {
    const added = set.plugins.filter((plugin) => !this.registryPluginNames.has(plugin.name));
    this.deployedPlugins = added;
    this.allPlugins = [...this.registryPlugins, ...added];
    this.plugins = new PluginRouteTable(this.allPlugins);
    this.functions = new Map([...[...set.functions].filter(([name]) => !this.registryFunctions.has(name)), ...this.registryFunctions]);
    this.events = new Map([...set.events].filter(([name]) => !this.registryEventNames.has(name)));
    this.jobs = new Map([...set.jobs].filter(([name]) => !this.registryJobNames.has(name)));
    for (const listener of this.changeListeners) {
      try {
        listener();
      } catch {
        // The swap is done whatever a listener does: it logs its own errors (this class has no logger).
      }
    }
  }
}

import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ErrorCode } from './http/errors';

/** What an extension is to the metrics: its kind and name, as deployments name them. */
export type ExtensionKind = 'plugin' | 'function';

/**
 * What the router tells the metrics (the `metrics` option) as it happens. Without the option it
 * is `NO_METRICS`, whose methods do nothing, so that no part asks whether metrics are on.
 */
export interface Metrics {
  /** A request the router answered: its path (router-relative), status and time. */
  request(path: string, status: number, seconds: number): void;
  /** A request answered with an error code (a signature's refusal among them). */
  error(code: ErrorCode): void;
  /** `bcms-ext deploy`, `rollback` or `undeploy` ended: `ok`, or the error code it was answered. */
  deploy(action: 'deploy' | 'rollback' | 'undeploy', outcome: string): void;
  /** An isolate was started; one ended by itself (a crash: not one the service ended). */
  isolateStarted(kind: string): void;
  isolateCrashed(kind: string): void;
  /** The database was found unreachable (`false`) or reachable again (`true`). */
  database(up: boolean): void;
  /** An event delivery ended: `delivered`, `retrying` (it threw; tried again later) or `failed` (its last try). */
  delivery(handler: string, outcome: 'delivered' | 'retrying' | 'failed'): void;
  /** A job's tick ended here: its run `succeeded`, `failed` or `timed_out`, or it was `skipped` (a run still going). */
  jobRun(job: string, outcome: 'succeeded' | 'failed' | 'timed_out' | 'skipped'): void;
}

const nothing = (): void => {};
/** Metrics off: every method does nothing. */
export const NO_METRICS: Metrics = Object.freeze({
  request: nothing,
  error: nothing,
  deploy: nothing,
  isolateStarted: nothing,
  isolateCrashed: nothing,
  database: nothing,
  delivery: nothing,
  jobRun: nothing,
});

/** The codes that mean a signed call (or an unsigned call to a private function) was refused. */
const SIGNATURE_REFUSALS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'SIGNATURE_REQUIRED',
  'SIGNATURE_INVALID',
  'SIGNATURE_EXPIRED',
  'SIGNATURE_REPLAYED',
  'DIGEST_MISMATCH',
  'KEY_FORBIDDEN',
  'KEY_EXPIRED',
]);

const FUNCTION_PREFIX = '/api/function/';
const PLUGIN_PREFIX = '/api/plugin/';
const OWN_PREFIX = '/api/extensions/';

/** The request families of `bcms_requests_total`: everything under `/api/extensions/` is `service` (the SDK's scripts too), the shell's pages and plugin UIs' files `ui`. */
type Family = 'function' | 'plugin' | 'service' | 'ui';

/**
 * The router's metrics in prom-client's registry of their own (`router.metrics`, which an app
 * that serves its own `/metrics` merges with `Registry.merge`). `known` says whether an
 * extension is served now: a name only becomes a label when it is, so that requests for made-up
 * names cannot grow the series without bound.
 */
export function createMetrics(known: (kind: ExtensionKind, name: string) => boolean): { metrics: Metrics; registry: Registry } {
  // Loaded only when the option asks for metrics.
  const prom = require('prom-client') as typeof import('prom-client');
  const registry = new prom.Registry();
  const registers = [registry];
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> => new prom.Counter({ name, help, labelNames, registers });
  const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[]): Histogram<L> => new prom.Histogram({ name, help, labelNames, registers });

  const requests = counter('bcms_requests_total', 'Requests the router answered, by family (function, plugin, service, ui) and status.', ['family', 'status']);
  const requestSeconds = histogram('bcms_request_duration_seconds', 'Time from a request reaching the router to its answer, by family.', ['family']);
  const calls = counter('bcms_extension_calls_total', 'Calls of each plugin and function served now, by outcome: ok (2xx, 3xx), refused (4xx), error (5xx).', ['kind', 'extension', 'outcome']);
  const callSeconds = histogram('bcms_extension_call_duration_seconds', 'Time to answer a call of each plugin and function served now.', ['kind', 'extension']);
  const errors = counter('bcms_errors_total', 'Requests answered with an error, by its code.', ['code']);
  const refusals = counter('bcms_signature_refusals_total', 'Signed calls refused (and unsigned calls of private functions), by code.', ['code']);
  const deploys = counter('bcms_deploys_total', 'Deploys, rollbacks and undeploys, by outcome: ok, or the error code answered.', ['action', 'outcome']);
  const isolateStarts = counter('bcms_isolate_starts_total', 'Isolates started (a process each), by the kind of extension they run.', ['kind']);
  const isolateCrashes = counter('bcms_isolate_crashes_total', 'Isolates that ended by themselves (a crash, an exit, the memory limit), by kind.', ['kind']);
  const outages = counter('bcms_database_outages_total', 'Times the database was found unreachable after it had been reachable.', []);
  const databaseUp: Gauge = new prom.Gauge({ name: 'bcms_database_up', help: '1 while the database answers, 0 while it cannot be reached.', registers });
  const deliveries = counter('bcms_event_deliveries_total', 'Event deliveries ended here, by handler and outcome: delivered, retrying (it threw; tried again), failed (the last try).', [
    'handler',
    'outcome',
  ]);
  const jobRuns = counter('bcms_job_runs_total', 'Job ticks taken here, by job and outcome: succeeded, failed, timed_out, or skipped (a run was still going).', ['job', 'outcome']);
  databaseUp.set(1);
  let up = true;

  const metrics: Metrics = {
    request(path, status, seconds) {
      const family: Family = path.startsWith(FUNCTION_PREFIX) || path === '/api/function' ? 'function' : path.startsWith(PLUGIN_PREFIX) ? 'plugin' : path.startsWith(OWN_PREFIX) ? 'service' : 'ui';
      requests.inc({ family, status: String(status) });
      requestSeconds.observe({ family }, seconds);
      if (family !== 'function' && family !== 'plugin') return;
      const rest = path.slice(family === 'function' ? FUNCTION_PREFIX.length : PLUGIN_PREFIX.length);
      const end = rest.indexOf('/');
      const name = end === -1 ? rest : rest.slice(0, end);
      if (!known(family, name)) return;
      calls.inc({ kind: family, extension: name, outcome: status < 400 ? 'ok' : status < 500 ? 'refused' : 'error' });
      callSeconds.observe({ kind: family, extension: name }, seconds);
    },
    error(code) {
      errors.inc({ code });
      if (SIGNATURE_REFUSALS.has(code)) refusals.inc({ code });
    },
    deploy: (action, outcome) => deploys.inc({ action, outcome }),
    isolateStarted: (kind) => isolateStarts.inc({ kind }),
    isolateCrashed: (kind) => isolateCrashes.inc({ kind }),
    database(nowUp) {
      if (nowUp === up) return;
      up = nowUp;
      databaseUp.set(nowUp ? 1 : 0);
      if (!nowUp) outages.inc();
    },
    delivery: (handler, outcome) => deliveries.inc({ handler, outcome }),
    jobRun: (job, outcome) => jobRuns.inc({ job, outcome }),
  };
  return { metrics, registry };
}

/** The router's metrics as the `metrics` option says: none (`NO_METRICS`), or a registry of their own. */
export function metricsFor(
  option: { token: string | undefined } | undefined,
  live: { readonly functions: ReadonlyMap<string, unknown> | undefined; readonly plugins: { readonly pluginNames: ReadonlySet<string> } },
): { metrics: Metrics; registry: Registry | undefined } {
  if (option === undefined) return { metrics: NO_METRICS, registry: undefined };
  return createMetrics((kind, name) => (kind === 'function' ? live.functions?.has(name) === true : live.plugins.pluginNames.has(name)));
}

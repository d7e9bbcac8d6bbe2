import type { ContentStore } from '../db/store';
import type { ExtensionHealth } from '../deploy/deployed';
import { createController, createControllerMethod } from '../plugin/create';
import type { BcmsController } from '../plugin/types';

export const HEALTH_PATH = '/api/extensions/health';

/** How long the database's `select 1` may take before the check says `down`: a balancer waits a few seconds at most. */
export const DATABASE_CHECK_MS = 2_000;

/** What `GET /api/extensions/health` answers (docs/http.md). */
export interface Health {
  /** `ok` (200); `starting` while the router's start is under way, `down` when the database cannot be reached or the start failed (503). */
  status: 'ok' | 'starting' | 'down';
  /** Whether a `select 1` on the router's pool came back within DATABASE_CHECK_MS. */
  database: 'ok' | 'down';
  /**
   * The extensions of this instance that run in isolates (the deployed ones, and the app's with
   * `isolate: 'all'`), by state: `failing` ones crash soon after they load and are being restarted,
   * `failed` ones did not load here. Said, never a 503: every instance runs the same code, and a
   * balancer that took them all out for one extension's fault would take the whole service down.
   */
  isolates: { running: number; failing: number; failed: number };
}

/**
 * `GET /api/extensions/health`, for load balancers and orchestrators: no credentials, nothing
 * internal (no names, no errors, no addresses). Answered while the router starts, without waiting
 * for it. Concurrent checks share one `select 1`.
 */
export function createHealthController(sources: {
  store: ContentStore;
  /** The router's start (`router.ready`): under way, done, or failed (a registry that cannot work). */
  ready: Promise<void>;
  /** How each extension running in isolates fares (`failed`: did not load here). */
  extensions: () => Iterable<ExtensionHealth | { state: 'failed' }>;
}): BcmsController {
  let started: 'starting' | 'ok' | 'failed' = 'starting';
  sources.ready.then(
    () => {
      started = 'ok';
    },
    () => {
      started = 'failed';
    },
  );
  let checking: Promise<'ok' | 'down'> | undefined;
  const database = (): Promise<'ok' | 'down'> => {
    checking ??= checkDatabase(sources.store).finally(() => {
      checking = undefined;
    });
    return checking;
  };
  return createController({
    name: 'Health',
    path: '/health',
    methods: () => ({
      health: createControllerMethod({
        type: 'get',
        // Described by hand in the document (lib/openapi/document.ts): its 503 is this body, not an error's.
        doc: { ignore: true },
        handler: async ({ response }): Promise<Health> => {
          const isolates = { running: 0, failing: 0, failed: 0 };
          for (const { state } of sources.extensions()) isolates[state]++;
          const db = await database();
          const status = db === 'down' || started === 'failed' ? 'down' : started;
          response.setHeader('Cache-Control', 'no-store');
          if (status !== 'ok') response.status(503);
          return { status, database: db, isolates };
        },
      }),
    }),
  });
}

/**
 * `select 1` on the store's pool, within DATABASE_CHECK_MS: whether the database answers. Not
 * through `store.run`, which would first run the migrations again after an outage (the next request
 * that uses the database does), and the check would time that, not the database.
 */
function checkDatabase(store: ContentStore): Promise<'ok' | 'down'> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('down'), DATABASE_CHECK_MS).unref();
    // Any failure is `down`; the answer names nothing of it (the requests that meet an outage log it).
    Promise.resolve(store.database.knex.raw('select 1'))
      .then(
        () => resolve('ok'),
        () => resolve('down'),
      )
      .finally(() => clearTimeout(timer));
  });
}

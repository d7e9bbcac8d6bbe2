import type { EventEmitter } from 'node:events';
import type { Router } from 'express';
import type { Knex } from 'knex';
import type { Registry } from 'prom-client';
import type { BcmsRepo } from './db/repository';
import type { BcmsEventModule, BcmsJobModule } from './events/types';
import type { BcmsFunctionModule } from './function/types';
import type { BcmsPlugin } from './plugin/types';

/** What `bcmsExtensions(registry)` serves from the app's own code: its plugins, functions, events and jobs (deployed ones come on top). */
export interface BcmsRegistry {
  plugins?: BcmsPlugin[];
  functions?: BcmsFunctionModule[];
  /** Event handlers (`createBcmsEvent`): run for each committed write of their scope, and each `emit`, once across instances. */
  events?: BcmsEventModule[];
  /** Jobs (`createBcmsJob`): run on each tick of their cron, once across instances. */
  jobs?: BcmsJobModule[];
}

/** What `bcmsExtensions` returns: an Express router, plus its life cycle. */
export interface BcmsExtensionsRouter extends Router {
  /**
   * Resolves once every function, event and job factory has run, the database is migrated and the
   * event handlers recorded (or the database found unreachable: requests then retry); rejects with
   * a registry that cannot work.
   */
  readonly ready: Promise<void>;
  /** The Knex instance the router uses (migrated once `ready` resolved). */
  readonly db: Knex;
  /** The content repository handlers get as `repo` (templates and entries), for the host's own code. */
  readonly repo: BcmsRepo;
  /** `'socket'`: a content change through the SDK's routes, or an event a plugin sent with `useSocket()` (`{ scope, eventName, eventData }`), from this process or an isolate. */
  readonly events: EventEmitter;
  /**
   * Records a custom event, delivered to each matching handler on every instance as a write's are
   * (BCMS's `useBcmsEventManager().emit`, bound to this router). Rejects a scope of `ENTRY`,
   * `TEMPLATE` or `ALL`, and a payload past 1 MB as JSON.
   */
  emit(scope: string, method: string, payload: unknown): Promise<void>;
  /** The OpenAPI 3.1 document of what it serves now (`GET /api/extensions/openapi.json`), once `ready` resolved. */
  openapi(): Record<string, unknown>;
  /**
   * With the `metrics` option, the prom-client registry `GET /api/extensions/metrics` serves: an app
   * that serves its own metrics merges it (`Registry.merge([register, router.metrics])`). Else undefined.
   */
  readonly metrics: Registry | undefined;
  /** Closes what the router opened: its pool, or its embedded database. */
  close(): Promise<void>;
}

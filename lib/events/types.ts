/**
 * BCMS's other two extension points, with BCMS's names and shapes: an event handler runs for each
 * committed write of a scope (entries, templates) and for each custom `emit`; a job runs on its
 * cron's ticks. Both are declared by a factory, as BCMS's files do:
 *
 * @example
 * export default createBcmsEvent(async () => ({
 *   config: { scope: BCMSEventConfigScope.ENTRY, method: BCMSEventConfigMethod.ALL },
 *   handler: async ({ scope, method, payload }) => { ... },
 * }));
 * export default createBcmsJob(async () => ({
 *   cron: { minute: '*', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' },
 *   handler: async () => { ... },
 * }));
 */

/** BCMS's scopes (its values). Only `ENTRY` and `TEMPLATE` are fired by writes here; any other, or a string of your own, by `emit`. */
export enum BCMSEventConfigScope {
  ALL = 'ALL',
  API_KEY = 'API_KEY',
  COLOR = 'COLOR',
  ENTRY = 'ENTRY',
  GROUP = 'GROUP',
  LANGUAGE = 'LANGUAGE',
  MEDIA = 'MEDIA',
  STATUS = 'STATUS',
  TAG = 'TAG',
  TEMPLATE = 'TEMPLATE',
  TEMPLATE_ORGANIZER = 'TEMPLATE_ORGANIZER',
  USER = 'USER',
  WIDGET = 'WIDGET',
}

/** BCMS's methods (its values). */
export enum BCMSEventConfigMethod {
  ALL = 'ALL',
  ADD = 'ADD',
  UPDATE = 'UPDATE',
  DELETE = 'DELETE',
}

/** What an event handler subscribes to: a scope (`ENTRY`, `TEMPLATE`, `ALL` or one of your own) and a method (`ADD`, `UPDATE`, `DELETE`, `ALL` or one of your own). */
export interface BCMSEventConfig {
  scope: BCMSEventConfigScope | string;
  method: BCMSEventConfigMethod | string;
}

/** What a handler is called with: for a write, the document as written (as deleted, for DELETE). */
export interface BCMSEventHandlerData<Payload = unknown> {
  scope: BCMSEventConfigScope | string;
  method: BCMSEventConfigMethod | string;
  payload: Payload;
}

/** An event handler as `createBcmsEvent`'s factory returns it: its config and the function each matching event is delivered to. */
export type BCMSEventHandler<Payload = unknown> = (data: BCMSEventHandlerData<Payload>) => Promise<void> | void;

/** What an event factory returns. */
export interface BCMSEvent {
  /**
   * Ours, beside BCMS's fields: the handler's name across instances (deliveries are kept by it).
   * A deployed event is named after its file; a registry one without a name is named by its
   * position and config, so every instance must have the same registry.
   */
  name?: string;
  config: BCMSEventConfig;
  handler: BCMSEventHandler;
}

/** BCMS's cron fields, each as in a crontab (`*`, `5`, `*\/15`, `1-5`, `MON`). */
export interface BCMSJobCron {
  /** Ours, beside BCMS's fields: a seconds field, for jobs that run more often than once a minute. Default: at second 0. */
  second?: string;
  minute: string;
  hour: string;
  dayOfMonth: string;
  month: string;
  dayOfWeek: string;
}

/** A job as `createBcmsJob`'s factory returns it: its cron fields and the function run once a tick, across every instance. */
export type BCMSJobHandler = () => Promise<void> | void;

/** What a job factory returns. */
export interface BCMSJob {
  /** Ours, as `BCMSEvent.name`. */
  name?: string;
  cron: BCMSJobCron;
  handler: BCMSJobHandler;
}

/** An event as the registry and a bundle hold it: BCMS's factory. */
export type BcmsEventModule = () => Promise<BCMSEvent>;
/** A job as the registry and a bundle hold it: BCMS's factory. */
export type BcmsJobModule = () => Promise<BCMSJob>;

/** What `useBcmsEventManager()` returns (BCMS names the type `BCMSEventManager`, as the object). */
export interface BcmsEventManager {
  /** Records an event of any scope (committed at once) and delivers it to each matching handler, as writes are. */
  emit(scope: BCMSEventConfigScope | string, method: BCMSEventConfigMethod | string, payload: unknown): Promise<void>;
}

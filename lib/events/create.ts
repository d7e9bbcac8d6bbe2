import type { BCMSEvent, BCMSJob, BcmsEventModule, BcmsJobModule } from './types';

/**
 * Declares an event handler, as a BCMS event file does (`src/events/<name>.ts`): the factory runs
 * once where the handler is loaded; the handler then runs for each matching write or `emit`.
 */
export function createBcmsEvent(factory: () => Promise<BCMSEvent>): BcmsEventModule {
  if (typeof factory !== 'function') throw new TypeError('createBcmsEvent: argument factory must be an async function returning { config: { scope, method }, handler }');
  return factory;
}

/** Declares a job, as a BCMS job file does (`src/jobs/<name>.ts`): its handler runs on each tick of its cron. */
export function createBcmsJob(factory: () => Promise<BCMSJob>): BcmsJobModule {
  if (typeof factory !== 'function') throw new TypeError('createBcmsJob: argument factory must be an async function returning { cron, handler }');
  return factory;
}

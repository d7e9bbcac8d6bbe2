import type { BCMSEvent, BCMSJob, BCMSJobCron } from './types';

/** cron-parser (with luxon, 4% of loading the package) is loaded by the first job, not by every start. */
let cronParser: typeof import('cron-parser') | undefined;
const parser = (): typeof import('cron-parser') => (cronParser ??= require('cron-parser') as typeof import('cron-parser'));

const CRON_FIELDS: readonly (keyof BCMSJobCron)[] = ['minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek'];

/** A name deliveries and runs are kept under: what `?handler=`, `?job=` and `undeploy` take. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:* ,/-]{0,199}$/;

/** What an event factory returned, checked: `{ config: { scope, method }, handler }`. Throws saying what is wrong. */
export function checkEvent(value: unknown, where: string): BCMSEvent {
  const event = value as BCMSEvent | null;
  if (event === null || typeof event !== 'object') throw new TypeError(`${where}'s factory must resolve to { config: { scope, method }, handler }, got ${describe(value)}`);
  const config = event.config as unknown as Record<string, unknown> | null | undefined;
  if (config === null || typeof config !== 'object') throw new TypeError(`${where} has no config: it must be { scope, method } (BCMSEventConfigScope, BCMSEventConfigMethod)`);
  for (const field of ['scope', 'method'] as const) {
    if (typeof config[field] !== 'string' || config[field] === '') {
      throw new TypeError(`${where}'s config.${field} must be a string (a BCMSEventConfig${field === 'scope' ? 'Scope' : 'Method'} or one of your own), got ${describe(config[field])}`);
    }
  }
  if (typeof event.handler !== 'function') throw new TypeError(`${where}'s handler must be a function, got ${describe(event.handler)}`);
  checkName(event.name, where);
  return event;
}

/** What a job factory returned, checked: `{ cron: { minute, hour, dayOfMonth, month, dayOfWeek }, handler }`. */
export function checkJob(value: unknown, where: string): BCMSJob {
  const job = value as BCMSJob | null;
  if (job === null || typeof job !== 'object') throw new TypeError(`${where}'s factory must resolve to { cron: { ${CRON_FIELDS.join(', ')} }, handler }, got ${describe(value)}`);
  cronLine(job.cron, where);
  if (typeof job.handler !== 'function') throw new TypeError(`${where}'s handler must be a function, got ${describe(job.handler)}`);
  checkName(job.name, where);
  return job;
}

/** BCMS's cron fields as one crontab line (seconds first when `second` is given), checked by cron-parser. */
export function cronLine(cron: unknown, where: string): string {
  const fields = cron as Record<string, unknown> | null | undefined;
  if (fields === null || typeof fields !== 'object') throw new TypeError(`${where} has no cron: it must be { ${CRON_FIELDS.join(', ')} }, each a crontab field`);
  const field = (name: string, required: boolean): string | undefined => {
    const value = fields[name];
    if (value === undefined && !required) return undefined;
    // One field each: a space in one would shift the others.
    if (typeof value !== 'string' || value.trim() === '' || /\s/.test(value.trim()) || value.length > 100) {
      throw new TypeError(
        `${where}'s cron.${name} must be one crontab field of at most 100 characters ("*", "5", "*/15", "1-5", "MON"), got ${describe(typeof value === 'string' && value.length > 100 ? `${value.slice(0, 40)}...` : value)}`,
      );
    }
    return value.trim();
  };
  const second = field('second', false);
  const line = [...(second === undefined ? [] : [second]), ...CRON_FIELDS.map((name) => field(name, true))].join(' ');
  try {
    // Read to its first tick: a schedule that never comes (the 31st of February) is refused too.
    parser().parseExpression(line).next();
  } catch (error) {
    throw new TypeError(`${where}'s cron "${line}" is not a crontab schedule: ${error instanceof Error ? error.message : String(error)}`);
  }
  return line;
}

/** A value as an error message names it: its JSON, or its type. */
function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}

/**
 * A job's first tick after `after`, read in the process's time zone as BCMS's cron jobs are (set
 * `TZ` alike on every instance); the scheduler and the listing both ask this.
 */
export function nextTick(line: string, after: Date): Date {
  return parser().parseExpression(line, { currentDate: after }).next().toDate();
}

function checkName(name: unknown, where: string): void {
  if (name !== undefined && (typeof name !== 'string' || !NAME.test(name))) {
    throw new TypeError(`${where}'s name must be a string of letters, digits and . _ - (at most 200), not ${JSON.stringify(name)}`);
  }
}

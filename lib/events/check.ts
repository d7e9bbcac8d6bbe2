import parser from 'cron-parser';
import type { BCMSEvent, BCMSJob, BCMSJobCron } from './types';

const CRON_FIELDS: readonly (keyof BCMSJobCron)[] = ['minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek'];

/** A name deliveries and runs are kept under: what `?handler=`, `?job=` and `undeploy` take. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:* ,/-]{0,199}$/;

/** What an event factory returned, checked: `{ config: { scope, method }, handler }`. Throws saying what is wrong. */
export function checkEvent(value: unknown, where: string): BCMSEvent {
  const event = value as BCMSEvent | null;
  if (event === null || typeof event !== 'object') throw new TypeError(`${where}: the factory must return { config: { scope, method }, handler }`);
  const config = event.config as Partial<BCMSEvent['config']> | undefined;
  if (config === null || typeof config !== 'object' || typeof config.scope !== 'string' || config.scope === '' || typeof config.method !== 'string' || config.method === '') {
    throw new TypeError(`${where}: config must be { scope, method }, each a string (BCMSEventConfigScope, BCMSEventConfigMethod)`);
  }
  if (typeof event.handler !== 'function') throw new TypeError(`${where}: handler must be a function`);
  checkName(event.name, where);
  return event;
}

/** What a job factory returned, checked: `{ cron: { minute, hour, dayOfMonth, month, dayOfWeek }, handler }`. */
export function checkJob(value: unknown, where: string): BCMSJob {
  const job = value as BCMSJob | null;
  if (job === null || typeof job !== 'object') throw new TypeError(`${where}: the factory must return { cron: { minute, hour, dayOfMonth, month, dayOfWeek }, handler }`);
  cronLine(job.cron, where);
  if (typeof job.handler !== 'function') throw new TypeError(`${where}: handler must be a function`);
  checkName(job.name, where);
  return job;
}

/** BCMS's cron fields as one crontab line, checked by cron-parser. */
export function cronLine(cron: unknown, where: string): string {
  const fields = cron as Record<string, unknown> | null;
  if (fields === null || typeof fields !== 'object') throw new TypeError(`${where}: cron must be { ${CRON_FIELDS.join(', ')} }, each a string`);
  for (const field of CRON_FIELDS) {
    if (typeof fields[field] !== 'string' || (fields[field] as string).trim() === '' || /\s/.test((fields[field] as string).trim())) {
      throw new TypeError(`${where}: cron.${field} must be one crontab field ("*", "5", "*/15", "1-5"), not ${JSON.stringify(fields[field])}`);
    }
  }
  const second = fields.second;
  if (second !== undefined && (typeof second !== 'string' || second.trim() === '' || /\s/.test(second.trim()))) {
    throw new TypeError(`${where}: cron.second, when given, must be one crontab field ("*/10", "0"), not ${JSON.stringify(second)}`);
  }
  // cron-parser reads six fields as seconds first.
  const line = [...(second === undefined ? [] : [second.trim()]), ...CRON_FIELDS.map((field) => (fields[field] as string).trim())].join(' ');
  try {
    parser.parseExpression(line);
  } catch (error) {
    throw new TypeError(`${where}: cron "${line}" cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return line;
}

function checkName(name: unknown, where: string): void {
  if (name !== undefined && (typeof name !== 'string' || !NAME.test(name))) {
    throw new TypeError(`${where}: name must be a string of letters, digits and . _ - (at most 200), not ${JSON.stringify(name)}`);
  }
}

import type { ListedDelivery, ListedHandler, ListedJob, ListedRun } from '../events/listing';
import { parseArgs, UsageError, type Io } from './_io';
import { callSigned, target } from './deploy';

export const EVENTS_USAGE = `  events [NAME] [--failed] [--limit N] [--json]
                                            Each event handler (or NAME) with its deliveries by
                                            status and its N most recent (default 20): status,
                                            attempts, duration, and its last error. --failed: only
                                            failed deliveries.
  jobs [NAME] [--limit N] [--json]          Each job (or NAME) with its next tick and its N most
                                            recent runs: status, duration, and its last error.
      events and jobs reach BCMS_URL signed with the deploy key, as list does.
`;

/** What to do after the service refused: the deploy key is what these commands sign with. */
const HINTS = {
  403: 'These lists take a key that may deploy: bcms-ext keys create --name deployer --deploy.',
  400: 'See bcms-ext help for the options.',
};

export async function runEvents(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { failed: 'boolean', limit: 'string', json: 'boolean' });
  const name = onlyName(positionals, 'handler');
  const query = new URLSearchParams({
    ...(name === undefined ? {} : { handler: name }),
    ...(flags.failed === true ? { status: 'failed' } : {}),
    ...limitOf(flags.limit),
  });
  const { answer } = await callSigned(target(io, cwd), 'GET', withQuery('/api/extensions/event-deliveries', query), undefined, HINTS);
  const handlers = answer.handlers as ListedHandler[];
  if (flags.json === true) {
    io.out(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  if (handlers.length === 0) {
    // Named and not found: say so, and where the names are; none at all: what makes one.
    if (name !== undefined) throw new UsageError(`no event handler is named "${name}": bcms-ext events lists them`);
    io.out("No event handler yet: a createBcmsEvent in the app's registry, or a deployed src/events/*.ts, makes one.\n");
    return 0;
  }
  const blocks = handlers.map((handler) => {
    const counts = Object.entries(handler.counts)
      .map(([status, count]) => `${count} ${status}`)
      .join(', ');
    const head = `${handler.name}  ${handler.scope} ${handler.method}  ${handler.source}${handler.active ? '' : '  inactive'}  (${counts})`;
    const total = Object.values(handler.counts).reduce((sum, count) => sum + count, 0);
    if (handler.deliveries.length === 0) return `${head}\n  ${flags.failed === true ? 'No failed delivery.' : total === 0 ? 'No delivery yet.' : 'No delivery listed (--limit 0).'}`;
    const rows = handler.deliveries.map((d) => [d.id, d.scope, d.method, d.doc ?? '', d.status, String(d.attempts), d.createdAt, duration(d.durationMs)]);
    const lines = table([['DELIVERY', 'SCOPE', 'METHOD', 'DOC', 'STATUS', 'ATTEMPTS', 'CREATED', 'DURATION'], ...rows]);
    const last = lastError(handler.deliveries, (d) => `delivery ${d.id}, ${d.status}`);
    return [head, ...lines.map((line) => `  ${line}`), ...(last === undefined ? [] : [`  ${last}`])].join('\n');
  });
  io.out(`${blocks.join('\n\n')}\n`);
  return 0;
}

export async function runJobs(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { limit: 'string', json: 'boolean' });
  const name = onlyName(positionals, 'job');
  const query = new URLSearchParams({ ...(name === undefined ? {} : { job: name }), ...limitOf(flags.limit) });
  const { answer } = await callSigned(target(io, cwd), 'GET', withQuery('/api/extensions/jobs', query), undefined, HINTS);
  const jobs = answer.jobs as ListedJob[];
  if (flags.json === true) {
    io.out(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  if (jobs.length === 0) {
    if (name !== undefined) throw new UsageError(`no job is named "${name}": bcms-ext jobs lists them`);
    io.out("No job yet: a createBcmsJob in the app's registry, or a deployed src/jobs/*.ts, makes one.\n");
    return 0;
  }
  const blocks = jobs.map((job) => {
    const head = `${job.name}  ${job.cron}  ${job.source}  ${job.active ? `next tick ${job.nextTickAt ?? 'never (its cron does not parse)'}` : 'inactive'}`;
    if (job.runs.length === 0) return `${head}\n  No run yet.`;
    const rows = job.runs.map((r) => [r.id, r.tickAt, r.status, r.instance ?? '', duration(r.durationMs)]);
    const lines = table([['RUN', 'TICK', 'STATUS', 'INSTANCE', 'DURATION'], ...rows]);
    const last = lastError(job.runs, (r: ListedRun) => `run ${r.id}, tick ${r.tickAt}, ${r.status}`);
    return [head, ...lines.map((line) => `  ${line}`), ...(last === undefined ? [] : [`  ${last}`])].join('\n');
  });
  io.out(`${blocks.join('\n\n')}\n`);
  return 0;
}

function onlyName(positionals: string[], what: string): string | undefined {
  if (positionals.length > 1) throw new UsageError(`name one ${what} at most, got ${positionals.length}: ${positionals.join(' ')}`);
  return positionals[0];
}

/** `--limit`, checked here as the service checks it, so that the mistake is told without a round trip. */
function limitOf(flag: string | true | undefined): { limit?: string } {
  if (flag === undefined) return {};
  if (typeof flag !== 'string' || !/^\d{1,3}$/.test(flag) || Number(flag) > 200) throw new UsageError(`--limit is a whole number from 0 to 200, got ${JSON.stringify(flag)}`);
  return { limit: flag };
}

function withQuery(path: string, query: URLSearchParams): string {
  const text = query.toString();
  return text === '' ? path : `${path}?${text}`;
}

function duration(ms: number | null): string {
  if (ms === null) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** The line on the most recent listed error (its first line: a stack's message), saying which delivery or run it was. */
function lastError<T extends ListedDelivery | ListedRun>(listed: readonly T[], which: (item: T) => string): string | undefined {
  const item = listed.find((candidate) => candidate.error !== null);
  return item === undefined ? undefined : `last error (${which(item)}): ${(item.error as string).split('\n')[0]?.trim()}`;
}

/** Columns padded to their widest cell, two spaces apart, as `list` prints them. */
function table(rows: string[][]): string[] {
  const widths = (rows[0] as string[]).map((_, column) => Math.max(...rows.map((row) => (row[column] as string).length)));
  return rows.map((row) =>
    row
      .map((cell, column) => cell.padEnd(widths[column] as number))
      .join('  ')
      .trimEnd(),
  );
}

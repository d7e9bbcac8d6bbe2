// The admin shell's Events and Jobs views (`<admin.path>/events`, `<admin.path>/jobs`, under
// "Developers"): each event handler with its recent deliveries, each job with its recent runs, read
// from `/api/extensions/event-deliveries` and `/api/extensions/jobs` with the shell's token (an
// ADMIN role holding READ sees them). Plain DOM, as the shell is; loaded only when a view opens.
import type { BcmsGlobal } from '../sdk/types';

// The answers' shapes (lib/events/listing.ts's, which the browser build cannot import: it reads Knex).
interface ListedDelivery {
  id: string;
  scope: string;
  method: string;
  doc: string | null;
  status: string;
  attempts: number;
  createdAt: string;
  durationMs: number | null;
  error: string | null;
}
interface ListedHandler {
  name: string;
  scope: string;
  method: string;
  source: string;
  active: boolean;
  counts: Record<string, number>;
  deliveries: ListedDelivery[];
}
interface ListedRun {
  id: string;
  tickAt: string;
  status: string;
  instance: string | null;
  startedAt: string;
  durationMs: number | null;
  error: string | null;
}
interface ListedJob {
  name: string;
  cron: string;
  source: string;
  active: boolean;
  nextTickAt: string | null;
  runs: ListedRun[];
}

export type ActivityView = 'events' | 'jobs';

const sdk = (): BcmsGlobal['sdk'] => (window as unknown as { bcms: BcmsGlobal }).bcms.sdk;

/** An element with attributes and children; text children are text, never HTML (errors are the handlers' own text). */
function h(tag: string, attributes: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

function duration(ms: number | null): string {
  if (ms === null) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A time as the reader's clock shows it, with the exact ISO time in a <time> for copying and tools. */
function time(iso: string | null): Node | string {
  if (iso === null) return '';
  return h('time', { datetime: iso, title: iso }, new Date(iso).toLocaleString());
}

/** An error's first line (a stack's message); the whole text on hover. */
function errorCell(error: string | null): Node | string {
  if (error === null) return '';
  return h('span', { class: 'bcms-activity-error', title: error }, error.split('\n')[0] ?? '');
}

function table(caption: string, head: string[], rows: (Node | string)[][]): HTMLElement {
  return h(
    'div',
    // Wide tables scroll sideways on a narrow screen: a Tab stop, named, so the keyboard can scroll them too.
    { class: 'bcms-activity-table', tabindex: '0', role: 'region', 'aria-label': caption },
    h(
      'table',
      {},
      h('caption', { class: 'bcms-visually-hidden' }, caption),
      h('thead', {}, h('tr', {}, ...head.map((name) => h('th', { scope: 'col' }, name)))),
      h('tbody', {}, ...rows.map((cells) => h('tr', {}, ...cells.map((cell) => h('td', {}, cell))))),
    ),
  );
}

function status(value: string): HTMLElement {
  return h('span', { class: `bcms-status bcms-status-${value}` }, value.replace('_', ' '));
}

/** The most recent listed error, said once under the table, as `bcms-ext` says it. */
function lastError<T extends ListedDelivery | ListedRun>(listed: readonly T[], which: (item: T) => string): HTMLElement[] {
  const item = listed.find((candidate) => candidate.error !== null);
  if (item === undefined) return [];
  return [h('p', { class: 'bcms-activity-last-error' }, h('strong', {}, 'Last error'), ` (${which(item)}): `, errorCell(item.error))];
}

function handlerSection(handler: ListedHandler): HTMLElement {
  const id = `bcms-handler-${handler.name.replace(/[^\w-]/g, '_')}`;
  const counts = Object.entries(handler.counts)
    .map(([name, count]) => `${count} ${name}`)
    .join(', ');
  const about = `${handler.scope} ${handler.method} · ${handler.source}${handler.active ? '' : ' · inactive'}`;
  const deliveries = handler.deliveries;
  return h(
    'section',
    { class: 'bcms-activity-item', 'aria-labelledby': id },
    h('h2', { id }, handler.name),
    h('p', {}, about, h('br'), counts),
    ...(deliveries.length === 0
      ? [h('p', {}, 'No delivery yet.')]
      : [
          table(
            `Recent deliveries to ${handler.name}`,
            ['Status', 'Attempts', 'Document', 'Event', 'Created', 'Duration', 'Error'],
            deliveries.map((d) => [status(d.status), String(d.attempts), d.doc ?? '', `${d.scope} ${d.method}`, time(d.createdAt), duration(d.durationMs), errorCell(d.error)]),
          ),
          ...lastError(deliveries, (d) => `delivery ${d.id}, ${d.status}`),
        ]),
  );
}

function jobSection(job: ListedJob): HTMLElement {
  const id = `bcms-job-${job.name.replace(/[^\w-]/g, '_')}`;
  const next = job.active ? ['Next tick: ', time(job.nextTickAt) || 'never (its cron does not parse)'] : ['Inactive'];
  return h(
    'section',
    { class: 'bcms-activity-item', 'aria-labelledby': id },
    h('h2', { id }, job.name),
    h('p', {}, h('code', {}, job.cron), ` · ${job.source}`, h('br'), ...next),
    ...(job.runs.length === 0
      ? [h('p', {}, 'No run yet.')]
      : [
          table(
            `Recent runs of ${job.name}`,
            ['Status', 'Tick', 'Instance', 'Started', 'Duration', 'Error'],
            job.runs.map((r) => [status(r.status), time(r.tickAt), r.instance ?? '', time(r.startedAt), duration(r.durationMs), errorCell(r.error)]),
          ),
          ...lastError(job.runs, (r) => `run ${r.id}, tick ${new Date(r.tickAt).toLocaleString()}, ${r.status.replace('_', ' ')}`),
        ]),
  );
}

/**
 * Renders the view into `container` (emptied first): a heading, a Refresh button and a section
 * per handler or job. A refusal (a role that may not see them) or an outage is said in the view;
 * a refused token signs the user out, as the SDK's every call does.
 */
export async function renderActivity(container: HTMLElement, view: ActivityView): Promise<void> {
  const title = view === 'events' ? 'Event handlers' : 'Jobs';
  const refresh = h('button', { type: 'button', class: 'bcms-activity-refresh' }, 'Refresh');
  const state = h('p', { role: 'status' }, view === 'events' ? 'Loading the event handlers…' : 'Loading the jobs…');
  const list = h('div', { class: 'bcms-activity-list' });
  container.replaceChildren(h('div', { class: 'bcms-activity-head' }, h('h1', {}, title), refresh), state, list);
  const load = async (): Promise<void> => {
    container.setAttribute('aria-busy', 'true');
    try {
      if (view === 'events') {
        const { handlers } = await sdk().send<{ handlers: ListedHandler[] }>({ url: '/extensions/event-deliveries', headers: { Authorization: '' } });
        list.replaceChildren(...handlers.map(handlerSection));
        state.textContent =
          handlers.length === 0
            ? 'No event handler yet: a createBcmsEvent in the app, or a deployed src/events/*.ts, makes one.'
            : `${handlers.length} event handler${handlers.length === 1 ? '' : 's'}, most recent deliveries first.`;
      } else {
        const { jobs } = await sdk().send<{ jobs: ListedJob[] }>({ url: '/extensions/jobs', headers: { Authorization: '' } });
        list.replaceChildren(...jobs.map(jobSection));
        state.textContent =
          jobs.length === 0 ? 'No job yet: a createBcmsJob in the app, or a deployed src/jobs/*.ts, makes one.' : `${jobs.length} job${jobs.length === 1 ? '' : 's'}, most recent runs first.`;
      }
      state.setAttribute('role', 'status');
      state.className = '';
    } catch (error) {
      const { status: code, message } = error as { status?: number; message: string };
      list.replaceChildren();
      state.setAttribute('role', 'alert');
      state.className = 'bcms-error';
      state.textContent =
        code === 403
          ? `Your account may not see ${view === 'events' ? 'the event handlers' : 'the jobs'}: it takes an ADMIN role that holds READ (${message})`
          : `${title} could not be listed: ${message}`;
    } finally {
      container.removeAttribute('aria-busy');
    }
  };
  refresh.addEventListener('click', () => void load());
  await load();
}

import { bcmsExtensions, createBcmsJob, type BcmsExtensionsRouter, type BcmsJobModule } from '../../lib';
import { cronLine } from '../../lib/events/check';
import { JWT_SECRET, memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { until } from '../support/wait';

// DESIGN.md "Events and jobs": each tick runs once across all instances; a run still going skips
// the next tick; jobTimeoutMs ends a run that hangs. The jobs here tick every 2 s (the seconds field,
// ours beside BCMS's five) so that several ticks fit in a test; BCMS's minute ticks take the same path.

jest.setTimeout(90_000);

const everyTwoSeconds = { second: '*/2', minute: '*', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Run {
  job: string;
  tick_at: Date;
  status: string;
  instance: string;
  error: string | null;
}

describe.each(backends())('jobs (%s)', (backend) => {
  let database: TestDatabase;
  const routers: BcmsExtensionsRouter[] = [];

  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await Promise.all(routers.map((router) => router.close()));
    await database.close();
  });

  const start = async (jobs: BcmsJobModule[], options: { jobTimeoutMs?: number } = {}) => {
    const router = bcmsExtensions({ jobs }, { jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger, database: database.knex, ...options });
    routers.push(router);
    await router.ready;
    return router;
  };
  const runsOf = async (job: string): Promise<Run[]> => (await database.knex('bcms_job_runs').where({ job }).orderBy('tick_at')) as Run[];

  test('two instances, three jobs: each tick runs once; a slow run skips the ticks it overlaps; a run past jobTimeoutMs is timed out', async () => {
    const counted: number[] = [];
    const slow: number[] = [];
    const counter = createBcmsJob(async () => ({ name: 'counter', cron: everyTwoSeconds, handler: async () => void counted.push(Date.now()) }));
    // Runs 5 s: the two ticks after its start find it still going.
    const slowJob = createBcmsJob(async () => ({
      name: 'slow',
      cron: everyTwoSeconds,
      handler: async () => {
        slow.push(Date.now());
        await sleep(5000);
      },
    }));
    const hangs = createBcmsJob(async () => ({ name: 'hangs', cron: everyTwoSeconds, handler: () => new Promise<void>(() => {}) }));
    const failing = createBcmsJob(async () => ({
      name: 'failing',
      cron: everyTwoSeconds,
      handler: async () => {
        throw new Error('no luck this time');
      },
    }));
    // Runs are held to 10 s: the one that hangs never ends; the slow one's 5 s are well within it, however busy the machine.
    await start([counter, slowJob, hangs, failing], { jobTimeoutMs: 10_000 });
    await start([counter, slowJob, hangs, failing], { jobTimeoutMs: 10_000 });
    // Until enough ticks have come, however long a busy machine takes to get there.
    await until(async () => {
      const [counted_, slow_, hangs_, failing_] = await Promise.all(['counter', 'slow', 'hangs', 'failing'].map(runsOf));
      return (
        counted_!.length >= 5 && slow_!.filter((run) => run.status === 'skipped').length >= 2 && hangs_![0]?.status === 'timed_out' && failing_!.filter((run) => run.status === 'failed').length >= 5
      );
    }, 200);
    await Promise.all(routers.splice(0).map((router) => router.close()));

    // Each tick once: as many runs as ticks, every tick distinct, both instances' handlers counted.
    const counterRuns = await runsOf('counter');
    expect(counterRuns.length).toBeGreaterThanOrEqual(5);
    expect(new Set(counterRuns.map((run) => run.tick_at.getTime())).size).toBe(counterRuns.length);
    expect(counted).toHaveLength(counterRuns.length);
    expect(counterRuns.every((run) => run.status === 'succeeded')).toBe(true);
    for (const run of counterRuns) expect(run.tick_at.getTime() % 2000).toBe(0);

    // The slow job never overlaps itself: the ticks during a run are recorded skipped.
    const slowRuns = await runsOf('slow');
    const ran = slowRuns.filter((run) => run.status !== 'skipped');
    expect(slowRuns.filter((run) => run.status === 'skipped').length).toBeGreaterThanOrEqual(2);
    expect(slowRuns.find((run) => run.status === 'skipped')?.error).toMatch(/still going/);
    expect(slow.length).toBe(ran.length);
    for (let i = 1; i < slow.length; i++) expect(slow[i]! - slow[i - 1]!).toBeGreaterThanOrEqual(5000);

    // The run that hangs is timed out at jobTimeoutMs (10 s), and a tick after it runs again.
    const hangRuns = await runsOf('hangs');
    expect(hangRuns[0]).toEqual(expect.objectContaining({ status: 'timed_out', error: expect.stringContaining('jobTimeoutMs') }));

    const failRuns = await runsOf('failing');
    expect(failRuns.length).toBeGreaterThanOrEqual(5);
    expect(failRuns.every((run) => run.status === 'failed' && run.error === 'no luck this time')).toBe(true);
  });

  test('a job that cannot work is refused when the router starts, saying what is wrong', async () => {
    const bad = createBcmsJob(async () => ({ cron: { ...everyTwoSeconds, minute: '61' }, handler: async () => {} }));
    const router = bcmsExtensions({ jobs: [bad] }, { logger: memoryLogger().logger, database: database.knex });
    await expect(router.ready).rejects.toThrow(/registry\.jobs\[0\]'s cron ".*61.*" is not a crontab schedule/);
    await router.close();
    expect(() => bcmsExtensions({ jobs: [{} as never] }, { database: database.knex })).toThrow(/registry.jobs must be an array of createBcmsJob/);
  });
});

test("BCMS's five fields read as a crontab; the seconds field is ours", () => {
  expect(cronLine({ minute: '*/5', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '1-5' }, 'job')).toBe('*/5 * * * 1-5');
  expect(cronLine(everyTwoSeconds, 'job')).toBe('*/2 * * * * *');
  expect(() => cronLine({ minute: '*', hour: '*', dayOfMonth: '*', month: '*' }, 'job')).toThrow(/cron.dayOfWeek must be one crontab field/);
  expect(() => cronLine({ minute: '* *', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' }, 'job')).toThrow(/cron.minute must be one crontab field/);
  // A schedule that never comes, and a field too long to read on every tick, are refused.
  expect(() => cronLine({ minute: '0', hour: '0', dayOfMonth: '31', month: '2,4', dayOfWeek: '*' }, 'job')).toThrow(/job's cron "0 0 31 2,4 \*" is not a crontab schedule/);
  expect(() => cronLine({ second: Array.from({ length: 40 }, (_, i) => i).join(','), minute: '*', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' }, 'job')).toThrow(
    /cron.second must be one crontab field of at most 100 characters/,
  );
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, listeningTestApp } from '../support/app';
import { runCli } from '../support/cli';
import { seedEventsAndJobs } from '../support/events';
import { hmacKey } from '../support/signature';

const service = listeningTestApp({});
let url: string;
let project: string;
beforeAll(async () => {
  url = `http://127.0.0.1:${service.port}`;
  await seedEventsAndJobs(service.t.router.db);
  // A project folder whose .env holds the service's URL and a deploy key, as for bcms-ext list.
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-cli-'));
  const key = await hmacKey(service.t.router.db, [], { deploy: true, name: 'cli reader' });
  fs.writeFileSync(path.join(project, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
}, 60_000);

describe('bcms-ext events', () => {
  test('a table per handler: its counts, its recent deliveries (status, attempts, duration), its last error', async () => {
    const { status, out, err } = await runCli(['events'], {}, project);
    expect({ status, err }).toEqual({ status: 0, err: '' });
    const blocks = out.trimEnd().split('\n\n');
    expect(blocks).toHaveLength(3);
    const [audit, entryLog, gone] = blocks as [string, string, string];
    expect(audit.split('\n')[0]).toBe('audit  ALL ALL  deployed  (0 pending, 0 running, 0 retrying, 0 delivered, 3 failed)');
    expect(audit).toMatch(/\n {2}DELIVERY\s+SCOPE\s+METHOD\s+DOC\s+STATUS\s+ATTEMPTS\s+CREATED\s+DURATION\n {2}\d+\s+ENTRY\s+ADD\s+ENTRY:e2\s+failed\s+5\s+\S+Z\s+7 ms\n/);
    expect(audit).toMatch(/\n {2}last error \(delivery \d+, failed\): TypeError: audit 2$/);
    const lines = entryLog.split('\n');
    expect(lines[0]).toBe('entry-log  ENTRY ALL  registry  (5 pending, 5 running, 5 retrying, 10 delivered, 5 failed)');
    expect(lines).toHaveLength(1 + 1 + 20 + 1); // the head, the columns, 20 deliveries, the last error
    expect(lines[2]).toMatch(/^ {2}\d+\s+ENTRY\s+UPDATE\s+ENTRY:e29\s+delivered\s+1\s+\S+Z\s+39 ms$/);
    expect(lines[5]).toMatch(/^ {2}\d+\s+ENTRY\s+ADD\s+ENTRY:e26\s+pending\s+0\s+\S+Z$/);
    // e28 is running, e27 retrying (its error kept): the most recent error.
    expect(lines[22]).toMatch(/^ {2}last error \(delivery \d+, retrying\): Error: boom 27$/);
    expect(gone).toBe('gone  TEMPLATE DELETE  deployed  inactive  (0 pending, 0 running, 0 retrying, 0 delivered, 0 failed)\n  No delivery yet.');
  });

  test('NAME, --failed and --limit narrow it; --json prints the answer', async () => {
    const { out } = await runCli(['events', 'entry-log', '--failed', '--limit', '2'], {}, project);
    const lines = out.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines.slice(2, 4).map((line) => line.split(/\s+/)[4])).toEqual(['ENTRY:e25', 'ENTRY:e19']);
    expect(lines[4]).toMatch(/last error \(delivery \d+, failed\): Error: boom 25$/);
    expect((await runCli(['events', 'audit', '--failed'], {}, project)).out).toMatch(/^audit {2}/);
    expect((await runCli(['events', 'gone', '--failed'], {}, project)).out).toMatch(/\n {2}No failed delivery\.\n$/);
    const json = JSON.parse((await runCli(['events', '--json', '--limit', '1'], {}, project)).out) as { handlers: { name: string; deliveries: unknown[] }[] };
    expect(json.handlers.map((h) => [h.name, h.deliveries.length])).toEqual([
      ['audit', 1],
      ['entry-log', 1],
      ['gone', 0],
    ]);
    expect(json.handlers[0]?.deliveries[0]).toMatchObject({ status: 'failed', attempts: 5, durationMs: 7, error: 'TypeError: audit 2' });
  });

  test('mistakes: a name nothing goes by, a bad --limit, two names, an unknown flag', async () => {
    expect(await runCli(['events', 'nobody'], {}, project)).toEqual({ status: 1, out: '', err: 'bcms-ext events: no event handler is named "nobody": bcms-ext events lists them\n' });
    expect((await runCli(['events', '--limit', '500'], {}, project)).err).toBe('bcms-ext events: --limit is a whole number from 0 to 200, got "500"\n');
    expect((await runCli(['events', 'a', 'b'], {}, project)).err).toBe('bcms-ext events: name one handler at most, got 2: a b\n');
    expect((await runCli(['events', '--status', 'failed'], {}, project)).err).toBe('bcms-ext events: unknown option --status (known: --failed, --limit, --json)\n');
  });
});

describe('bcms-ext jobs', () => {
  test('a table per job: its next tick, its recent runs (status, duration), its last error', async () => {
    const { status, out, err } = await runCli(['jobs'], {}, project);
    expect({ status, err }).toEqual({ status: 0, err: '' });
    const [nightly, paused] = out.trimEnd().split('\n\n') as [string, string];
    const lines = nightly.split('\n');
    expect(lines[0]).toMatch(/^nightly {2}0 3 \* \* \* {2}deployed {2}next tick \d{4}-\d\d-\d\dT03:00:00\.000Z$/);
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^ {2}RUN\s+TICK\s+STATUS\s+INSTANCE\s+DURATION$/),
      expect.stringMatching(/^ {2}\d+\s+2026-11-24T03:00:00\.000Z\s+running\s+a$/),
      expect.stringMatching(/^ {2}\d+\s+2026-11-23T03:00:00\.000Z\s+skipped\s+b\s+0 ms$/),
      expect.stringMatching(/^ {2}\d+\s+2026-11-22T03:00:00\.000Z\s+timed_out\s+a\s+300\.0 s$/),
      expect.stringMatching(/^ {2}\d+\s+2026-11-21T03:00:00\.000Z\s+failed\s+b\s+20 ms$/),
      expect.stringMatching(/^ {2}\d+\s+2026-11-20T03:00:00\.000Z\s+succeeded\s+a\s+1\.5 s$/),
      expect.stringMatching(/^ {2}last error \(run \d+, tick 2026-11-22T03:00:00\.000Z, timed_out\): ran past jobTimeoutMs \(300000 ms\)$/),
    ]);
    expect(paused).toBe('paused  */5 * * * *  registry  inactive\n  No run yet.');
  });

  test('NAME and --limit; --json; a name nothing goes by', async () => {
    const one = (await runCli(['jobs', 'nightly', '--limit', '1'], {}, project)).out.trimEnd().split('\n');
    expect(one).toHaveLength(3);
    const json = JSON.parse((await runCli(['jobs', '--json'], {}, project)).out) as { jobs: { name: string; nextTickAt: string | null }[] };
    expect(json.jobs.map((j) => [j.name, j.nextTickAt === null])).toEqual([
      ['nightly', false],
      ['paused', true],
    ]);
    expect(await runCli(['jobs', 'nobody'], {}, project)).toEqual({ status: 1, out: '', err: 'bcms-ext jobs: no job is named "nobody": bcms-ext jobs lists them\n' });
  });
});

describe('what to do next', () => {
  test('no key: says how to make one', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-cli-'));
    const { status, err } = await runCli(['jobs'], { BCMS_URL: url }, empty);
    expect(status).toBe(1);
    expect(err).toMatch(/^bcms-ext jobs: set BCMS_KEY_ID and BCMS_KEY_SECRET or BCMS_PRIVATE_KEY_FILE .* bcms-ext keys create --name deployer --deploy --env-file \.env writes them\n$/);
  });

  test('a key that may not deploy: the 403, and which key to use', async () => {
    const caller = await hmacKey(service.t.router.db, ['some-function'], { name: 'caller' });
    const { status, err } = await runCli(['events'], { BCMS_URL: url, BCMS_KEY_ID: caller.keyId, BCMS_KEY_SECRET: caller.secret }, project);
    expect(status).toBe(1);
    expect(err).toBe('bcms-ext events: the service answered 403: This API key may not deploy. These lists take a key that may deploy: bcms-ext keys create --name deployer --deploy.\n');
  });

  test('nothing listening: start it, or set BCMS_URL', async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const { status, err } = await runCli(['events'], { BCMS_URL: nowhere }, project);
    expect(status).toBe(1);
    expect(err).toMatch(new RegExp(`^bcms-ext events: cannot reach the service at ${nowhere.replace(/\./g, '\\.')} \\(.+\\)\\. Start it, or set BCMS_URL to where it listens\\.\n$`));
  });
});

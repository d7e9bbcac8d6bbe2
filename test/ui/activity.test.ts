import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { bcmsExtensions, type BcmsExtensionsRouter as BcmsRouter } from '../../lib';
import { memoryLogger, JWT_SECRET, role, signToken } from '../support/app';
import { CHROMIUM, describeInChromium } from '../support/browser';
import { openTestDatabase, type TestDatabase } from '../support/database';
import { seedEventsAndJobs } from '../support/events';

// The shell's Events and Jobs views (<admin.path>/events, /jobs, under Developers): each handler's
// recent deliveries and each job's recent runs, as the engine wrote them, in a real Chromium under
// the shell's CSP, the router mounted under a prefix as a host may mount it.
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'test-output', 'screenshots');
const AXE = require.resolve('axe-core/axe.min.js');
const admin = signToken([role('ADMIN', 'READ')]);
const user = signToken([role('USER', 'READ', 'WRITE')]);

describeInChromium('the Events and Jobs views in Chromium, the router mounted under /cms', () => {
  let db: TestDatabase;
  let server: Server;
  let router: BcmsRouter;
  let app: express.Express;
  let url: string;
  let browser: Browser;
  /** The token the host's sign-in route answers with: who signs in. */
  let token = admin;
  const problems: string[] = [];

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    db = await openTestDatabase('pglite');
    router = bcmsExtensions({}, { jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger, database: db.knex, admin: { loginUrl: '/cms/login' } });
    app = express();
    app.post('/cms/login', (_req, res) => {
      res.json({ accessToken: token });
    });
    app.use('/cms', router);
    await router.ready;
    await seedEventsAndJobs(router.db);
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    server?.close();
    await router?.close();
    await db?.close();
  });

  async function signedIn(at: string, as = admin): Promise<Page> {
    token = as;
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.on('console', (message) => {
      if (message.type() === 'error' && !/status of 403/.test(message.text())) problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(String(error)));
    await page.goto(`${url}${at}`);
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill('any');
    await page.getByRole('button', { name: 'Sign in' }).click();
    return page;
  }

  test('/cms/bcms/events: a section per handler, its counts, its recent deliveries (status, attempts, duration, error), its last error', async () => {
    const page = await signedIn('/cms/bcms/events');
    const nav = page.getByRole('navigation', { name: 'BCMS navigation' });
    const link = nav.getByRole('link', { name: 'Events' });
    await link.waitFor();
    expect(await link.getAttribute('aria-current')).toBe('page');
    expect(await link.getAttribute('href')).toBe('/cms/bcms/events');
    expect(await nav.getByRole('list', { name: 'Developers' }).getByRole('link').allTextContents()).toEqual(['API', 'Events', 'Jobs']);
    const main = page.locator('#bcms-main');
    await main.getByRole('heading', { name: 'Event handlers', level: 1 }).waitFor();
    expect(await page.title()).toBe('Events · BCMS');
    await main.getByText('3 event handlers, most recent deliveries first.').waitFor();
    expect(await main.getByRole('heading', { level: 2 }).allTextContents()).toEqual(['audit', 'entry-log', 'gone']);

    const entryLog = main.getByRole('region', { name: 'entry-log', exact: true });
    expect(await entryLog.textContent()).toContain('ENTRY ALL · registry');
    expect(await entryLog.textContent()).toContain('5 pending, 5 running, 5 retrying, 10 delivered, 5 failed');
    const table = entryLog.getByRole('region', { name: 'Recent deliveries to entry-log' });
    expect(await table.getByRole('columnheader').allTextContents()).toEqual(['Status', 'Attempts', 'Document', 'Event', 'Created', 'Duration', 'Error']);
    const rows = table.locator('tbody tr');
    expect(await rows.count()).toBe(20);
    const cells = async (row: number) => (await rows.nth(row).getByRole('cell').allTextContents()).filter((_, i) => i !== 4); // all but Created (the reader's clock)
    expect(await cells(0)).toEqual(['delivered', '1', 'ENTRY:e29', 'ENTRY UPDATE', '39 ms', '']);
    expect(await cells(2)).toEqual(['retrying', '1', 'ENTRY:e27', 'ENTRY UPDATE', '', 'Error: boom 27']);
    expect(await cells(4)).toEqual(['failed', '5', 'ENTRY:e25', 'ENTRY UPDATE', '35 ms', 'Error: boom 25']);
    expect(await entryLog.locator('.bcms-activity-last-error').textContent()).toMatch(/^Last error \(delivery \d+, retrying\): Error: boom 27$/);
    expect(await main.getByRole('region', { name: 'audit', exact: true }).locator('.bcms-activity-last-error').textContent()).toMatch(/^Last error \(delivery \d+, failed\): TypeError: audit 2$/);
    const gone = main.getByRole('region', { name: 'gone', exact: true });
    expect(await gone.textContent()).toContain('TEMPLATE DELETE · deployed · inactive');
    expect(await gone.textContent()).toContain('No delivery yet.');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'events-1-handlers.png'), fullPage: true });

    // Refresh reads them again: a delivery failed since the view opened is there.
    await router.db('bcms_event_deliveries').insert({
      event_id: router.db.raw("nextval('bcms_event_ids')"),
      handler: 'audit',
      scope: 'ENTRY',
      method: 'DELETE',
      doc: 'ENTRY:new',
      status: 'failed',
      attempts: 5,
      error: 'RangeError: just now\n    at handler (audit.js:1:1)',
      duration_ms: 3,
    });
    await main.getByRole('button', { name: 'Refresh' }).click();
    const audit = main.getByRole('region', { name: 'audit', exact: true });
    await audit.getByText('0 pending, 0 running, 0 retrying, 0 delivered, 4 failed').waitFor();
    expect(await audit.locator('.bcms-activity-last-error').textContent()).toMatch(/^Last error \(delivery \d+, failed\): RangeError: just now$/);
    // The whole error (its stack) on hover, its first line shown.
    expect(await audit.locator('tbody tr').first().locator('.bcms-activity-error').getAttribute('title')).toBe('RangeError: just now\n    at handler (audit.js:1:1)');
    await page.close();
  }, 30_000);

  test('the Jobs link: each job, its cron and next tick, its recent runs, its last error; back returns to Events', async () => {
    const page = await signedIn('/cms/bcms/events');
    const main = page.locator('#bcms-main');
    await main.getByRole('heading', { name: 'Event handlers' }).waitFor();
    await page.getByRole('link', { name: 'Jobs' }).click();
    await main.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/cms/bcms/jobs');
    expect(await page.title()).toBe('Jobs · BCMS');
    expect(await page.getByRole('link', { name: 'Jobs' }).getAttribute('aria-current')).toBe('page');
    expect(await page.getByRole('link', { name: 'Events' }).getAttribute('aria-current')).toBeNull();
    const nightly = main.getByRole('region', { name: 'nightly', exact: true });
    await nightly.waitFor();
    expect(await nightly.textContent()).toContain('0 3 * * * · deployed');
    expect(await nightly.textContent()).toContain('Next tick: ');
    const datetime = await nightly.locator('p time').first().getAttribute('datetime');
    expect(datetime).toMatch(/T03:00:00\.000Z$/);
    const rows = nightly.locator('tbody tr');
    const statuses = await rows.evaluateAll((trs) => trs.map((tr) => [tr.children[0]?.textContent, tr.children[2]?.textContent, tr.children[4]?.textContent, tr.children[5]?.textContent]));
    expect(statuses).toEqual([
      ['running', 'a', '', ''],
      ['skipped', 'b', '0 ms', ''],
      ['timed out', 'a', '300.0 s', 'ran past jobTimeoutMs (300000 ms)'],
      ['failed', 'b', '20 ms', 'Error: no network'],
      ['succeeded', 'a', '1.5 s', ''],
    ]);
    expect(await nightly.locator('.bcms-activity-last-error').textContent()).toMatch(/^Last error \(run \d+, tick .+, timed out\): ran past jobTimeoutMs \(300000 ms\)$/);
    const paused = main.getByRole('region', { name: 'paused', exact: true });
    expect(await paused.textContent()).toContain('Inactive');
    expect(await paused.textContent()).toContain('No run yet.');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'events-2-jobs.png'), fullPage: true });
    await page.goBack();
    await main.getByRole('heading', { name: 'Event handlers' }).waitFor();
    expect(await page.getByRole('link', { name: 'Events' }).getAttribute('aria-current')).toBe('page');

    // axe-core on the view: nothing serious or critical.
    await page.evaluate(fs.readFileSync(AXE, 'utf8'));
    const violations = (await page.evaluate('axe.run(document).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact })))')) as { id: string; impact: string }[];
    expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);
    await page.close();
  }, 30_000);

  test('a user whose role may not see them: the view says why, and the user stays signed in', async () => {
    const page = await signedIn('/cms/bcms/jobs', user);
    const alert = page.locator('#bcms-main').getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toBe('Your account may not see the jobs: it takes an ADMIN role that holds READ (Token is not authorized for this action.)');
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1);
    await page.close();
  }, 30_000);

  test('/cms/bcms/events and /cms/bcms/jobs are the shell page; its view module is served beside it; nothing went wrong in the page', async () => {
    for (const at of ['/cms/bcms/events', '/cms/bcms/jobs']) expect((await request(app).get(at)).text).toBe((await request(app).get('/cms/bcms')).text);
    const module = await request(app).get('/cms/api/extensions/activity.js');
    expect([module.status, module.headers['content-type']]).toEqual([200, 'text/javascript; charset=utf-8']);
    expect(module.text).toContain('export async function renderActivity');
    expect(problems).toEqual([]);
  });
});

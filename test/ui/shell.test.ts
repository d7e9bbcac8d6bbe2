import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { freePort } from '../support/app';
import { start, stopStartedApps } from '../support/example';
import type { BcmsGlobal } from '../../lib/sdk/types';
import { CHROMIUM, describeInChromium } from '../support/browser';

// The admin shell and the example plugin's Vue UI in a real Chromium, driven by playwright-core,
// against the example app as `npm start` runs it. Screenshots go to test-output/screenshots/.
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'test-output', 'screenshots');
const PASSWORD = 'browser-test-password';

describeInChromium('the admin shell and a plugin UI, in Chromium', () => {
  let url: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    const port = await freePort();
    await start(port, fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-ui-')), { ADMIN_PASSWORD: PASSWORD });
    url = `http://localhost:${port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    // The shell runs under its Content-Security-Policy: anything it refused is said in the console.
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) refusedByCsp.push(message.text());
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    stopStartedApps();
  });

  const plugin = () => page.frameLocator('iframe[title="Content stats plugin"]');
  const refusedByCsp: string[] = [];

  async function signIn(): Promise<void> {
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  test('sign in: the only plugin opens at once (nothing to choose), its chart and table filled from the database', async () => {
    await page.goto(`${url}/bcms`);
    await page.getByRole('heading', { name: 'Sign in to BCMS' }).waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, '1-sign-in.png') });
    // A wrong password is said, not swallowed.
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill('wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expectVisible(page.getByRole('alert').filter({ hasText: /wrong email or password/i }));
    const entries = await page.evaluate('history.length');
    await signIn();
    // The example app has one plugin with a UI: the shell opens it, and the URL names it.
    await page.waitForURL(`${url}/bcms/plugins/content-stats`);
    // The seed: three blog posts, no submission yet.
    await expectVisible(plugin().getByRole('img', { name: 'Entries per template. Blog: 3, Form submissions: 0' }));
    await expectVisible(plugin().getByRole('table', { name: 'Recent form submissions' }).getByRole('cell', { name: 'No submissions yet.' }));
    expect(await page.getByRole('heading', { name: 'Choose a plugin' }).count()).toBe(0);
    // The address was replaced, not added to: Back does not return to /bcms only to be sent on again.
    expect(await page.evaluate('history.length')).toBe(entries);
    const nav = page.getByRole('navigation', { name: 'BCMS navigation' });
    await expectVisible(nav.getByRole('heading', { name: 'Plugins' }));
    expect(await nav.getByRole('link', { name: 'Content stats' }).getAttribute('aria-current')).toBe('page');
    // The keyboard starts at the navigation: the open plugin's link has the focus.
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Content stats');
  }, 30_000);

  test('the top bar shows who is signed in, beside Sign out', async () => {
    // The example app's token carries the email; the shell reads it through GET /api/extensions/user.
    const user = page.getByText('Signed in as admin@example.com');
    await expectVisible(user);
    const signOut = page.getByRole('button', { name: 'Sign out' });
    const [userBox, buttonBox] = [await user.boundingBox(), await signOut.boundingBox()];
    // On one line: the button's row holds the user's name.
    expect(userBox!.y).toBeLessThan(buttonBox!.y + buttonBox!.height);
    expect(userBox!.y + userBox!.height).toBeGreaterThan(buttonBox!.y);
  }, 30_000);

  test('by keyboard: Tab goes from Sign out to the plugin link; Enter on the open plugin adds no history entry', async () => {
    await page.getByRole('button', { name: 'Sign out' }).focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Content stats');
    const entries = await page.evaluate('history.length');
    await page.keyboard.press('Enter');
    expect(page.url()).toBe(`${url}/bcms/plugins/content-stats`);
    expect(await page.evaluate('history.length')).toBe(entries);
    await expectVisible(plugin().getByRole('img', { name: /^Entries per template\./ }));
  }, 30_000);

  test('call a function from the UI: the submission is stored, and the table and chart show it', async () => {
    await plugin().getByLabel('Name').fill('Ada Lovelace');
    await plugin().getByLabel('Email').fill('ada@example.com');
    await plugin().getByLabel('Message').fill('Sent from the plugin UI');
    await plugin().getByRole('button', { name: 'Send' }).click();
    await expectVisible(
      plugin()
        .getByRole('status')
        .filter({ hasText: /^Stored as [0-9a-f-]{36}\.$/ }),
    );
    const table = plugin().getByRole('table', { name: 'Recent form submissions' });
    await expectVisible(table.getByRole('cell', { name: 'Ada Lovelace' }));
    await expectVisible(table.getByRole('cell', { name: 'Sent from the plugin UI' }));
    await expectVisible(plugin().getByRole('img', { name: 'Entries per template. Blog: 3, Form submissions: 1' }));
    await page.screenshot({ path: path.join(SCREENSHOTS, '2-plugin-open.png') });
  }, 30_000);

  test("the SDK sends the token to the service's origin only", async () => {
    const seen: (string | undefined)[] = [];
    const elsewhere = http.createServer((req, res) => {
      seen.push(req.headers.authorization);
      // It would let the token through (a preflight is allowed it): only the SDK keeps it back.
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { 'Access-Control-Allow-Origin': '*', 'Access-Control-Allow-Headers': 'Authorization, Accept, Content-Type' });
        res.end();
        return;
      }
      res.writeHead(200, { 'Access-Control-Allow-Origin': '*', 'Content-Type': 'application/json' });
      res.end('{}');
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    try {
      const other = `http://127.0.0.1:${(elsewhere.address() as import('node:net').AddressInfo).port}/collect`;
      // In the plugin's page (the shell's own CSP lets the shell page reach its origin only).
      const frame = page.frames().find((candidate) => candidate.url().includes('/plugin/content-stats/'));
      if (frame === undefined) throw new Error('the plugin frame is not open');
      // BCMS's convention asks for the token with Authorization ''; another origin never gets it. A
      // BCMS UI's window.bcms is the shell's (window.parent.bcms), so its requests go out under the
      // shell page's CSP, which lets them reach this origin only: the other one gets no request at all.
      expect(await frame.evaluate(`window.bcms.sdk.send({ url: ${JSON.stringify(other)}, headers: { Authorization: '' } }).then(() => 'sent', (e) => e.message)`)).toBe('Failed to fetch');
      expect(seen).toEqual([]);
      expect(refusedByCsp.some((line) => line.includes(other) && line.includes("connect-src 'self'"))).toBe(true);
      refusedByCsp.length = 0; // this refusal was the point
      // The same SDK does send it to its own service, under /api as BCMS's send puts it...
      expect(await frame.evaluate("window.bcms.sdk.send({ url: '/extensions/plugins', headers: { Authorization: '' } }).then((r) => r.plugins.length)")).toBe(1);
      // ...and only when asked: without it the service says 401, and the user stays signed in.
      expect(await frame.evaluate("window.bcms.sdk.send({ url: '/extensions/plugins' }).then(() => 'answered', (e) => [e.status, e.message])")).toEqual([401, 'Token is `undefined`.']);
      expect(await frame.evaluate('window.bcms.sdk.isLoggedIn()')).toBe(true);
    } finally {
      elsewhere.close();
    }
  }, 30_000);

  test('window.bcms as BCMS plugin UIs use it: modals register, the store knows the user', async () => {
    const result = await page.evaluate(async () => {
      const bcms = (globalThis as unknown as { bcms: BcmsGlobal }).bcms;
      bcms.modal.register({ name: 'probe' });
      const users = await bcms.sdk.user.getAll();
      return {
        modal: [typeof bcms.modal.custom.probe!.show, typeof bcms.modal.custom.probe!.hide],
        user: bcms.vue.store.getters.user_findOne((user: { _id: string }) => user._id === users[0]!._id)?._id === users[0]!._id,
        plugins: users[0]!.customPool.policy.plugins,
      };
    });
    expect(result.modal).toEqual(['function', 'function']);
    expect(result.user).toBe(true);
    expect(result.plugins).toEqual([]);
  });

  test('reload keeps the plugin open; back and forward move between another shell page and it', async () => {
    await page.reload();
    await expectVisible(plugin().getByRole('table', { name: 'Recent form submissions' }).getByRole('cell', { name: 'Ada Lovelace' }));
    // A URL that names no plugin says so, even with a single plugin to open.
    await page.goto(`${url}/bcms/plugins/missing`);
    await expectVisible(page.getByRole('heading', { name: 'No plugin "missing" has a UI' }));
    await page.getByRole('link', { name: 'Content stats' }).click();
    await page.waitForURL(`${url}/bcms/plugins/content-stats`);
    await expectVisible(plugin().getByRole('img', { name: /Form submissions: 1/ }));
    await page.goBack();
    await page.waitForURL(`${url}/bcms/plugins/missing`);
    await expectVisible(page.getByRole('heading', { name: 'No plugin "missing" has a UI' }));
    await page.goForward();
    await page.waitForURL(`${url}/bcms/plugins/content-stats`);
    await expectVisible(plugin().getByRole('img', { name: /Form submissions: 1/ }));
  }, 30_000);

  test('400 px wide: the navigation folds into a menu, and the plugin takes the whole width', async () => {
    await page.setViewportSize({ width: 400, height: 800 });
    try {
      const nav = page.getByRole('navigation', { name: 'BCMS navigation' });
      const menu = page.getByRole('button', { name: 'Menu' });
      await expectVisible(menu);
      expect(await menu.getAttribute('aria-expanded')).toBe('false');
      expect(await nav.isVisible()).toBe(false);
      const frame = (await page.locator('iframe[title="Content stats plugin"]').boundingBox())!;
      expect(frame.x).toBeLessThanOrEqual(1);
      expect(frame.width).toBeGreaterThanOrEqual(398);
      // Nothing of the shell reaches past the screen's edge...
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(400);
      // ...nor of the example plugin: its chart fits, and its table scrolls in a box of its own.
      const chart = (await plugin()
        .getByRole('img', { name: /^Entries per template\./ })
        .boundingBox())!;
      expect(chart.x + chart.width).toBeLessThanOrEqual(400);
      const pluginPage = page.frames().find((candidate) => candidate.url().includes('/plugin/content-stats/'))!;
      expect(await pluginPage.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);

      // The menu holds the navigation, the user and Sign out; Escape closes it and gives the focus back to its button.
      await menu.click();
      expect(await menu.getAttribute('aria-expanded')).toBe('true');
      await expectVisible(nav.getByRole('link', { name: 'Content stats' }));
      await expectVisible(page.getByText('Signed in as admin@example.com'));
      await expectVisible(page.getByRole('button', { name: 'Sign out' }));
      await page.screenshot({ path: path.join(SCREENSHOTS, '2b-narrow-menu.png') });
      await page.keyboard.press('Escape');
      expect(await nav.isVisible()).toBe(false);
      expect(await page.evaluate('document.activeElement.textContent')).toBe('Menu');
      // Choosing a plugin closes it.
      await menu.click();
      await nav.getByRole('link', { name: 'Content stats' }).click();
      expect(await nav.isVisible()).toBe(false);
      expect(await menu.getAttribute('aria-expanded')).toBe('false');
      await expectVisible(plugin().getByRole('img', { name: /Form submissions: 1/ }));
    } finally {
      await page.setViewportSize({ width: 1200, height: 800 });
    }
  }, 30_000);

  test('a 401 inside the plugin signs the user out of the shell; signing in again reopens the plugin', async () => {
    // The session ends on the server's side: the stored token is no longer valid.
    await page.evaluate("localStorage.setItem('bcms.accessToken', 'expired.or.revoked')");
    await plugin().getByLabel('Name').fill('Grace');
    await plugin().getByLabel('Email').fill('grace@example.com');
    await plugin().getByLabel('Message').fill('Too late');
    await plugin().getByRole('button', { name: 'Send' }).click();
    await expectVisible(page.getByRole('heading', { name: 'Sign in to BCMS' }));
    // The user did not ask for it: a warning (an alert), not the news a chosen sign-out is.
    await expectVisible(page.getByRole('alert').filter({ hasText: 'You were signed out. Sign in again.' }));
    expect(await page.getByRole('status').filter({ hasText: 'You signed out.' }).count()).toBe(0);
    expect(await page.evaluate("localStorage.getItem('bcms.accessToken')")).toBeNull();
    await page.screenshot({ path: path.join(SCREENSHOTS, '3-signed-out.png') });
    await signIn();
    await expectVisible(plugin().getByRole('img', { name: /Form submissions: 1/ }));
    expect(page.url()).toBe(`${url}/bcms/plugins/content-stats`);
  }, 30_000);

  test('sign out with the button: the sign-in says so as information, not as an error, and the token is gone', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expectVisible(page.getByRole('heading', { name: 'Sign in to BCMS' }));
    const notice = page.getByRole('status').filter({ hasText: 'You signed out.' });
    await expectVisible(notice);
    await page.screenshot({ path: path.join(SCREENSHOTS, '4-signed-out-by-choice.png') });
    expect(
      await page
        .getByRole('alert')
        .filter({ hasText: /signed out/ })
        .count(),
    ).toBe(0);
    // Not in the error's colour: the text keeps the page's own.
    // A string, as the file's other evaluations: the test's tsconfig has no DOM types.
    const colours = (await page.evaluate(`(() => {
      const colour = (selector) => getComputedStyle(document.querySelector(selector)).color;
      return { notice: colour('[role="status"]'), error: colour('.bcms-error'), page: colour('form') };
    })()`)) as { notice: string; error: string; page: string };
    expect(colours.notice).not.toBe(colours.error);
    expect(colours.notice).toBe(colours.page);
    expect(await page.evaluate("localStorage.getItem('bcms.accessToken')")).toBeNull();
    expect(await page.evaluate('window.bcms.sdk.getAccessToken()')).toBeNull();
    expect(await page.evaluate('window.bcms.sdk.isLoggedIn()')).toBe(false);
    // A call that asks for the token, with none kept: BCMS's 401 (the service, which knows no session of the app's here, refused it).
    expect(await page.evaluate("window.bcms.sdk.template.getAll().then(() => 'answered', (e) => [e.status, e.message])")).toEqual([401, 'Not logged in.']);
  }, 30_000);

  test("nothing the shell, the SDK or the plugin did was refused by the shell page's Content-Security-Policy", () => {
    expect(refusedByCsp).toEqual([]);
  });

  test("an app with no sign-in route at auth.signInPath: the sign-in says what to set, not a bare 'failed (404)'", async () => {
    // As Express answers a path nobody serves (the app's own 404): the example app has the route, so it is taken away here.
    await page.route('**/api/auth/login', (route) => route.fulfill({ status: 404, contentType: 'text/html; charset=utf-8', body: '<pre>Cannot POST /api/auth/login</pre>' }));
    try {
      await signIn();
      await expectVisible(page.getByText("Sign-in failed: nothing answers at /api/auth/login (404). The auth option's signInPath (admin.loginUrl before it) must name your app's sign-in route."));
    } finally {
      await page.unroute('**/api/auth/login');
    }
  }, 30_000);
});

/** Waits until the locator shows (Playwright's own wait, with its message on time-out). */
async function expectVisible(locator: import('playwright-core').Locator): Promise<void> {
  await locator.waitFor({ state: 'visible', timeout: 10_000 });
}

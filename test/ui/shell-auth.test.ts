import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express, { type Request } from 'express';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import {
  type AppUser,
  bcmsExtensions,
  type BcmsExtensionsRouter,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
} from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { CHROMIUM, describeInChromium, waitUntil } from '../support/browser';

// The admin shell with the app's own users, in a real Chromium: signed in by the app's cookie
// session alone (auth.fromRequest, no token anywhere), a user the shell cannot use (no role with
// READ; a BCMS-signed token without `rls`) shown as such with a way to sign out, a sign-in answer
// whose token is in another field (auth.tokenField), and the navigation's focus ring.
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'test-output', 'screenshots');

/** A plugin UI that asks window.bcms who the user is and calls its plugin's guarded route, as a BCMS UI does. */
const UI_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Notes</title></head>
<body><main><h1>Notes</h1><p id="who">Asking…</p><p id="mine">Calling…</p></main>
<script type="module">
const say = (id, text) => { document.getElementById(id).textContent = text; };
try {
  const user = await window.bcms.sdk.user.get();
  say('who', 'User: ' + user.username);
  const mine = await window.bcms.sdk.send({ url: '/plugin/notes/notes/mine', headers: { Authorization: '' } });
  say('mine', 'Mine: ' + mine.userId + ', signed in: ' + (await window.bcms.sdk.isLoggedIn()) + ', claims of: ' + window.bcms.sdk.getAccessToken().payload.userId);
} catch (error) {
  say('mine', 'Failed: ' + error.message);
}
</script></body></html>`;

interface HostUser {
  id: number;
  name: string;
  email: string;
  role: 'admin' | 'nobody';
}
const USERS: HostUser[] = [
  { id: 7, name: 'Ada Admin', email: 'ada@example.com', role: 'admin' },
  { id: 8, name: 'Nia Nobody', email: 'nia@example.com', role: 'nobody' },
];

function plugins(uiDir: string) {
  const notes = createBcmsPlugin({
    name: 'notes',
    ui: { dir: uiDir },
    controllers: [
      createController({
        name: 'Notes',
        path: '/notes',
        methods: () => ({
          mine: createControllerMethod({
            path: '/mine',
            type: 'get',
            preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
            handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }),
          }),
        }),
      }),
    ],
  });
  // A second plugin with a UI: the Plugins list then ends on a link right above the Developers heading.
  return [notes, createBcmsPlugin({ name: 'extra', ui: { dir: uiDir }, controllers: [] })];
}

const cookieOf = (req: Request): string | undefined => /(?:^|;\s*)sid=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];

describeInChromium("the admin shell with the app's own users (auth), in Chromium", () => {
  let browser: Browser;
  const servers: Server[] = [];
  const routers: BcmsExtensionsRouter[] = [];
  /** The session app (auth.fromRequest over a cookie) and the token app (BCMS JWTs, its sign-in answer chosen per test). */
  let sessionUrl: string;
  let tokenUrl: string;
  /** What the token app's sign-in answers: set by each test. */
  let signInAnswer: Record<string, unknown> = {};
  const problems: string[] = [];

  async function listen(app: express.Express): Promise<string> {
    const server = await new Promise<Server>((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    servers.push(server);
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    const uiDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-auth-ui-'));
    fs.writeFileSync(path.join(uiDir, 'index.html'), UI_HTML);
    const database = (await sharedTestDatabase()).knex;

    // The session app: its sign-in sets a cookie and answers no token at all.
    const sessions = new Map<string, HostUser>();
    const sessionRouter = bcmsExtensions(
      { plugins: plugins(uiDir) },
      {
        database,
        logger: memoryLogger().logger,
        jwt: { secret: JWT_SECRET },
        auth: {
          signInPath: '/session/login',
          fromRequest: async (req) => {
            const user = (req as Request & { user?: HostUser }).user;
            if (user === undefined) return null;
            const roles = user.role === 'admin' ? [{ name: JWTRoleName.ADMIN, permissions: [{ name: JWTPermissionName.READ }] }] : [];
            return { userId: String(user.id), roles, props: { username: user.name, email: user.email } } satisfies AppUser;
          },
        },
      },
    );
    const sessionApp = express();
    sessionApp.use((req: Request & { user?: HostUser }, _res, next) => {
      const sid = cookieOf(req);
      if (sid !== undefined) req.user = sessions.get(sid);
      next();
    });
    sessionApp.post('/session/login', express.json(), (req, res) => {
      const user = USERS.find((candidate) => candidate.email === req.body?.email);
      if (user === undefined || req.body?.password !== 'secret') return void res.status(401).json({ message: 'Wrong email or password.' });
      const sid = randomUUID();
      sessions.set(sid, user);
      res.cookie('sid', sid, { httpOnly: true, sameSite: 'lax', path: '/' }).json({ name: user.name });
    });
    sessionApp.use(sessionRouter);

    // The token app: BCMS JWTs, and under /t a router that reads the token from the answer's "token".
    const tokenRouter = bcmsExtensions({ plugins: plugins(uiDir) }, { database, logger: memoryLogger().logger, jwt: { secret: JWT_SECRET }, auth: { signInPath: '/login' } });
    const fieldRouter = bcmsExtensions({ plugins: plugins(uiDir) }, { database, logger: memoryLogger().logger, jwt: { secret: JWT_SECRET }, auth: { signInPath: '/login', tokenField: 'token' } });
    const tokenApp = express();
    tokenApp.post('/login', (_req, res) => {
      res.json(signInAnswer);
    });
    tokenApp.use('/t', fieldRouter);
    tokenApp.use(tokenRouter);
    routers.push(sessionRouter, tokenRouter, fieldRouter);
    await Promise.all(routers.map((router) => router.ready));
    [sessionUrl, tokenUrl] = await Promise.all([listen(sessionApp), listen(tokenApp)]);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    await Promise.all(routers.map((router) => router.close()));
  });

  afterEach(() => {
    expect(problems).toEqual([]);
    problems.length = 0;
  });

  /** A page in a context of its own (its own cookies and storage), its errors kept; 401s and 403s the test provokes are expected. */
  async function newPage(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/status of 40[13]/.test(message.text())) problems.push(`console error: ${message.text()}`);
    });
    return { context, page };
  }

  async function signIn(page: Page, email: string): Promise<void> {
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('secret');
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  test("signed in by the app's session cookie alone: no token kept, the shell, the plugin UI and its guarded calls know the user; a reload keeps it", async () => {
    const { context, page } = await newPage();
    await page.goto(`${sessionUrl}/bcms`);
    // No session yet: the service said so, and the sign-in shows, with no warning.
    await page.getByRole('heading', { name: 'Sign in to BCMS' }).waitFor();
    expect(
      await page
        .getByRole('alert')
        .filter({ hasText: /signed out/ })
        .count(),
    ).toBe(0);
    await signIn(page, 'ada@example.com');
    await expectVisible(page.getByText('Signed in as ada@example.com'));
    await page.getByRole('link', { name: 'Notes' }).click();
    const ui = page.frameLocator('iframe[title="Notes plugin"]');
    await expectVisible(ui.getByText('User: Ada Admin'));
    await expectVisible(ui.getByText('Mine: 7, signed in: true, claims of: 7'));
    expect(await page.evaluate("localStorage.getItem('bcms.accessToken')")).toBeNull();
    expect(await page.evaluate('window.bcms.sdk.getAccessToken().header.typ')).toBe('auth.fromRequest');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'auth-1-session.png') });

    // A new page with the app's cookie only: straight in, no sign-in form on the way.
    const again = await context.newPage();
    await again.goto(`${sessionUrl}/bcms/plugins/notes`);
    await expectVisible(again.frameLocator('iframe[title="Notes plugin"]').getByText('Mine: 7, signed in: true, claims of: 7'));
    expect(await again.getByRole('heading', { name: 'Sign in to BCMS' }).count()).toBe(0);

    // Sign out: the app's own session stays (the shell cannot end it), and says so; this tab then shows the sign-in, reload or not.
    await page.getByRole('button', { name: 'Sign out' }).click();
    const notice = page.getByRole('status').filter({ hasText: "You signed out. The app's own session stays open until you sign out of the app." });
    await expectVisible(notice);
    await page.reload();
    await expectVisible(page.getByRole('heading', { name: 'Sign in to BCMS' }));
    await expectVisible(notice);
    await signIn(page, 'ada@example.com');
    await expectVisible(page.getByText('Signed in as ada@example.com'));
    await context.close();
  }, 60_000);

  test('a session user with no role that holds READ: the top bar, why, and Sign out; the same after a reload', async () => {
    const { context, page } = await newPage();
    await page.goto(`${sessionUrl}/bcms`);
    await signIn(page, 'nia@example.com');
    const why = page.getByRole('alert').filter({ hasText: 'You are signed in as nia@example.com, but the service refused to list the plugins (Token is not authorized for this action.).' });
    await expectVisible(why);
    expect(await why.textContent()).toContain("the app's auth.fromRequest gave this user none. Sign out, then sign in as a user who has one.");
    await expectVisible(page.getByRole('heading', { name: 'This account cannot use BCMS' }));
    // The way out has the keyboard.
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Sign out');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'auth-2-no-role.png') });
    await page.reload();
    await expectVisible(why);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expectVisible(page.getByRole('heading', { name: 'Sign in to BCMS' }));
    await context.close();
  }, 60_000);

  test('a valid BCMS token without rls: why, and Sign out, also after a reload; never the bare "could not be listed"', async () => {
    signInAnswer = { accessToken: signToken(undefined, { payload: { userId: 'no-roles', email: 'norls@example.com', rls: undefined } }) };
    const { context, page } = await newPage();
    await page.goto(`${tokenUrl}/bcms`);
    await signIn(page, 'norls@example.com');
    const why = page.getByRole('alert').filter({ hasText: 'You are signed in as norls@example.com, but the service refused to list the plugins' });
    await expectVisible(why);
    expect(await why.textContent()).toContain('this token has none: it carries no rls claim, where BCMS tokens list their roles');
    await expectVisible(page.getByRole('banner'));
    await page.screenshot({ path: path.join(SCREENSHOTS, 'auth-3-no-rls.png') });
    await page.reload();
    await expectVisible(why);
    expect(await page.getByText(/^The plugins could not be listed/).count()).toBe(0);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expectVisible(page.getByRole('status').filter({ hasText: 'You signed out.' }));
    expect(await page.evaluate("localStorage.getItem('bcms.accessToken')")).toBeNull();
    await page.reload();
    await expectVisible(page.getByRole('heading', { name: 'Sign in to BCMS' }));
    await context.close();
  }, 60_000);

  test('a sign-in answer with its token in another field: the message names the field looked in; with auth.tokenField it signs in', async () => {
    const token = signToken([role('ADMIN', 'READ')], { payload: { email: 'ada@example.com' } });
    signInAnswer = { token, user: { name: 'Ada' } };
    const { context, page } = await newPage();
    await page.goto(`${tokenUrl}/bcms`);
    await signIn(page, 'ada@example.com');
    await expectVisible(
      page.getByText(
        'The sign-in at /login answered 200 without a token in its field "accessToken" (its answer has: token, user). Set the auth option\'s tokenField to the field that holds the token.',
      ),
    );
    expect(await page.getByText('Sign-in failed (200)').count()).toBe(0);
    // The router with auth.tokenField: 'token' (mounted under /t) reads it there.
    await page.goto(`${tokenUrl}/t/bcms`);
    await signIn(page, 'ada@example.com');
    await expectVisible(page.getByText('Signed in as ada@example.com'));
    expect(await page.evaluate("localStorage.getItem('bcms.accessToken')")).toBe(token);
    await context.close();
  }, 60_000);

  test('a token the service refuses, right after the sign-in: the sign-in says the service refused it, not that the session ended', async () => {
    signInAnswer = { accessToken: signToken([role('ADMIN', 'READ')], { secret: 'another-secret-of-enough-length-000' }) };
    const { context, page } = await newPage();
    await page.goto(`${tokenUrl}/bcms`);
    await signIn(page, 'ada@example.com');
    await expectVisible(page.getByRole('alert').filter({ hasText: 'Signed in, but the service refused the token that /login answered: Invalid token.' }));
    expect(await page.getByText('You were signed out. Sign in again.').count()).toBe(0);
    await context.close();
  }, 60_000);

  test('a focused link of the navigation keeps its ring clear of the Developers heading', async () => {
    signInAnswer = { accessToken: signToken([role('ADMIN', 'READ')], { payload: { email: 'ada@example.com' } }) };
    const { context, page } = await newPage();
    await page.goto(`${tokenUrl}/bcms`);
    await signIn(page, 'ada@example.com');
    const nav = page.getByRole('navigation', { name: 'BCMS navigation' });
    await nav.getByRole('link', { name: 'Extra' }).waitFor();
    // By keyboard, so that the ring shows (:focus-visible): from Notes to Extra, the last plugin.
    await nav.getByRole('link', { name: 'Notes' }).focus();
    await page.keyboard.press('Tab');
    await waitUntil(page, "document.activeElement.textContent === 'Extra'");
    const ring = (await page.evaluate(`(() => {
      const link = document.activeElement;
      const style = getComputedStyle(link);
      const reach = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
      const box = link.getBoundingClientRect();
      const heading = document.getElementById('bcms-developers-heading').getBoundingClientRect();
      return { style: style.outlineStyle, ringBottom: box.bottom + Math.max(0, reach), headingTop: heading.top };
    })()`)) as { style: string; ringBottom: number; headingTop: number };
    expect(ring.style).not.toBe('none');
    expect(ring.ringBottom).toBeLessThanOrEqual(ring.headingTop);
    await nav.screenshot({ path: path.join(SCREENSHOTS, 'auth-4-focus-ring.png') });
    await context.close();
  }, 60_000);
});

/** Waits until the locator shows (Playwright's own wait, with its message on time-out). */
async function expectVisible(locator: import('playwright-core').Locator): Promise<void> {
  await locator.waitFor({ state: 'visible', timeout: 10_000 });
}

import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type BcmsExtensionsRouter as BcmsRouter } from '../../lib';
import { memoryLogger, JWT_SECRET, role, signToken } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { CHROMIUM, describeInChromium } from '../support/browser';

// The admin shell's API view (<admin.path>/api): the OpenAPI document rendered by Swagger UI, whose
// files the build copies into dist/browser (scripts/vendor-swagger-ui.cjs). Served over HTTP, then
// used in a real Chromium under the shell's CSP, mounted under a prefix as a host may mount it.
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'test-output', 'screenshots');
const AXE = require.resolve('axe-core/axe.min.js');

const stats = createBcmsPlugin({
  name: 'stats',
  controllers: [
    createController({
      name: 'Stats',
      path: '/stats',
      methods: () => ({
        counts: createControllerMethod({ path: '/counts', type: 'get', doc: { summary: 'How many entries each template has.' }, handler: async () => ({ counts: 3 }) }),
      }),
    }),
  ],
});
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));
const admin = signToken([role('ADMIN', 'READ', 'WRITE', 'DELETE', 'EXECUTE')]);

/** The host: the router under /cms, and a sign-in route of its own that answers a token. */
async function mountedApp(openapi?: 'public' | 'token' | 'off'): Promise<{ app: express.Express; router: BcmsRouter; seen: { url: string; authorization?: string }[] }> {
  const seen: { url: string; authorization?: string }[] = [];
  const router = bcmsExtensions(
    { plugins: [stats], functions: [hello] },
    { jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger, database: (await sharedTestDatabase()).knex, admin: { loginUrl: '/cms/login' }, openapi },
  );
  const app = express();
  app.use((req, _res, next) => {
    if (req.path.startsWith('/cms/api/plugin/') || req.path.startsWith('/cms/api/function/')) seen.push({ url: req.originalUrl, authorization: req.headers.authorization });
    next();
  });
  app.post('/cms/login', (_req, res) => {
    res.json({ accessToken: admin });
  });
  app.use('/cms', router);
  await router.ready;
  return { app, router, seen };
}

describe('the API view: its page and files over HTTP', () => {
  let app: express.Express;
  let router: BcmsRouter;
  beforeAll(async () => {
    ({ app, router } = await mountedApp());
  });
  afterAll(() => router.close());

  test('<admin.path>/api is the shell page, under the shell CSP: no inline script or style, no eval, nothing from another origin', async () => {
    const res = await request(app).get('/cms/bcms/api');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe("default-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'; object-src 'none'");
    expect(res.headers['referrer-policy']).toBe('same-origin');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.text).toBe((await request(app).get('/cms/bcms')).text);
  });

  test('Swagger UI, the view module and their stylesheets, under the mount path, beside the document they show', async () => {
    for (const [file, type, text] of [
      ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8', 'SwaggerUIBundle'],
      ['swagger-ui.css', 'text/css; charset=utf-8', '.swagger-ui'],
      ['api.js', 'text/javascript; charset=utf-8', 'export async function renderApi'],
      ['api.css', 'text/css; charset=utf-8', '.bcms-api'],
    ]) {
      const res = await request(app).get(`/cms/api/extensions/${file}`);
      expect([file, res.status, res.headers['content-type']]).toEqual([file, 200, type]);
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers.etag).toEqual(expect.any(String));
      expect(res.text).toContain(text);
      // The source maps are not shipped: no comment points at one.
      expect(res.text).not.toMatch(/sourceMappingURL=swagger/);
    }
    // api.js fetches the document beside itself: ./openapi.json under the same prefix.
    const document = await request(app).get('/cms/api/extensions/openapi.json');
    expect(document.status).toBe(200);
    expect(Object.keys(document.body.paths)).toEqual(expect.arrayContaining(['/api/plugin/stats/stats/counts', '/api/function/hello']));
    // Swagger UI's license and notice ship in the package, and are no URL.
    expect((await request(app).get('/cms/api/extensions/swagger-ui.NOTICE.txt')).status).toBe(404);
  });
});

describeInChromium('the API view in Chromium, the router mounted under /cms', () => {
  let server: Server;
  let router: BcmsRouter;
  let seen: { url: string; authorization?: string }[];
  let url: string;
  let browser: Browser;
  let page: Page;
  /** What the browser said went wrong: console errors (CSP refusals among them) and uncaught exceptions. */
  const problems: string[] = [];
  const elsewhere: string[] = [];

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    let app: express.Express;
    ({ app, router, seen } = await mountedApp());
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    page.on('console', (message) => {
      if (message.type() === 'error' || /Content Security Policy/i.test(message.text())) problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(String(error)));
    page.on('request', (sent) => {
      if (!sent.url().startsWith(url) && !sent.url().startsWith('data:')) elsewhere.push(sent.url());
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    server?.close();
    await router?.close();
  });

  test('signed in at /cms/bcms/api: the API link is current and has the focus; the plugin endpoint and the function are listed', async () => {
    await page.goto(`${url}/cms/bcms/api`);
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill('any');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const nav = page.getByRole('navigation', { name: 'BCMS navigation' });
    const link = nav.getByRole('link', { name: 'API' });
    await link.waitFor();
    expect(await link.getAttribute('aria-current')).toBe('page');
    expect(await link.getAttribute('href')).toBe('/cms/bcms/api');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('API');
    expect(await page.title()).toBe('API · BCMS');
    await operation('/api/plugin/stats/stats/counts').waitFor();
    await operation('/api/function/hello').waitFor();
    expect(await page.getByRole('link', { name: 'openapi.json' }).getAttribute('href')).toBe(`${url}/cms/api/extensions/openapi.json`);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'api-1-listed.png') });
  }, 30_000);

  test('by keyboard: Tab from the API link reaches an operation, Enter expands it and Enter again folds it', async () => {
    await page.getByRole('link', { name: 'API', exact: true }).focus();
    const control = operation('/api/plugin/stats/stats/counts');
    let presses = 0;
    while (!(await control.evaluate((element) => element === element.ownerDocument.activeElement))) {
      presses += 1;
      if (presses > 40) throw new Error('40 presses of Tab did not reach the operation');
      await page.keyboard.press('Tab');
    }
    expect(await control.getAttribute('aria-expanded')).toBe('false');
    await page.keyboard.press('Enter');
    await expectAttribute(control, 'aria-expanded', 'true');
    await page.getByRole('button', { name: 'Try it out' }).first().waitFor();
    await page.keyboard.press('Enter');
    await expectAttribute(control, 'aria-expanded', 'false');
  }, 30_000);

  test("Try it out sends the request under the mount path, with the shell's token; the function is listed with its verb", async () => {
    const control = operation('/api/plugin/stats/stats/counts');
    await control.click();
    await page.getByRole('button', { name: 'Try it out' }).first().click();
    await page.getByRole('button', { name: 'Execute' }).first().click();
    await page.locator('.responses-wrapper .live-responses-table .response-col_status').filter({ hasText: '200' }).first().waitFor();
    expect(seen).toEqual([{ url: '/cms/api/plugin/stats/stats/counts', authorization: `Bearer ${admin}` }]);
    const fn = operation('/api/function/hello');
    expect(await fn.locator('.opblock-summary-method').textContent()).toBe('POST');
    await fn.click();
    await expectAttribute(fn, 'aria-expanded', 'true');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'api-2-expanded.png') });
  }, 30_000);

  test('axe-core: no violation but a minor one, operations open, a select in Try it out and the Authorize dialog shown', async () => {
    // An enum path parameter is a select in Try it out: named after its parameter.
    const rollback = operation('/api/extensions/deployments/{kind}/{name}/rollback');
    await rollback.click();
    await page.locator('.opblock', { has: rollback }).getByRole('button', { name: 'Try it out' }).click();
    await page.getByRole('combobox', { name: 'kind' }).waitFor();
    await page.getByRole('button', { name: 'Authorize', exact: true }).click();
    await page.getByRole('dialog').or(page.locator('.dialog-ux')).first().waitFor();
    await page.evaluate(fs.readFileSync(AXE, 'utf8'));
    const violations = (await page.evaluate(
      'axe.run(document).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ") + " " + (n.any[0] ? n.any[0].message.slice(0, 110) : "")) })))',
    )) as {
      id: string;
      impact: string;
      nodes: string[];
    }[];
    // The moderate ones too are repaired as Swagger UI renders (its nested <main>, its same-named
    // responses regions, its dialog's h3 and h4), and the shell's account is a region. What is
    // left is minor: the role that makes Swagger UI's <main> a region, not a second main landmark.
    expect(violations).toEqual([{ id: 'aria-allowed-role', impact: 'minor', nodes: ['#operations ARIA role region is not allowed for given element'] }]);
    // The dialog's icon-only close button, named by the shell (Swagger UI gives it no name).
    await page.getByLabel('Close', { exact: true }).click();
    await page.locator('.dialog-ux').waitFor({ state: 'detached' });
  }, 30_000);

  test('the view loads nothing from another origin, and nothing was refused or thrown', () => {
    expect(elsewhere).toEqual([]);
    expect(problems).toEqual([]);
  });

  function operation(route: string) {
    return page.locator('button.opblock-summary-control').filter({ has: page.locator(`.opblock-summary-path[data-path="${route}"]`) });
  }

  /** Waits until the element's attribute has the value (Swagger UI re-renders after a key press). */
  async function expectAttribute(locator: ReturnType<Page['locator']>, name: string, value: string): Promise<void> {
    for (let tries = 0; (await locator.getAttribute(name)) !== value; tries++) {
      if (tries === 50) throw new Error(`${name} is ${await locator.getAttribute(name)}, not ${value}`);
      await page.waitForTimeout(50);
    }
  }
});

describeInChromium("the API view when the document is for signed-in users only (openapi: 'token'), or not served ('off')", () => {
  let browser: Browser;
  const running: { server: Server; router: BcmsRouter }[] = [];
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    for (const { server, router } of running) {
      server.close();
      await router.close();
    }
  });

  async function signedIn(openapi: 'token' | 'off'): Promise<{ page: Page; url: string }> {
    const { app, router } = await mountedApp(openapi);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    running.push({ server, router });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const page = await browser.newPage();
    await page.goto(`${url}/cms/bcms/api`);
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill('any');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Plugins' }).waitFor();
    return { page, url };
  }

  test("'token': the view fetches the document with the shell's token and lists the operations; without a token it is refused", async () => {
    const { page, url } = await signedIn('token');
    await page.locator('.opblock-summary-path[data-path="/api/plugin/stats/stats/counts"]').waitFor();
    const anonymous = await page.evaluate(async (at) => (await fetch(at)).status, `${url}/cms/api/extensions/openapi.json`);
    expect(anonymous).toBe(401);
    await page.close();
  }, 30_000);

  test("'off': no API link in the navigation (Developers keeps Events and Jobs), and <admin.path>/api shows no API view", async () => {
    const { page } = await signedIn('off');
    const nav = page.getByRole('navigation', { name: 'BCMS navigation' });
    const developers = nav.getByRole('list', { name: 'Developers' });
    await developers.waitFor();
    expect(await developers.getByRole('link').allTextContents()).toEqual(['Events', 'Jobs']);
    expect(await nav.getByRole('link', { name: 'API' }).count()).toBe(0);
    expect(await page.locator('.bcms-api').count()).toBe(0);
    await page.close();
  }, 30_000);
});

import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express from 'express';
import jwt from 'jsonwebtoken';
import { chromium, type Browser, type Frame, type Locator, type Page } from 'playwright-core';
import { bcmsExtensions, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, HTTPStatus, JWTPermissionName, JWTRoleName } from '../../lib';
import { JWT_SECRET, memoryLogger } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { CHROMIUM, describeInChromium, waitUntil } from '../support/browser';

// window.bcms as a BCMS plugin UI uses it, in a real Chromium: the todo UI of test/fixtures-ui/todo-ui
// (Vue 3 .tsx, written as BCMS's plugin-starter writes its todo UI, built by `npm run build:test-ui`)
// against a todo plugin of its own, served by a router in this test. Screenshots go to
// test-output/screenshots/.
const SCREENSHOTS = path.resolve(__dirname, '..', '..', 'test-output', 'screenshots');
const UI_DIR = path.resolve(__dirname, '..', 'fixtures-ui', 'todo-ui', 'dist');
const EMAIL = 'ada@example.com';
const PASSWORD = 'todo-test-password';

interface Todo {
  _id: string;
  description: string;
  done: boolean;
  createdAt: number;
}

/** The todo plugin's back end, as BCMS's plugin-starter has it: GET /todo/all, POST /todo, PUT /todo, and a DELETE. */
function todoPlugin(todos: Map<string, Todo>) {
  const may = (permission: JWTPermissionName) => createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], permission);
  let next = 0;
  const TodoController = createController({
    name: 'Todo',
    path: '/todo',
    methods: () => ({
      all: createControllerMethod({
        path: '/all',
        type: 'get',
        preRequestHandler: may(JWTPermissionName.READ),
        handler: async () => ({ items: [...todos.values()] }),
      }),
      create: createControllerMethod({
        type: 'post',
        preRequestHandler: may(JWTPermissionName.WRITE),
        handler: async ({ request, errorHandler }) => {
          const description = String((request.body as { description?: unknown } | undefined)?.description ?? '').trim();
          if (description === '') throw errorHandler.occurred(HTTPStatus.BAD_REQUEST, 'Describe the todo first.');
          const item: Todo = { _id: `todo-${++next}`, description, done: false, createdAt: Date.now() + next };
          todos.set(item._id, item);
          return { item };
        },
      }),
      update: createControllerMethod({
        type: 'put',
        preRequestHandler: may(JWTPermissionName.WRITE),
        handler: async ({ request, errorHandler }) => {
          const body = (request.body ?? {}) as Partial<Todo>;
          const item = todos.get(String(body._id));
          if (item === undefined) throw errorHandler.occurred(HTTPStatus.NOT_FOUNT, `Todo "${body._id}" does not exist.`);
          if (typeof body.done === 'boolean') item.done = body.done;
          if (typeof body.description === 'string' && body.description.trim() !== '') item.description = body.description.trim();
          return { item };
        },
      }),
      remove: createControllerMethod({
        path: '/:id',
        type: 'delete',
        preRequestHandler: may(JWTPermissionName.DELETE),
        handler: async ({ request, errorHandler }) => {
          if (!todos.delete(request.params.id as string)) throw errorHandler.occurred(HTTPStatus.NOT_FOUNT, `Todo "${request.params.id}" does not exist.`);
          return { deleted: true };
        },
      }),
    }),
  });
  return createBcmsPlugin({ name: 'todos', controllers: [TodoController], ui: { dir: UI_DIR } });
}

describeInChromium('a BCMS-style plugin UI (todos) with window.bcms, in Chromium', () => {
  const todos = new Map<string, Todo>();
  let url: string;
  let server: Server;
  let browser: Browser;
  let page: Page;
  /** Every page error and console error, of the shell and of the plugin's frame. */
  const problems: string[] = [];
  const token = jwt.sign(
    {
      userId: 'ada-1',
      rls: [{ name: 'ADMIN', permissions: ['READ', 'WRITE', 'DELETE', 'EXECUTE'].map((name) => ({ name })) }],
      // Not ASCII: the payload is UTF-8 in base64url, which the SDK decodes as such.
      props: { personal: { firstName: 'Zoë', lastName: 'Ångström 😀' } },
    },
    JWT_SECRET,
    { algorithm: 'HS256', expiresIn: '1h' },
  );

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    const router = bcmsExtensions({ plugins: [todoPlugin(todos)] }, { database: (await sharedTestDatabase()).knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
    await router.ready;
    const app = express();
    app.use(router);
    // The host's sign-in, which the shell posts to (admin.loginUrl's default).
    app.post('/api/auth/login', express.json(), (req, res) => {
      const { email, password } = (req.body ?? {}) as { email?: string; password?: string };
      if (email !== EMAIL || password !== PASSWORD) return void res.status(401).json({ message: 'Wrong email or password.' });
      res.json({ accessToken: token });
    });
    server = await new Promise<Server>((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    // A context of its own, so that a second page shares the shell's localStorage (the token).
    page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();
    watch(page);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => server?.close(resolve));
  });

  function watch(target: Page): void {
    target.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    target.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console error: ${message.text()} (${message.location().url})`);
    });
  }

  /** Drops the errors a step expects (the 400 it provoked, as Chromium and BCMS's throwable log it); any other stays. */
  function expectedProblems(pattern: RegExp): void {
    const others = problems.filter((problem) => !pattern.test(problem));
    problems.splice(0, problems.length, ...others);
  }

  const plugin = () => page.frameLocator('iframe[title="Todos plugin"]');
  const pluginFrame = (): Frame => page.frames().find((frame) => frame.url().includes('/plugin/todos/')) as Frame;

  /** A read over HTTP, as another client sees the data. */
  async function read<T>(route: string): Promise<T> {
    const response = await fetch(`${url}${route}`, { headers: { Authorization: `Bearer ${token}` } });
    expect(response.status).toBe(200);
    return (await response.json()) as T;
  }
  const storedTodos = async () => (await read<{ items: Todo[] }>('/api/plugin/todos/todo/all')).items.map(({ description, done }) => ({ description, done }));

  test('sign in and open the plugin with the mouse: its own back end, sdk.user and sdk.template answer', async () => {
    await page.goto(`${url}/bcms`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'BCMS navigation' }).getByRole('link', { name: 'Todos' }).click();
    await page.waitForURL(`${url}/bcms/plugins/todos`);
    await visible(plugin().getByRole('heading', { name: 'Todos', level: 1 }));
    await visible(plugin().getByRole('heading', { name: 'Todo (0)' }));
    await visible(plugin().getByText('Signed in as ada-1'));
    await visible(plugin().getByRole('heading', { name: 'Notes (0)' }));
  });

  test("the frame is sandboxed: its window.bcms is a bridge to the shell, with the token's claims (never the token) and the service's origin", async () => {
    const frame = pluginFrame();
    expect(await page.locator('iframe[title="Todos plugin"]').getAttribute('sandbox')).toBe('allow-scripts allow-forms allow-popups allow-downloads');
    // Not the shell's origin: an opaque one.
    expect(await frame.evaluate('self.origin')).toBe('null');
    // BCMS UIs start with window.bcms = window.parent.bcms: in the frame, that is its bridge.
    expect(await frame.evaluate('window.bcms === window.parent.bcms && typeof window.parent.postMessage')).toBe('function');
    expect(await frame.evaluate('window.bcms.origin')).toBe(url);
    expect(await frame.evaluate('Object.keys(window.bcms.sdk.getAccessToken()).sort()')).toEqual(['header', 'payload']);
    expect(await frame.evaluate('window.bcms.sdk.getAccessToken().payload.userId')).toBe('ada-1');
    expect(await frame.evaluate('window.bcms.sdk.getAccessToken().header.alg')).toBe('HS256');
    expect(await frame.evaluate('window.bcms.sdk.getAccessToken().payload.props.personal')).toEqual({ firstName: 'Zoë', lastName: 'Ångström 😀' });
    expect(await frame.evaluate('window.bcms.sdk.user.get().then((user) => user.customPool.personal.firstName)')).toBe('Zoë');
    expect(await frame.evaluate('window.bcms.vue.store.getters.user_findOne((user) => user._id === "ada-1")?._id')).toBe('ada-1');
    expect(await frame.evaluate('window.bcms.sdk.isLoggedIn()')).toBe(true);
    // send puts /api in front of a BCMS-relative URL; without Authorization '' no token goes.
    expect(await frame.evaluate("window.bcms.sdk.send({ url: '/plugin/todos/todo/all', headers: { Authorization: '' } }).then((r) => r.items.length)")).toBe(0);
    expect(await frame.evaluate("window.bcms.sdk.send({ url: '/plugin/todos/todo/all' }).then(() => 'answered', (e) => [e.status, e.message])")).toEqual([401, 'Token is `undefined`.']);
    expectedProblems(/status of 401/);
  });

  test('the frame reads nothing of the shell: not its storage, cookies or document, and nothing it is posted holds the token', async () => {
    const frame = pluginFrame();
    // Everything the shell posts to the frame, from here on, and what the frame was named with.
    await frame.evaluate("window.__seen = [window.name]; addEventListener('message', (event) => window.__seen.push(JSON.stringify(event.data)))");
    const refused = (expression: string) =>
      frame.evaluate(`(() => { try { const value = ${expression}; return value === undefined ? 'undefined' : 'read: ' + String(value); } catch (error) { return error.name; } })()`);
    expect(await refused("localStorage.getItem('bcms.accessToken')")).toBe('SecurityError');
    expect(await refused('sessionStorage.length')).toBe('SecurityError');
    expect(await refused('document.cookie')).toBe('SecurityError');
    expect(await refused('window.parent.document')).toBe('undefined');
    expect(await refused('window.parent.localStorage')).toBe('undefined');
    expect(await refused('window.top.document')).toBe('SecurityError');
    expect(await refused('window.top.bcms')).toBe('SecurityError');
    // The service's routes, asked directly: no token goes with them.
    expect(await frame.evaluate(`fetch(${JSON.stringify(`${url}/api/plugin/todos/todo/all`)}).then((r) => r.status, (e) => e.name)`)).toBe(401);
    // A token asked for beside the frame's own Authorization values, spelt three ways: it goes alone
    // (had fetch joined them into one header, the guard would refuse it, and a route that echoes
    // that header would hand the token back).
    expect(
      await frame.evaluate(
        "window.bcms.sdk.send({ url: '/plugin/todos/todo/all', headers: { authorization: 'Signature keyId=\"a\",algorithm=\"', Authorization: '', AUTHORIZATION: '\"' } }).then((r) => r.items.length, (e) => e.message)",
      ),
    ).toBe(0);
    // API keys would outlast the session: a frame never reaches their routes, however spelt.
    const keysBefore = await read<{ keys: unknown[] }>('/api/extensions/keys');
    for (const route of ['/extensions/keys', '/EXTENSIONS/Keys/', '/extensions//keys', '/extensions/x/../keys']) {
      expect(
        await frame.evaluate(
          `window.bcms.sdk.send({ url: ${JSON.stringify(route)}, method: 'POST', data: { name: 'from-a-frame' }, headers: { Authorization: '' } }).then(() => 'made', (e) => [e.status, e.message])`,
        ),
      ).toEqual([403, 'A plugin UI may not manage API keys (they would outlast the session): use bcms-ext keys, or the service itself.']);
    }
    expect(await read<{ keys: unknown[] }>('/api/extensions/keys')).toEqual(keysBefore);
    // Calls that carry the token, through the bridge: their answers come back, the token does not.
    expect(await frame.evaluate('window.bcms.sdk.template.getAll().then((all) => Array.isArray(all))')).toBe(true);
    expect(await frame.evaluate('window.bcms.sdk.user.getAll().then((all) => all.length)')).toBe(1);
    await frame.evaluate("window.bcms.notification.info('Checked.')");
    const seen = (await frame.evaluate('window.__seen')) as string[];
    expect(seen.length).toBeGreaterThan(2);
    const [, , signature] = token.split('.');
    for (const message of seen) {
      expect(message).not.toContain(token);
      expect(message).not.toContain(signature);
    }
    expectedProblems(/status of 401/);
  });

  test('add todos by keyboard: they land in the back end, and a success notification (role status) shows in the shell, then goes', async () => {
    const description = plugin().getByLabel('Description');
    await description.focus();
    await page.keyboard.type('Buy milk');
    await page.keyboard.press('Enter');
    await visible(plugin().getByRole('list', { name: 'Todo' }).getByText('Buy milk'));
    const added = page.getByRole('status').filter({ hasText: 'Added "Buy milk".' });
    await visible(added);
    // In the shell's page, not the frame's.
    expect(await plugin().getByRole('status').count()).toBe(0);
    await page.keyboard.type('Water plants');
    await page.keyboard.press('Enter');
    await visible(plugin().getByRole('list', { name: 'Todo' }).getByText('Water plants'));
    await visible(plugin().getByRole('heading', { name: 'Todo (2)' }));
    expect(await storedTodos()).toEqual([
      { description: 'Buy milk', done: false },
      { description: 'Water plants', done: false },
    ]);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'todo-1-added.png') });
    await added.waitFor({ state: 'detached', timeout: 0 });
  });

  test('mark one done with the mouse: the update (PUT through sdk.send) lands', async () => {
    await plugin().getByRole('checkbox', { name: 'Buy milk' }).click();
    await visible(plugin().getByRole('list', { name: 'Done' }).getByText('Buy milk'));
    await visible(plugin().getByRole('heading', { name: 'Done (1)' }));
    expect(await storedTodos()).toEqual([
      { description: 'Buy milk', done: true },
      { description: 'Water plants', done: false },
    ]);
  });

  test("the back end's error, through util.throwable: an error notification (role alert) in the shell, gone by itself", async () => {
    const description = plugin().getByLabel('Description');
    await description.fill('   ');
    await description.press('Enter');
    const alert = page.getByRole('alert').filter({ hasText: 'Describe the todo first.' });
    await visible(alert);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'todo-2-error.png') });
    expect(await storedTodos()).toHaveLength(2);
    await alert.waitFor({ state: 'detached', timeout: 0 });
    expectedProblems(/status of 400|Describe the todo first/);
  });

  test('delete behind confirm: a modal alertdialog in the shell; Escape cancels and the focus comes back; OK by keyboard deletes', async () => {
    await description().fill('');
    // The mouse opens it.
    await plugin().getByRole('button', { name: 'Delete Water plants' }).click();
    const dialog = page.getByRole('alertdialog', { name: 'Delete todo' });
    await visible(dialog);
    await visible(dialog.getByText('Delete "Water plants"? This cannot be undone.'));
    await visible(dialog.getByRole('button', { name: 'OK' }));
    // The focus moved into it, on the least destructive choice.
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Cancel');
    expect(await page.evaluate("document.activeElement.closest('[role=alertdialog]') !== null")).toBe(true);
    // A notification while it is open is not left inert behind it: it shows, and the mouse dismisses it.
    await pluginFrame().evaluate("window.bcms.notification.warning('Saved elsewhere meanwhile.')");
    const warning = page.getByRole('alert').filter({ hasText: 'Saved elsewhere meanwhile.' });
    await visible(warning);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'todo-3-confirm.png') });
    await warning.getByRole('button', { name: 'Dismiss notification' }).click();
    // Gone by its button: the pointer on it holds its own timer, so nothing else takes it away.
    await warning.waitFor({ state: 'detached', timeout: 0 });
    await dialog.getByRole('button', { name: 'Cancel' }).focus();
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    // Back where it was: the Delete button, inside the plugin's frame (the dialog's close event comes a task later).
    await waitUntil(page, "document.activeElement.tagName === 'IFRAME'");
    expect(await pluginFrame().evaluate("document.activeElement.getAttribute('aria-label')")).toBe('Delete Water plants');
    expect(await storedTodos()).toHaveLength(2);

    // The keyboard: Enter on the focused Delete, Tab to OK, Enter.
    await page.keyboard.press('Enter');
    await visible(dialog);
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('OK');
    await page.keyboard.press('Enter');
    await dialog.waitFor({ state: 'detached' });
    await visible(page.getByRole('status').filter({ hasText: 'Deleted "Water plants".' }));
    await visible(plugin().getByRole('heading', { name: 'Todo (0)' }));
    expect(await storedTodos()).toEqual([{ description: 'Buy milk', done: true }]);
    // Its button is gone: the focus went on to the form.
    expect(await pluginFrame().evaluate('document.activeElement.id')).toBe('todo-description');
  });

  const description = () => plugin().getByLabel('Description');

  test('notes through sdk.template and sdk.entry: create, update and delete land in the content store', async () => {
    await plugin().getByRole('textbox', { name: 'Note' }).fill('Call the plumber');
    await plugin().getByRole('button', { name: 'Save note' }).click();
    await visible(plugin().getByRole('list', { name: 'Notes' }).getByText('Call the plumber'));
    await visible(plugin().getByRole('heading', { name: 'Notes (1)' }));
    const saved = page.getByRole('status').filter({ hasText: 'Note saved.' });
    await visible(saved);
    // Dismissed with its button (by the mouse), before its time: the pointer on it holds its timer, so nothing else takes it away.
    await saved.getByRole('button', { name: 'Dismiss notification' }).click();
    await saved.waitFor({ state: 'detached', timeout: 0 });
    const { templates } = await read<{ templates: { _id: string; name: string; label: string }[] }>('/api/extensions/templates');
    const notes = templates.find((template) => template.name === 'notes');
    expect(notes?.label).toBe('Notes');
    const stored = async () =>
      (await read<{ entries: { status: string; userId: string; meta: { props: { id: string; data: unknown[] }[] }[] }[] }>(`/api/extensions/templates/${notes?._id}/entries`)).entries.map((entry) => ({
        status: entry.status,
        userId: entry.userId,
        text: entry.meta[0]?.props[0]?.data[0],
      }));
    expect(await stored()).toEqual([{ status: 'active', userId: 'ada-1', text: 'Call the plumber' }]);

    await plugin().getByRole('button', { name: 'Archive Call the plumber' }).click();
    await visible(plugin().getByRole('list', { name: 'Notes' }).getByText('(archived)'));
    expect(await stored()).toEqual([{ status: 'archived', userId: 'ada-1', text: 'Call the plumber' }]);

    await plugin().getByRole('button', { name: 'Delete note Call the plumber' }).click();
    const dialog = page.getByRole('alertdialog', { name: 'Delete note' });
    await visible(dialog);
    await dialog.getByRole('button', { name: 'OK' }).click();
    await visible(plugin().getByRole('heading', { name: 'Notes (0)' }));
    expect(await stored()).toEqual([]);
  });

  test("the plugin's own route (its #fragment) is kept in the shell's URL, and a reload opens the plugin there again", async () => {
    await pluginFrame().evaluate("location.hash = '#/notes'");
    await page.waitForURL(`${url}/bcms/plugins/todos#/notes`);
    await page.reload();
    await visible(plugin().getByRole('heading', { name: 'Todos', level: 1 }));
    expect(new URL(pluginFrame().url()).hash).toBe('#/notes');
    // Another plugin's link, or this one's, starts clean: the route was this frame's.
    await pluginFrame().evaluate("location.hash = ''");
    await page.waitForURL(`${url}/bcms/plugins/todos`);
  });

  test('opened on its own at the top of a tab: the shell opens it, in its sandboxed frame', async () => {
    const alone = await page.context().newPage();
    watch(alone);
    try {
      await alone.goto(`${url}/plugin/todos/`);
      await alone.waitForURL(`${url}/bcms/plugins/todos`);
      const frame = alone.frameLocator('iframe[title="Todos plugin"]');
      await visible(frame.getByRole('list', { name: 'Done' }).getByText('Buy milk'));
      await frame.getByRole('button', { name: 'Delete Buy milk' }).click();
      const dialog = alone.getByRole('alertdialog', { name: 'Delete todo' });
      await visible(dialog);
      await alone.screenshot({ path: path.join(SCREENSHOTS, 'todo-4-on-its-own.png') });
      await alone.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached' });
      expect(await storedTodos()).toEqual([{ description: 'Buy milk', done: true }]);
    } finally {
      await alone.close();
    }
  });

  test('no page errors and no console errors but the ones the steps provoked', () => {
    expect(problems).toEqual([]);
  });
});

/** Waits until the locator shows (Playwright's own wait), however long a busy machine takes: the test's own time-out is the limit. */
async function visible(locator: Locator): Promise<void> {
  await locator.waitFor({ state: 'visible', timeout: 0 });
}

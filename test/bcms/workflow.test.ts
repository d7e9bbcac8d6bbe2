import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type FrameLocator, type Page } from 'playwright-core';
import { BIN, output, PASSWORD, run, send, service, useWorkflowService, writeEnv } from '../support/workflow';
import { copyBcmsV3Fixture, type BcmsV3Fixture } from './support/bcms-v3';

// BCMS v3 projects (fixtures written in BCMS's idiom) through the workflow as a user runs it:
// bcms-ext port, npm install, npm run bundle, npm run deploy, against the example app.
useWorkflowService();

/** A copy of a BCMS v3 fixture project, ported with bcms-ext port, with a .env and its npm install. */
function portedProject(name: BcmsV3Fixture): string {
  const dir = copyBcmsV3Fixture(name, fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-workflow-')));
  const ported = run(process.execPath, [BIN, 'port'], dir);
  expect(output(ported)).toMatch(/^Ported \. \(a BCMS v3 (plugin|functions) project\) to bcms-extensions:\n/);
  expect(ported.status).toBe(0);
  writeEnv(dir);
  const installed = run('npm', ['install', '--no-audit', '--no-fund'], dir);
  if (installed.status !== 0) throw new Error(`npm install failed:\n${output(installed)}`);
  return dir;
}

test('a BCMS v3 plugin project (BCMS-idiom fixture): port, install, bundle, deploy, its endpoints over HTTP', async () => {
  const dir = portedProject('reading-list');
  const bundled = run('npm', ['run', 'bundle'], dir);
  expect(output(bundled)).toMatch(/Type-checking backend\/\.\.\. ok\nBundling backend\/main\.ts\.\.\. [\d.]+ KB\nWrote bcms-bundle\/plugin-reading-list\.json/);
  expect(bundled.status).toBe(0);
  const written = JSON.parse(fs.readFileSync(path.join(dir, 'bcms-bundle', 'plugin-reading-list.json'), 'utf8')) as { code: string };
  expect(written.code).not.toContain('bcms-plugin---name');
  expect(output(run('npm', ['run', 'deploy'], dir))).toMatch(/Deploying plugin reading-list 0\.1\.0 \([\d.]+ KB\) to http:\/\/localhost:\d+\.\.\. live\./);

  const auth = { Authorization: `Bearer ${service.token}` };
  const book = { title: 'Dune', author: { name: 'Frank Herbert', country: 'US' }, quotes: [{ text: 'Fear is the mind-killer.', page: 8 }], shelf: 'to-read' };
  expect((await send('POST', '/api/plugin/reading-list/book', book)).status).toBe(401);
  // create: a body-checked post with no path of its own; add fills _id, createdAt, updatedAt.
  const created = await send('POST', '/api/plugin/reading-list/book', book, auth);
  expect(created).toEqual({ status: 200, body: { item: { ...book, read: false, _id: expect.stringMatching(/^[0-9a-f]{24}$/), createdAt: expect.any(Number), updatedAt: expect.any(Number) } } });
  const id = (created.body as { item: { _id: string } }).item._id;
  expect(await send('POST', '/api/plugin/reading-list/book', book, auth)).toEqual({ status: 400, body: { message: 'Book "Dune" is already on the list.' } });
  const badQuote = await send('POST', '/api/plugin/reading-list/book', { ...book, title: 'Emma', quotes: [{ text: 'no page' }] }, auth);
  expect(badQuote.status).toBe(400);
  expect((badQuote.body as { message: string }).message).toMatch(/page/);
  const badAuthor = await send('POST', '/api/plugin/reading-list/book', { ...book, title: 'Emma', author: { country: 'UK' } }, auth);
  expect(badAuthor.status).toBe(400);
  expect((badAuthor.body as { message: string }).message).toMatch(/name/);

  expect(await send('GET', '/api/plugin/reading-list/book/all', undefined, auth)).toEqual({ status: 200, body: { items: [(created.body as { item: unknown }).item] } });
  expect(await send('GET', `/api/plugin/reading-list/book/${id}`, undefined, auth)).toEqual(created);
  expect(await send('GET', '/api/plugin/reading-list/book/ffffffffffffffffffffffff', undefined, auth)).toEqual({
    status: 404,
    body: { message: 'Book with ID "ffffffffffffffffffffffff" does not exist.' },
  });
  // update: a body-checked put with no path of its own.
  const updated = await send('PUT', '/api/plugin/reading-list/book', { _id: id, read: true }, auth);
  expect(updated).toMatchObject({ status: 200, body: { item: { _id: id, title: 'Dune', read: true } } });

  // A controller path without its leading slash, a method path 'directory/:id', and setup's result in methods().
  expect(await send('GET', '/api/plugin/reading-list/shelf/directory/to-read', undefined, auth)).toMatchObject({ status: 200, body: { shelf: 'to-read', items: [{ _id: id }] } });
  expect(await send('GET', '/api/plugin/reading-list/shelf/directory/attic', undefined, auth)).toEqual({ status: 404, body: { message: 'Shelf "attic" does not exist.' } });
  // createJwtProtectionPreRequestHandler<BCMSUserCustomPool> from purple-cheetah-mod-jwt.
  expect(await send('GET', '/api/plugin/reading-list/shelf/stats', undefined, auth)).toEqual({
    status: 200,
    body: { userId: expect.any(String), shelves: { 'to-read': 1, reading: 0, done: 0 } },
  });
  expect((await send('GET', '/api/plugin/reading-list/shelf/stats')).status).toBe(401);

  expect(await send('DELETE', `/api/plugin/reading-list/book/${id}`, undefined, auth)).toMatchObject({ status: 200, body: { item: { _id: id } } });
  expect((await send('GET', `/api/plugin/reading-list/book/${id}`, undefined, auth)).status).toBe(404);
}, 240_000);

test('a BCMS v3 functions project (BCMS-idiom fixture): port, install, bundle, deploy, call them', async () => {
  const dir = portedProject('blog-functions');
  const bundled = run('npm', ['run', 'bundle'], dir);
  expect(output(bundled)).toMatch(
    /Type-checking functions\/\.\.\. ok\nBundling functions\/blog-titles\.ts\.\.\. [\d.]+ KB\nBundling functions\/ping\.ts\.\.\. [\d.]+ KB\nBundling functions\/submit-review\.ts/,
  );
  expect(bundled.status).toBe(0);
  expect(output(run('npm', ['run', 'deploy'], dir))).toMatch(/Deploying function blog-titles .*live\.\nDeploying function ping .*live\.\nDeploying function submit-review .*live\./);

  // Public; BCMSRepo.template.findAll() and BCMSRepo.entry.methods.findAllByTemplateId.
  const titles = await send('POST', '/api/function/blog-titles', { template: 'blog' });
  expect(titles.status).toBe(200);
  expect((titles.body as { result: { _id: string; title: unknown }[] }).result.length).toBeGreaterThan(0);
  expect(await send('POST', '/api/function/blog-titles', { template: 'nope' })).toEqual({
    status: 400,
    body: { success: false, error: { code: 'HANDLER_ERROR', message: 'Template "nope" does not exist.' } },
  });
  // No body at all: request.body is {} as in BCMS.
  expect(await send('POST', '/api/function/ping')).toEqual({ status: 200, body: { success: true, result: { pong: true, echo: null } } });
  // `import * as ms from 'ms'`, then ms(...): ported to a default import, bundled, called.
  expect(await send('POST', '/api/function/uptime')).toEqual({ status: 200, body: { success: true, result: { minute: '1m', long: '1 hour' } } });
  // No `public` in its config: private.
  expect((await send('POST', '/api/function/submit-review', { title: 'Dune', rating: 5 })).status).toBe(401);
  const key = run(process.execPath, [BIN, 'keys', 'create', '--name', 'reviewer', '--functions', 'submit-review', '--env'], dir, { BCMS_URL: service.base, BCMS_TOKEN: service.token });
  const env = Object.fromEntries([...key.stdout.matchAll(/^export (\w+)='([^']+)'$/gm)].map((m) => [m[1] as string, m[2] as string]));
  const called = run(process.execPath, [BIN, 'call', 'submit-review', '--data', '{"title":"Dune","rating":5}'], dir, { BCMS_URL: service.base, ...env });
  expect(JSON.parse(called.stdout)).toEqual({ accepted: true, title: 'Dune', rating: 5 });
  const refused = run(process.execPath, [BIN, 'call', 'submit-review', '--data', '{"title":"Dune","rating":9}'], dir, { BCMS_URL: service.base, ...env });
  expect(refused.status).not.toBe(0);
  expect(output(refused)).toMatch(/400 HANDLER_ERROR: The "rating" is a number from 1 to 5\./);
}, 240_000);

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/**
 * A plugin's UI in the shell, in Chromium, signed in as the admin: `use` drives it, and no page
 * error may happen meanwhile. Without Chromium: a failure in CI, a plain notice elsewhere.
 */
async function inPluginUi(label: string, use: (page: Page, ui: FrameLocator) => Promise<void>): Promise<void> {
  if (!fs.existsSync(CHROMIUM)) {
    // CI installs one (.ci/run): there a missing browser fails; elsewhere it is said plainly.
    if (process.env.CI) throw new Error(`no Chromium at ${CHROMIUM}`);
    process.stderr.write(`\nThe ${label} UI was NOT driven in a browser: no Chromium at ${CHROMIUM}.\n`);
    return;
  }
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(`${service.base}/bcms`);
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: label }).click();
    await use(page, page.frameLocator(`iframe[title="${label} plugin"]`));
    expect(errors).toEqual([]);
  } finally {
    await browser.close();
  }
}

test("a BCMS v3 plugin with a UI in plugin-starter's layout (BCMS-idiom fixture): port, install, bundle, deploy; its endpoints over HTTP and its UI in Chromium", async () => {
  const dir = portedProject('todo-board');
  expect(fs.existsSync(path.join(dir, 'ui', 'node_modules', 'bcms-extensions'))).toBe(true); // postinstall: npm --prefix ui install
  const bundled = run('npm', ['run', 'bundle'], dir);
  expect(output(bundled)).toMatch(/Type-checking backend\/\.\.\. ok\nBundling backend\/main\.ts\.\.\. [\d.]+ KB\nBuilding ui\/\.\.\. [\s\S]*\d+ files\nWrote bcms-bundle\/plugin-todo-board\.json/);
  expect(output(run('npm', ['run', 'deploy'], dir))).toMatch(/Deploying plugin todo-board 1\.0\.0 .*live\./);

  const auth = { Authorization: `Bearer ${service.token}` };
  const created = await send('POST', '/api/plugin/todo-board/todo', { description: 'Water the plants' }, auth);
  expect(created).toMatchObject({ status: 200, body: { item: { description: 'Water the plants', slug: 'water-the-plants', done: false } } });
  const id = (created.body as { item: { _id: string } }).item._id;
  // bngine's body checker: useObjectUtility().compareWithSchema, an ObjectUtilityError's message.
  expect(await send('POST', '/api/plugin/todo-board/todo', { description: 3 }, auth)).toEqual({ status: 400, body: { message: 'body.description must be a string, got a number.' } });
  // One path, two methods, each with its own parameter name.
  expect(await send('GET', '/api/plugin/todo-board/todo/Water%20the%20plants', undefined, auth)).toMatchObject({ status: 200, body: { item: { _id: id } } });
  // A file under the plugin's storage (useFS, BCMSConfig.local), read back.
  expect(await send('POST', `/api/plugin/todo-board/todo/${id}/log`, { line: 'one' }, auth)).toEqual({ status: 200, body: { lines: ['1970-01-01T00:00:00.000Z one'] } });
  expect(await send('POST', `/api/plugin/todo-board/todo/${id}/log`, { line: 'two' }, auth)).toEqual({
    status: 200,
    body: { lines: ['1970-01-01T00:00:00.000Z one', '1970-01-01T00:00:00.000Z two'] },
  });
  expect(await send('DELETE', `/api/plugin/todo-board/todo/${id}`, undefined, auth)).toMatchObject({ status: 200, body: { item: { _id: id } } });
  expect(await send('GET', '/api/plugin/todo-board/todo/Water%20the%20plants', undefined, auth)).toEqual({ status: 404, body: { message: 'Todo "Water the plants" does not exist.' } });

  await inPluginUi('Todo board', async (page, ui) => {
    // cms-ui's nav, teleported into #plugin_nav, is a side bar in view: the browser scrolls to `#/`,
    // which is also the id of plugin-starter's page, and a nav above it would be scrolled away.
    const nav = ui.getByRole('navigation', { name: 'Todo board' });
    await nav.getByRole('link', { name: 'Entries' }).waitFor();
    expect(await nav.evaluate((element) => element.getBoundingClientRect().top)).toBe(0);
    // Create, through the plugin's own modal (modal.register, custom.addEditTodo.show).
    await ui.getByRole('button', { name: 'Create todo' }).click();
    const dialog = ui.getByRole('dialog', { name: 'Add todo' });
    await dialog.getByLabel('Description').fill('Buy milk');
    await dialog.getByRole('button', { name: 'Done' }).click();
    await ui.getByText('Todo (1)').waitFor();
    await ui.getByText('Buy milk', { exact: true }).waitFor();
    // Edit.
    await ui.getByRole('button', { name: 'Edit Buy milk' }).click();
    await ui.getByRole('dialog', { name: 'Edit todo' }).getByLabel('Description').fill('Buy oat milk');
    await ui.getByRole('dialog', { name: 'Edit todo' }).getByRole('button', { name: 'Done' }).click();
    await ui.getByText('Buy oat milk', { exact: true }).waitFor();
    // A socket event from the plugin's back end reaches the UI (useSocket → sdk.socket.subscribe).
    await ui.getByRole('button', { name: 'Log' }).click();
    await ui.getByText('1970-01-01T00:00:00.000Z checked buy-oat-milk').waitFor();
    // Mark done, then delete (window.bcms.confirm).
    await ui.getByRole('button', { name: 'Mark done' }).click();
    await ui.getByText('Done (1)').waitFor();
    await ui.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('alertdialog', { name: 'Delete todo' }).getByRole('button', { name: 'OK' }).click();
    await ui.getByText('Done (0)').waitFor();
    expect((await send('GET', '/api/plugin/todo-board/todo/all', undefined, auth)).body).toEqual({ items: [] });
    // Entries: a template given its prop through propChanges, an entry written with the prop's id.
    await ui.getByRole('link', { name: 'Entries' }).click();
    await ui.getByLabel('New entry').fill('From an entry');
    await ui.getByRole('button', { name: 'Add entry' }).click();
    await ui.getByText('From an entry', { exact: true }).waitFor();
    const templates = (await send('GET', '/api/extensions/templates', undefined, auth)).body as { templates: { _id: string; name: string; props: { id: string; name: string }[] }[] };
    const template = templates.templates.find((each) => each.name === 'board_todo');
    expect(template?.props.map((prop) => prop.name)).toEqual(['description']);
    const entries = (await send('GET', `/api/extensions/templates/${template?._id}/entries`, undefined, auth)).body as { entries: { meta: { props: { id: string; data: unknown[] }[] }[] }[] };
    expect(entries.entries.map((entry) => entry.meta[0]?.props)).toEqual([[{ id: template?.props[0]?.id, data: ['From an entry'] }]]);
  });
}, 300_000);

test("a BCMS v3 plugin in bngine's layout (a Vue CLI UI at the root, BCMS-idiom fixture): port, install, bundle, deploy; in Chromium it runs a job from a local git repository, its log arriving live", async () => {
  const dir = portedProject('job-runner');
  const bundled = run('npm', ['run', 'bundle'], dir);
  expect(output(bundled)).toMatch(
    /Type-checking src\/backend\/\.\.\. ok\nBundling src\/backend\/main\.ts\.\.\. [\d.]+ KB\nBuilding ui\/\.\.\. [\s\S]*\d+ files\nWrote bcms-bundle\/plugin-job-runner\.json/,
  );
  expect(output(run('npm', ['run', 'deploy'], dir))).toMatch(/Deploying plugin job-runner 0\.1\.0 .*live\./);

  // The repository a job clones: a local one, whose build.sh waits for the test between its steps. In
  // the plugin's own folder of files.dir (the example app's, under its working directory): the one
  // folder of the host's its sandbox sees (another would be given through extensionPermissions.read).
  const own = path.resolve('.bcms', 'files', 'job-runner');
  fs.mkdirSync(own, { recursive: true });
  const source = fs.mkdtempSync(path.join(own, 'bcms-job-source-'));
  const go = path.join(source, '..', `${path.basename(source)}.go`);
  // At most 2 minutes, should the test stop first: the service's shell would outlive it.
  fs.writeFileSync(path.join(source, 'build.sh'), `echo "step 1"\nfor i in $(seq 1200); do [ -f ${go} ] && break; sleep 0.1; done\necho "step 2"\n`);
  for (const args of [
    ['init', '-q', '-b', 'main'],
    ['add', '.'],
    ['-c', 'user.email=t@example.com', '-c', 'user.name=t', 'commit', '-qm', 'build'],
  ]) {
    expect(run('git', args, source).status).toBe(0);
  }
  const auth = { Authorization: `Bearer ${service.token}` };
  expect(await send('POST', '/api/plugin/job-runner/job', { repo: 'x; rm -rf /' }, auth)).toEqual({ status: 400, body: { message: '"x; rm -rf /" is not a repository URL.' } });

  try {
    await inPluginUi('Job runner', async (page, ui) => {
      // Tailwind ran over the UI's own classes (text-2xl), with the project's config.
      expect(
        await ui
          .getByRole('heading', { name: 'Job runner' })
          .evaluate((element) => (globalThis as unknown as { getComputedStyle(e: unknown): { fontSize: string } }).getComputedStyle(element).fontSize),
      ).toBe('24px');
      // BCMSJwtRoleName (@becomes/cms-sdk's enum) said the user is an admin: the form is there.
      await ui.getByLabel('Repository').fill(source);
      await ui.getByRole('button', { name: 'Run job' }).click();
      await page.getByRole('alertdialog', { name: 'Run job' }).getByRole('button', { name: 'OK' }).click();
      const log = ui.getByLabel(`Log of ${source}`);
      // The first line arrives while the job still runs, held between its two lines (useSocket → sdk.socket.subscribe).
      await log.getByText('step 1').waitFor();
      await ui.getByText(`${source}: RUNNING`).waitFor();
      fs.writeFileSync(go, '');
      await log.getByText('step 2').waitFor();
      await ui.getByText(`${source}: SUCCESS`).waitFor();
      const jobs = (await send('GET', '/api/plugin/job-runner/job/all', undefined, auth)).body as { items: { repo: string; status: string; log: string }[] };
      expect(jobs.items).toEqual([expect.objectContaining({ repo: source, status: 'SUCCESS', log: 'step 1\nstep 2\n' })]);
    });
  } finally {
    fs.writeFileSync(go, ''); // never leave the job's shell waiting
    fs.rmSync(source, { recursive: true, force: true });
  }
}, 300_000);

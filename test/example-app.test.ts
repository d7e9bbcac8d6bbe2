import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../lib/db/connection';
import { serverSchema } from './support/database';
import { freePort } from './support/app';
import { start, stopStartedApps, type Running } from './support/example';

/** Exit code 0 after SIGTERM; if not, the app's own output says why (a signal, a crash on close). */
async function expectCleanExit(app: Running): Promise<void> {
  const code = await app.exited;
  expect({ code, output: code === 0 ? '' : `signal ${String(app.child.signalCode)}\n${app.output()}` }).toEqual({ code: 0, output: '' });
}

// The example app as the README runs it (a child process, on PGlite), and the README's curl
// examples run as they are written, with real curl, through bash.
const root = path.resolve(__dirname, '..');

/** The README's curl block, between its markers. */
function readmeCurlExamples(): string[] {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const block = /<!-- example-curl:start -->\s*```sh\n([\s\S]*?)```\s*<!-- example-curl:end -->/.exec(readme);
  if (!block) throw new Error('README.md has no example-curl block');
  return block[1]!.trim().split('\n');
}

/** Runs the lines in one bash, printing a separator after each, and returns each line's output. */
function runExamples(lines: string[], port: number, password: string): Promise<string[]> {
  const script = lines
    .map((line) => line.replaceAll('localhost:8080', `localhost:${port}`).replace(/^export ADMIN_PASSWORD=.*$/, `export ADMIN_PASSWORD='${password}'`))
    .map((line) => `${line}\necho; echo '@@@'`)
    .join('\n');
  return new Promise((resolve, reject) => {
    // As a reader of the quick start runs them: against the example app's own database, which the
    // test starts without DATABASE_URL (bcms-ext would otherwise reach that database directly).
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.DATABASE_URL;
    execFile('bash', ['-euo', 'pipefail', '-c', script], { encoding: 'utf8', env }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stderr}`));
      else
        resolve(
          stdout
            .split('@@@\n')
            .map((part) => part.trim())
            .slice(0, lines.length),
        );
    });
  });
}

afterEach(stopStartedApps);

describe('the example app, as the README runs it', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-example-'));
  let port: number;

  beforeAll(async () => {
    port = await freePort();
  });

  test('first start: seeds, prints a generated password, answers every README curl example, stops on SIGTERM with 0', async () => {
    const app = await start(port, dataDir);
    const password = /export ADMIN_PASSWORD='([^']+)'/.exec(app.output())?.[1];
    expect(password).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(app.output()).toMatch(/started in \d+\.\d s/);

    const lines = readmeCurlExamples();
    expect(lines.length).toBe(9);
    const outputs = await runExamples(lines, port, password!);
    const json = (i: number) => JSON.parse(outputs[i]!);
    expect(json(1)).toEqual({
      counts: [
        { template: 'blog', label: 'Blog', entries: 3 },
        { template: 'form-submissions', label: 'Form submissions', entries: 0 },
      ],
    });
    expect(json(2)).toEqual({
      success: true,
      result: [
        { _id: expect.any(String), title: 'Hello, world' },
        { _id: expect.any(String), title: 'Plugins and functions' },
        { _id: expect.any(String), title: 'Content through the repository' },
      ],
    });
    expect(outputs[3]).toBe(''); // TOKEN=$(...) prints nothing
    expect(json(4)).toEqual({ success: true, result: { submissionId: expect.stringMatching(/^[0-9a-f-]{36}$/) } });
    expect(outputs[5]).toBe('');
    expect(outputs[6]).toBe(''); // the key's id and secret went into the shell's variables
    expect(json(7)).toEqual({ submissionId: expect.stringMatching(/^[0-9a-f-]{36}$/) }); // bcms-ext call prints the result
    expect(json(8)).toEqual({
      submissions: [
        { _id: json(7).submissionId, createdAt: expect.any(Number), name: 'Grace', email: 'grace@example.com', message: 'Signed' },
        { _id: json(4).result.submissionId, createdAt: expect.any(Number), name: 'Ada', email: 'ada@example.com', message: 'Hello' },
      ],
    });

    // A request in flight when SIGTERM arrives still gets its answer: its headers and half its body
    // are sent before the signal (so the server has taken it up), the rest after.
    const http = await import('node:http');
    let finish = (): void => {};
    const inFlight = new Promise<number | undefined>((resolve, reject) => {
      const req = http.request({ host: 'localhost', port, method: 'POST', path: '/api/function/get-all-blogs-titles', headers: { 'Content-Type': 'application/json', 'Content-Length': 2 } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      });
      req.on('error', reject);
      req.write('{');
      finish = () => req.end('}');
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    app.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    finish();
    expect(await inFlight).toBe(200);
    await expectCleanExit(app);
    expect(app.output()).toMatch(/SIGTERM: stopping\.\.\.\nStopped\./);
  }, 90_000);

  test('second start on the same data: nothing generated or seeded again, data kept; SIGINT stops it with 0', async () => {
    const app = await start(port, dataDir);
    expect(app.output()).not.toMatch(/generated/);
    const counts = await (await fetch(`http://localhost:${port}/api/plugin/content-stats/stats/counts`)).json();
    expect(counts).toEqual({
      counts: [
        { template: 'blog', label: 'Blog', entries: 3 },
        { template: 'form-submissions', label: 'Form submissions', entries: 2 },
      ],
    });
    expect(app.output()).toMatch(/admin@example\.com\s+\(password as set at first start/);
    expect(app.output()).toMatch(/reader@example\.com\s+\(password as set at first start/);
    app.child.kill('SIGINT');
    await expectCleanExit(app);
  }, 90_000);

  test('ADMIN_EMAIL and ADMIN_PASSWORD choose the admin account, and nothing is printed for it', async () => {
    const app = await start(await freePort(), fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-example-')), { ADMIN_EMAIL: 'owner@example.org', ADMIN_PASSWORD: 'correct horse battery' });
    expect(app.output()).toMatch(/owner@example\.org\s+\(password as set/);
    const url = /http:\/\/localhost:(\d+)/.exec(app.output())![0];
    const login = await fetch(`${url}/api/auth/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'owner@example.org', password: 'correct horse battery' }),
    });
    expect(login.status).toBe(200);
    const { accessToken } = (await login.json()) as { accessToken: string };

    // The CMS's own routes, behind its own express-jwt guard.
    expect((await fetch(`${url}/api/templates`)).status).toBe(401);
    const listed = (await (await fetch(`${url}/api/templates`, { headers: { Authorization: `Bearer ${accessToken}` } })).json()) as { templates: { _id: string; name: string }[] };
    const blog = listed.templates.find((t) => t.name === 'blog')!;
    const created = await fetch(`${url}/api/templates/${blog._id}/entries`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${accessToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ meta: [{ lng: 'en', props: [{ id: 'title', data: ['Written through the CMS'] }] }] }),
    });
    expect(created.status).toBe(201);
    const entries = (await (await fetch(`${url}/api/templates/${blog._id}/entries`, { headers: { Authorization: `Bearer ${accessToken}` } })).json()) as { entries: unknown[] };
    expect(entries.entries).toHaveLength(4);
    // ...and the extension interface sees the same content.
    const titles = (await (await fetch(`${url}/api/function/get-all-blogs-titles`, { method: 'POST' })).json()) as { result: { title: string }[] };
    expect(titles.result.map((t) => t.title)).toContain('Written through the CMS');

    // The seeded reader may read but not write.
    const readerPassword = /reader@example\.com\s+password: (\S+)/.exec(app.output())![1];
    const reader = (await (
      await fetch(`${url}/api/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email: 'reader@example.com', password: readerPassword }) })
    ).json()) as { accessToken: string };
    const denied = await fetch(`${url}/api/templates/${blog._id}/entries`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${reader.accessToken}`, 'Content-Type': 'application/json' },
      body: '{"meta":[]}',
    });
    expect(denied.status).toBe(403);
    expect(await denied.json()).toEqual({ message: 'Your role lacks WRITE.' });
    const wrong = await fetch(`${url}/api/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email: 'owner@example.org', password: 'nope' }) });
    expect(wrong.status).toBe(401);
    app.child.kill('SIGTERM');
    await expectCleanExit(app);
  }, 90_000);

  test('its admin is SUDO, so it makes deploy keys over HTTP (keys.deployOverHttp); an admin seeded before gets SUDO at the next start', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-example-sudo-'));
    const credentials = { ADMIN_PASSWORD: 'sudo horse battery' };
    const tokenOf = async (base: string): Promise<string> => {
      const login = await fetch(`${base}/api/auth/login`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: 'admin@example.com', password: credentials.ADMIN_PASSWORD }),
      });
      return ((await login.json()) as { accessToken: string }).accessToken;
    };
    const deployKey = (base: string, token: string) =>
      fetch(`${base}/api/extensions/keys`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: 'deployer', functions: [], deploy: true }),
      });
    let app = await start(await freePort(), dir, credentials);
    let base = /http:\/\/localhost:\d+/.exec(app.output())![0];
    const token = await tokenOf(base);
    expect(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).rls.map((role: { name: string }) => role.name)).toEqual(['ADMIN', 'SUDO']);
    expect((await deployKey(base, token)).status).toBe(201);
    app.child.kill('SIGTERM');
    await expectCleanExit(app);

    // As an earlier version seeded it: ADMIN only. SUDO again once the app starts.
    const database = openDatabase({ pglite: dir });
    const ALL = ['READ', 'WRITE', 'DELETE', 'EXECUTE'].map((name) => ({ name }));
    await database
      .knex('example_users')
      .where({ email: 'admin@example.com' })
      .update({ roles: JSON.stringify([{ name: 'ADMIN', permissions: ALL }]) });
    await database.close();
    app = await start(await freePort(), dir, credentials);
    base = /http:\/\/localhost:\d+/.exec(app.output())![0];
    const again = await tokenOf(base);
    expect(JSON.parse(Buffer.from(again.split('.')[1]!, 'base64url').toString()).rls.map((role: { name: string }) => role.name)).toEqual(['ADMIN', 'SUDO']);
    expect((await deployKey(base, again)).status).toBe(201);
    app.child.kill('SIGTERM');
    await expectCleanExit(app);
  }, 120_000);

  // Needs the server: CI always sets DATABASE_URL (.ci/run).
  (process.env.DATABASE_URL ? test : test.skip)(
    'with DATABASE_URL it runs on that Postgres server',
    async () => {
      const { schema, url, admin, drop } = await serverSchema('bcms_example');
      try {
        const app = await start(await freePort(), dataDir, { DATABASE_URL: url });
        expect(app.output()).toMatch(/database DATABASE_URL/);
        const base = /http:\/\/localhost:\d+/.exec(app.output())![0];
        const titles = (await (await fetch(`${base}/api/function/get-all-blogs-titles`, { method: 'POST' })).json()) as { result: unknown[] };
        expect(titles.result).toHaveLength(3);
        expect((await admin.raw('select count(*)::int as n from ??.bcms_entries', [schema])).rows).toEqual([{ n: 3 }]);
        app.child.kill('SIGTERM');
        await expectCleanExit(app);
      } finally {
        await drop();
      }
    },
    90_000,
  );

  test('a port in use: one line saying so, no stack, exit 1; nothing seeded, so the next start still shows the passwords', async () => {
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, resolve));
    const taken = (busy.address() as net.AddressInfo).port;
    const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-example-busy-'));
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(taken), EXAMPLE_DATA_DIR: fresh, LOG_LEVEL: 'warn' };
    delete env.DATABASE_URL;
    delete env.NODE_OPTIONS;
    const child = spawn(process.execPath, [path.join(root, 'example-app', 'server.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    busy.close();
    expect(code).toBe(1);
    expect(stderr.trim()).toBe(`Port ${taken} is in use: start on another one, for example PORT=${taken + 1} npm start`);
    const next = await start(await freePort(), fresh);
    expect(next.output()).toMatch(/admin@example\.com\s+password: \S+\s+\(generated; shown this once\)/);
    next.child.kill('SIGTERM');
    await expectCleanExit(next);
  }, 90_000);
});

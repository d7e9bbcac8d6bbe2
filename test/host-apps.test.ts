import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import request from 'supertest';
import { freePort } from './support/app';
import { CHROMIUM, describeInChromium } from './support/browser';
import { lintOpenApi } from './support/openapi';

// The packed tarball in an existing app of each Express major the package supports (test/support/host-app.js):
// the app's own users, CORS policy, body parser and error handler, with the router mounted in one line.
const installed = require('./support/installed-app') as {
  pack(dir: string): string;
  installApp(dir: string, tarball: string, extra?: string[]): void;
  tested(...names: string[]): string[];
};
const run = promisify(execFile);

const EXPRESS: Record<4 | 5, string> = { 4: 'express@4.22.3', 5: installed.tested('express')[0] ?? 'express@5' };
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-host-apps-'));
let tarball: string;

beforeAll(() => {
  tarball = installed.pack(work);
}, 120_000);
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

interface HostApp {
  dir: string;
  url: string;
  keys: { caller: { id: string; secret: string }; deployer: { id: string; secret: string } };
  stop(): Promise<void>;
}

/** Installs the app with the tarball and this Express, starts it, and waits for it to listen (its keys made). */
async function startHostApp(major: 4 | 5, allowedOrigin: string): Promise<HostApp> {
  const dir = path.join(work, `express-${major}`);
  installed.installApp(dir, tarball, [EXPRESS[major], 'cors@2.8.6', ...installed.tested('@electric-sql/pglite', 'knex-pglite')]);
  fs.copyFileSync(path.join(__dirname, 'support', 'host-app.js'), path.join(dir, 'server.js'));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '', PORT: String(port), ALLOWED_ORIGIN: allowedOrigin };
  delete env.DATABASE_URL; // the embedded database, as a new app has it
  const child: ChildProcess = spawn(process.execPath, ['server.js'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk));
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    child.on('exit', (code) => reject(new Error(`the host app exited with ${code}: ${stderr}`)));
  });
  const keys = JSON.parse(fs.readFileSync(path.join(dir, 'keys.json'), 'utf8')) as HostApp['keys'];
  return {
    dir,
    url: `http://127.0.0.1:${port}`,
    keys,
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

describe.each([4, 5] as const)('an existing app on Express %i', (major) => {
  let app: HostApp;
  // A page of another origin of the same site (another port), whose scripts call the app with the session cookie.
  let page: { server: http.Server; origin: string };

  beforeAll(async () => {
    const pagePort = await freePort();
    const server = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html><title>other origin</title>'));
    await new Promise<void>((resolve) => server.listen(pagePort, '127.0.0.1', resolve));
    page = { server, origin: `http://127.0.0.1:${pagePort}` };
    app = await startHostApp(major, page.origin);
  }, 300_000);
  afterAll(async () => {
    await app?.stop();
    await new Promise((resolve) => page?.server.close(resolve));
  });

  const signIn = async (email: string, password: string): Promise<string> => {
    const res = await request(app.url).post('/auth/login').send({ email, password }).expect(200);
    return String(res.headers['set-cookie']?.[0]).split(';')[0] ?? '';
  };

  test('the router serves its paths; the rest falls through to the app, its 404 and its error handler', async () => {
    expect((await request(app.url).get('/api/plugin/stats/stats/open')).body).toEqual({ open: true });
    expect((await request(app.url).post('/api/plugin/stats/stats/echo').send({ a: 1 })).body).toEqual({ echoed: { a: 1 } });
    const head = await request(app.url).head('/api/plugin/stats/stats/open');
    expect(head.status).toBe(200);
    const wrongVerb = await request(app.url).delete('/api/plugin/stats/stats/open');
    expect([wrongVerb.status, wrongVerb.headers.allow]).toEqual([405, expect.stringContaining('GET')]);
    expect((await request(app.url).post('/api/function/greet').send({ name: 'Ada' })).body).toEqual({ success: true, result: { greeting: 'Hello, Ada!' } });
    expect((await request(app.url).get('/api/own')).body).toEqual({ own: true, user: null });
    expect((await request(app.url).get('/nowhere')).body).toEqual({ app: 'not found' });
    expect((await request(app.url).get('/api/own/broken')).body).toEqual({ app: 'internal error' });
  });

  test("the app's users: its session reaches the JWT guard through auth.fromRequest; a user without the role is refused", async () => {
    expect((await request(app.url).get('/api/plugin/stats/stats/me')).status).toBe(401);
    const ada = await signIn('ada@example.com', 'ada-password');
    expect((await request(app.url).get('/api/plugin/stats/stats/me').set('Cookie', ada)).body).toEqual({ userId: 'u-ada' });
    const bob = await signIn('bob@example.com', 'bob-password');
    const refused = await request(app.url).get('/api/plugin/stats/stats/me').set('Cookie', bob);
    expect(refused.status).toBe(403);
  });

  test("a 5xx of the router reaches the app's error reporter (onError) and is answered as JSON without its message", async () => {
    const res = await request(app.url).get('/api/plugin/stats/stats/broken');
    expect(res.status).toBe(500);
    expect(res.text).not.toContain('the stats table is gone');
    const reported = (await request(app.url).get('/debug/reported')).body as { source: string; message: string; path: string }[];
    expect(reported).toContainEqual({ source: 'bcms-extensions', message: 'the stats table is gone', path: '/api/plugin/stats/stats/broken' });
  });

  test("a signed call and a deploy with the CLI pass through the app's express.json({ verify: keepRawBody })", async () => {
    const client = `const { createFunctionClient } = require('bcms-extensions/client');
      createFunctionClient({ url: process.env.URL, key: { keyId: process.env.KEY_ID, secret: process.env.KEY_SECRET } })
        .call('secret', { who: 'the app' }).then((result) => console.log(JSON.stringify(result)), (error) => { console.error(error.message); process.exit(1); });`;
    const env = { ...process.env, NODE_OPTIONS: '', URL: app.url, KEY_ID: app.keys.caller.id, KEY_SECRET: app.keys.caller.secret };
    const called = await run(process.execPath, ['-e', client], { cwd: app.dir, env });
    expect(JSON.parse(called.stdout)).toEqual({ signedFor: 'the app' });

    const code = `"use strict";\nconst { createBcmsFunction } = require('bcms-extensions');\nexports.default = createBcmsFunction(async () => ({ config: { name: 'shout', public: true }, handler: async ({ request }) => String(request.body.text).toUpperCase() }));`;
    const manifest = { kind: 'function', name: 'shout', version: '1.0.0', sha256: createHash('sha256').update(code).digest('hex') };
    fs.writeFileSync(path.join(app.dir, 'function-shout.json'), JSON.stringify({ manifest, code }));
    const deployEnv = { ...process.env, NODE_OPTIONS: '', BCMS_URL: app.url, BCMS_KEY_ID: app.keys.deployer.id, BCMS_KEY_SECRET: app.keys.deployer.secret };
    await run(path.join(app.dir, 'node_modules', '.bin', 'bcms-ext'), ['deploy', 'function-shout.json'], { cwd: app.dir, env: deployEnv });
    expect((await request(app.url).post('/api/function/shout').send({ text: 'deployed' })).body).toEqual({ success: true, result: 'DEPLOYED' });
  }, 120_000);

  test('health, and the OpenAPI document with the app’s own title, lint-clean, answering 304 to its ETag', async () => {
    const health = await request(app.url).get('/api/extensions/health');
    expect([health.status, health.body.status]).toEqual([200, 'ok']);
    const document = await request(app.url).get('/api/extensions/openapi.json').expect(200);
    expect(document.body.info).toMatchObject({ title: 'Host app', version: '2.3.4' });
    expect(lintOpenApi(document.body).errors).toEqual([]);
    const again = await request(app.url).get('/api/extensions/openapi.json').set('If-None-Match', String(document.headers.etag));
    expect([again.status, again.text]).toEqual([304, '']);
  }, 60_000);

  describeInChromium('in Chromium', () => {
    test("a page of another origin calls the router with the app's session cookie under the app's own CORS policy", async () => {
      const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      try {
        const tab = await browser.newPage();
        await tab.goto(page.origin);
        const outcome = await tab.evaluate(async (url) => {
          const json = { 'Content-Type': 'application/json' };
          const signedIn = await fetch(`${url}/auth/login`, { method: 'POST', credentials: 'include', headers: json, body: JSON.stringify({ email: 'ada@example.com', password: 'ada-password' }) });
          const me = await fetch(`${url}/api/plugin/stats/stats/me`, { credentials: 'include' });
          const echoed = await fetch(`${url}/api/plugin/stats/stats/echo`, { method: 'POST', credentials: 'include', headers: json, body: '{"from":"the page"}' });
          return { signedIn: signedIn.status, me: await me.json(), echoed: await echoed.json() };
        }, app.url);
        expect(outcome).toEqual({ signedIn: 200, me: { userId: 'u-ada' }, echoed: { echoed: { from: 'the page' } } });
      } finally {
        await browser.close();
      }
      // The app's policy, not the router's '*': another origin is told the one origin the app allows, so its browser refuses.
      const preflight = await request(app.url).options('/api/plugin/stats/stats/echo').set('Origin', 'http://elsewhere.example').set('Access-Control-Request-Method', 'POST');
      expect([preflight.headers['access-control-allow-origin'], preflight.headers['access-control-allow-credentials']]).toEqual([page.origin, 'true']);
    }, 60_000);
  });
});

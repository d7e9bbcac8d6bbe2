import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin } from '../../lib';
import { createRepository } from '../../lib/db/repository';
import { ContentStore } from '../../lib/db/store';
import { buildApp, memoryLogger, role, signToken, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';

/** A built plugin UI, as Vite writes one: index.html and hashed assets. */
function builtUi(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-ui-dist-'));
  fs.mkdirSync(path.join(dir, 'assets'));
  fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><html><head><title>Stats</title><script type="module" src="./assets/app-1a2b.js"></script></head><body></body></html>');
  fs.writeFileSync(path.join(dir, 'assets', 'app-1a2b.js'), 'console.log("plugin ui");');
  fs.writeFileSync(path.join(dir, 'assets', 'style.css'), 'body{}');
  fs.writeFileSync(path.join(dir, '.env'), 'SECRET=secret');
  fs.symlinkSync(path.join(os.tmpdir(), 'outside-the-ui.txt'), path.join(dir, 'link-out.txt'));
  fs.writeFileSync(path.join(os.tmpdir(), 'outside-the-ui.txt'), 'secret');
  return dir;
}

const withUi = createBcmsPlugin({ name: 'content-stats', controllers: [], ui: { dir: builtUi() } });
const labelled = createBcmsPlugin({ name: 'forms', controllers: [], ui: { dir: builtUi(), label: 'Form inbox' } });
const apiOnly = createBcmsPlugin({ name: 'api-only', controllers: [] });
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));
const reader = `Bearer ${signToken([role('USER', 'READ')])}`;

describe('plugin UIs, the SDK and the admin shell', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [withUi, labelled, apiOnly], functions: [hello] });
  });

  test("a plugin's index.html, with the SDK loaded before its own scripts", async () => {
    const res = await request(t.app).get('/plugin/content-stats/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.text).toBe(
      '<!doctype html><html><head><script type="module" src="/api/extensions/sdk.js"></script><title>Stats</title><script type="module" src="./assets/app-1a2b.js"></script></head><body></body></html>',
    );
  });

  test('its assets, typed and cached for good (hashed names); HEAD answers headers only', async () => {
    const js = await request(t.app).get('/plugin/content-stats/assets/app-1a2b.js');
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(js.text).toBe('console.log("plugin ui");');
    const head = await request(t.app).head('/plugin/content-stats/assets/style.css');
    expect(head.status).toBe(200);
    expect(head.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(head.headers['content-length']).toBe('6');
  });

  test('files on disk: an ETag and Last-Modified, 304 for a copy that is current, Range answered with 206', async () => {
    const url = '/plugin/content-stats/assets/app-1a2b.js';
    const first = await request(t.app).get(url);
    expect(first.headers.etag).toMatch(/^W\/"/);
    expect(first.headers['last-modified']).toEqual(expect.any(String));
    expect(first.headers['accept-ranges']).toBe('bytes');
    const again = await request(t.app)
      .get(url)
      .set('If-None-Match', first.headers.etag as string);
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect(again.headers['x-request-id']).toEqual(expect.any(String));
    const part = await request(t.app).get(url).set('Range', 'bytes=0-6');
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe('bytes 0-6/25');
    expect(part.text).toBe('console');
    const beyond = await request(t.app).get(url).set('Range', 'bytes=500-600');
    expect(beyond.status).toBe(416);
    expect(beyond.headers['content-range']).toBe('bytes */25');
    expect(beyond.body).toEqual({ message: 'Requested range is not satisfiable.' });
    const changed = await request(t.app).get(url).set('If-Match', '"not-its-etag"');
    expect(changed.status).toBe(412);
  });

  test('pages held in memory (index.html with the SDK, the shell): an ETag, and 304 for a copy that is current', async () => {
    for (const url of ['/plugin/content-stats/', '/bcms']) {
      const first = await request(t.app).get(url);
      expect(first.status).toBe(200);
      expect(first.headers.etag).toEqual(expect.any(String));
      const again = await request(t.app)
        .get(url)
        .set('If-None-Match', first.headers.etag as string);
      expect(again.status).toBe(304);
      expect(again.headers['cache-control']).toBe('no-cache');
      const stale = await request(t.app).get(url).set('If-None-Match', '"something-else"');
      expect(stale.status).toBe(200);
    }
  });

  test('without its slash: a redirect, so that relative asset URLs resolve', async () => {
    const res = await request(t.app).get('/plugin/content-stats');
    expect(res.status).toBe(308);
    expect(res.headers.location).toBe('/plugin/content-stats/');
  });

  test.each([
    ['a file that is not there', '/plugin/content-stats/assets/missing.js'],
    // The UI is in a folder of the temporary directory, where outside-the-ui.txt is: one level up.
    ['an encoded way out of the directory', '/plugin/content-stats/..%2foutside-the-ui.txt'],
    ['an encoded way out, dots encoded too', '/plugin/content-stats/%2e%2e%2foutside-the-ui.txt'],
    ['a dotfile', '/plugin/content-stats/.env'],
    ['a directory', '/plugin/content-stats/assets'],
    ['a symbolic link that points out', '/plugin/content-stats/link-out.txt'],
  ])('%s: 404 as JSON', async (_name, url) => {
    const res = await request(t.app).get(url);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not found.' });
    expect(res.text).not.toContain('secret');
  });

  test('a write to a UI path: 405 with Allow', async () => {
    const res = await request(t.app).post('/plugin/content-stats/');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });

  test("a plugin without a UI, or no plugin: the path is the host's", async () => {
    expect((await request(t.app).get('/plugin/api-only/')).body).toEqual({ host404: true });
    expect((await request(t.app).get('/plugin/nothing/')).body).toEqual({ host404: true });
  });

  test('the SDK and the shell script are served as JavaScript modules', async () => {
    for (const url of ['/api/extensions/sdk.js', '/api/extensions/shell.js']) {
      const res = await request(t.app).get(url);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(res.text.length).toBeGreaterThan(500);
    }
    expect((await request(t.app).get('/api/extensions/sdk.js')).text).toContain('bcms.accessToken');
  });

  test("every file of a plugin's UI is sent sandboxed (an opaque origin, opened framed or alone), readable from that origin; so are the SDK's modules", async () => {
    const sandbox = 'sandbox allow-scripts allow-forms allow-popups allow-downloads';
    for (const url of ['/plugin/content-stats/', '/plugin/content-stats/index.html', '/plugin/content-stats/assets/app-1a2b.js', '/plugin/content-stats/assets/style.css']) {
      const res = await request(t.app).get(url);
      expect(res.status).toBe(200);
      expect(res.headers['content-security-policy']).toBe(sandbox);
      expect(res.headers['access-control-allow-origin']).toBe('*');
    }
    // The modules the SDK and the shell import, beside them; nothing else under that name.
    for (const url of ['/api/extensions/shell.css', '/api/extensions/dialogs.css']) {
      const res = await request(t.app).get(url);
      expect([res.status, res.headers['content-type']]).toEqual([200, 'text/css; charset=utf-8']);
    }
    for (const url of ['/api/extensions/dialogs.js', '/api/extensions/frame-bridge.js']) {
      const res = await request(t.app).get(url);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(res.headers['access-control-allow-origin']).toBe('*');
    }
    expect((await request(t.app).get('/api/extensions/sdk.js')).text).toContain("from './frame-bridge.js'");
    expect((await request(t.app).get('/api/extensions/bin.js')).status).toBe(404);
    // The shell itself is not sandboxed: it holds the token.
    expect(String((await request(t.app).get('/bcms')).headers['content-security-policy'])).not.toContain('sandbox');
  });

  test("a plugin's page visited at the top of a tab goes to the shell, which opens it in its frame; without a shell it is served, sandboxed", async () => {
    for (const url of ['/plugin/content-stats/', '/plugin/content-stats/index.html']) {
      const visit = await request(t.app).get(url).set('Sec-Fetch-Dest', 'document');
      expect(visit.status).toBe(302);
      expect(visit.headers.location).toBe('/bcms/plugins/content-stats');
    }
    // In a frame, or asked by a script: the page itself.
    expect((await request(t.app).get('/plugin/content-stats/').set('Sec-Fetch-Dest', 'iframe')).status).toBe(200);
    const mounted = await request(express().use('/cms', t.router)).get('/cms/plugin/content-stats/').set('Sec-Fetch-Dest', 'document');
    expect(mounted.headers.location).toBe('/cms/bcms/plugins/content-stats');
    const none = bcmsExtensions(
      { plugins: [createBcmsPlugin({ name: 'alone', controllers: [], ui: { dir: builtUi() } })] },
      { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger, admin: false },
    );
    const alone = await request(express().use(none)).get('/plugin/alone/').set('Sec-Fetch-Dest', 'document');
    expect(alone.status).toBe(200);
    expect(alone.headers['content-security-policy']).toBe('sandbox allow-scripts allow-forms allow-popups allow-downloads');
    await none.close();
  });

  test('the shell page at /bcms and below, with its settings, the SDK and the shell script', async () => {
    for (const url of ['/bcms', '/bcms/plugins/content-stats']) {
      const res = await request(t.app).get(url);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.text).toContain(
        '<script type="application/json" id="bcms-shell-config">{"title":"BCMS","signInPath":"/api/auth/login","tokenField":"accessToken","appUsers":false,"shellPath":"/bcms","api":true}</script>',
      );
      expect(res.text).toContain('<script type="module" src="/api/extensions/sdk.js"></script>');
      expect(res.text).toContain('<script type="module" src="/api/extensions/shell.js"></script>');
    }
    expect((await request(t.app).get('/bcmsx')).body).toEqual({ host404: true });
  });

  test('the shell page carries a CSP (its own origin only; no framing by another site), Referrer-Policy and nosniff', async () => {
    const res = await request(t.app).get('/bcms');
    const csp = String(res.headers['content-security-policy']);
    for (const directive of ["default-src 'self'", "frame-ancestors 'self'", "base-uri 'none'", "form-action 'self'", "object-src 'none'", "connect-src 'self'"]) {
      expect(csp.split('; ')).toContain(directive);
    }
    // No inline script nor style: the shell's stylesheet and the SDK's are files of their own.
    expect(csp).not.toContain('unsafe-inline');
    expect(res.text).not.toContain('<style');
    expect(res.text).toContain('<link rel="stylesheet" href="/api/extensions/shell.css">');
    expect(res.headers['referrer-policy']).toBe('same-origin');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    // A sign-in route on another origin is allowed to be asked, and only it.
    const elsewhere = bcmsExtensions({}, { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger, admin: { loginUrl: 'https://auth.example.com/login' } });
    const other = await request(express().use(elsewhere)).get('/bcms');
    expect(String(other.headers['content-security-policy']).split('; ')).toContain("connect-src 'self' https://auth.example.com");
    await elsewhere.close();
  });

  test('mounted under a prefix, every URL carries it', async () => {
    const app = express().use('/cms', t.router);
    const shell = await request(app).get('/cms/bcms');
    expect(shell.text).toContain('"shellPath":"/cms/bcms"');
    expect(shell.text).toContain('src="/cms/api/extensions/sdk.js"');
    expect((await request(app).get('/cms/plugin/content-stats/')).text).toContain('src="/cms/api/extensions/sdk.js"');
    const plugins = await request(app).get('/cms/api/extensions/plugins').set('Authorization', reader);
    expect(plugins.body.plugins[0]).toEqual({ name: 'content-stats', label: 'Content stats', uiUrl: '/cms/plugin/content-stats/', policies: [] });
  });

  test('admin options: another path, login route and title; or no shell at all', async () => {
    const custom = bcmsExtensions({}, { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger, admin: { path: '/admin/cms', loginUrl: '/login', title: 'Acme <CMS>' } });
    const none = bcmsExtensions({}, { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger, admin: false });
    const page = await request(express().use(custom)).get('/admin/cms');
    expect(page.text).toContain('<title>Acme &#60;CMS&#62;</title>');
    expect(page.text).toContain('{"title":"Acme \\u003cCMS>","signInPath":"/login","tokenField":"accessToken","appUsers":false,"shellPath":"/admin/cms","api":true}');
    expect((await request(express().use(none)).get('/bcms')).status).toBe(404);
    expect(() => bcmsExtensions({}, { admin: { path: 'bcms' } })).toThrow('option admin.path must be a path such as "/bcms"');
    for (const path of ['/api/admin', '/api', '/plugin', '/plugin/x', '/bcms/']) {
      expect(() => bcmsExtensions({}, { admin: { path } })).toThrow('option admin.path must be a path such as "/bcms"');
    }
    expect(() => bcmsExtensions({}, { admin: { tittle: 'x' } as never })).toThrow('unknown option "admin.tittle"');
  });

  test('a UI that was never built is refused while the router is built', () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-ui-empty-'));
    const plugin = createBcmsPlugin({ name: 'unbuilt', controllers: [], ui: { dir: empty } });
    expect(() => bcmsExtensions({ plugins: [plugin] })).toThrow(`plugin "unbuilt": ui.dir ${empty} has no index.html: build the UI first (vite build)`);
    expect(() => bcmsExtensions({ plugins: [createBcmsPlugin({ name: 'bad', controllers: [], ui: 'dist' as never })] })).toThrow('plugin "bad": ui must be { dir, label? }');
  });
});

describe("the SDK's data routes, for a token whose role holds READ", () => {
  let t: TestApp;
  let templateId: string;
  let entryId: string;
  beforeAll(async () => {
    t = await buildApp({ plugins: [withUi, labelled, apiOnly], functions: [hello] });
    const repo = createRepository(new ContentStore({ knex: t.router.db, description: 'test', close: async () => {} }, memoryLogger().logger));
    const template = await repo.template.add({ name: `sdk-${Date.now()}`, label: 'SDK test' });
    templateId = template._id;
    entryId = (await repo.entry.add({ templateId, meta: [{ lng: 'en', props: [{ id: 'title', data: ['First'] }] }] }))._id;
  });

  test('plugins, by readable name, with the URL of their UI or null', async () => {
    const res = await request(t.app).get('/api/extensions/plugins').set('Authorization', reader);
    expect(res.body).toEqual({
      plugins: [
        { name: 'content-stats', label: 'Content stats', uiUrl: '/plugin/content-stats/', policies: [] },
        { name: 'forms', label: 'Form inbox', uiUrl: '/plugin/forms/', policies: [] },
        { name: 'api-only', label: 'Api only', uiUrl: null, policies: [] },
      ],
    });
  });

  test('functions, templates and entries in BCMS shapes', async () => {
    expect((await request(t.app).get('/api/extensions/functions').set('Authorization', reader)).body).toEqual({ functions: [{ name: 'hello', public: true }] });
    const templates = await request(t.app).get('/api/extensions/templates').set('Authorization', reader);
    expect(templates.body.templates).toContainEqual(expect.objectContaining({ _id: templateId, label: 'SDK test', singleEntry: false, createdAt: expect.any(Number) }));
    expect((await request(t.app).get(`/api/extensions/templates/${templateId}`).set('Authorization', reader)).body).toMatchObject({ _id: templateId });
    const entries = await request(t.app).get(`/api/extensions/templates/${templateId}/entries`).set('Authorization', reader);
    expect(entries.body).toEqual({ entries: [expect.objectContaining({ _id: entryId, templateId, meta: [{ lng: 'en', props: [{ id: 'title', data: ['First'] }] }] })] });
    expect((await request(t.app).get(`/api/extensions/templates/${templateId}/entries/${entryId}`).set('Authorization', reader)).body).toMatchObject({ _id: entryId });
  });

  test('not there: 404; an entry asked for under another template: 404', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    expect((await request(t.app).get(`/api/extensions/templates/${missing}`).set('Authorization', reader)).body).toEqual({ message: 'Template not found.' });
    const elsewhere = await request(t.app).get(`/api/extensions/templates/${missing}/entries/${entryId}`).set('Authorization', reader);
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body).toEqual({ message: 'Entry not found.' });
    expect((await request(t.app).get('/api/extensions/templates/not-an-id').set('Authorization', reader)).status).toBe(404);
  });

  test('no token: 401; a role without READ: 403', async () => {
    const none = await request(t.app).get('/api/extensions/templates');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ message: 'Token is `undefined`.' });
    const writer = await request(t.app)
      .get('/api/extensions/plugins')
      .set('Authorization', `Bearer ${signToken([role('EDITOR', 'WRITE')])}`);
    expect(writer.status).toBe(403);
  });
});

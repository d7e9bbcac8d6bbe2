import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction } from '../../lib';
import { appVersion } from '../../lib/openapi/info';
import { buildApp, type TestApp } from '../support/app';
import { lintOpenApi, validateOpenApi } from '../support/openapi';

// openapi.info: the document's title, version, description and license are the app's; its ETag answers 304.
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));
const DOCUMENT = '/api/extensions/openapi.json';
const INFO = {
  title: 'Shop API',
  version: '2.1.0',
  description: 'What the shop serves.',
  license: { name: 'MIT', identifier: 'MIT' },
};

describe('openapi: { info }', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ functions: [hello] }, { openapi: { info: INFO } });
  });

  test('the document says what the app gave, and is lint-clean under Redocly (no license warning either)', async () => {
    const res = await request(t.app).get(DOCUMENT);
    expect(res.status).toBe(200);
    expect(res.body.info).toEqual(INFO);
    expect(validateOpenApi(res.body)).toEqual({ valid: true, version: '3.1', errors: [] });
    const lint = lintOpenApi(res.body);
    expect(lint.errors).toEqual([]);
    expect(lint.warnings.filter((rule) => rule.startsWith('info-'))).toEqual([]);
    expect(t.router.openapi().info).toEqual(INFO);
  });

  test('If-None-Match: its ETag, a list holding it, or * answer 304 with no body; another tag 200', async () => {
    const first = await request(t.app).get(DOCUMENT);
    const etag = String(first.headers.etag);
    for (const match of [etag, `"other", ${etag}`, '*']) {
      const res = await request(t.app).get(DOCUMENT).set('If-None-Match', match);
      expect([match, res.status, res.text, res.headers.etag]).toEqual([match, 304, '', etag]);
    }
    const stale = await request(t.app).get(DOCUMENT).set('If-None-Match', '"other"');
    expect([stale.status, stale.body.info.title]).toEqual([200, 'Shop API']);
  });

  test('the access and the info together; the string form still works', async () => {
    const guarded = await buildApp({ functions: [hello] }, { openapi: { access: 'token', info: { title: 'Guarded' } } });
    expect((await request(guarded.app).get(DOCUMENT)).status).toBe(401);
    expect(guarded.router.openapi().info).toMatchObject({ title: 'Guarded' });
    const off = await buildApp({ functions: [hello] }, { openapi: { access: 'off' } });
    expect((await request(off.app).get(DOCUMENT)).status).toBe(404);
  });

  test("without info: admin.title (BCMS by default) and the app's version, from the package.json where it runs", async () => {
    const plain = await buildApp({ functions: [hello] }, { admin: { title: 'Back office' } });
    const { version } = JSON.parse(fs.readFileSync(path.join(process.cwd(), 'package.json'), 'utf8')) as { version: string };
    expect(plain.router.openapi().info).toMatchObject({ title: 'Back office', version });
    expect(plain.router.openapi().info).not.toHaveProperty('license');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-app-version-'));
    try {
      expect(appVersion('0.1.0', dir)).toBe('0.1.0'); // no package.json
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'shop', version: '3.2.1' }));
      expect(appVersion('0.1.0', dir)).toBe('3.2.1');
      fs.writeFileSync(path.join(dir, 'package.json'), '{ not json');
      expect(appVersion('0.1.0', dir)).toBe('0.1.0');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an info that cannot be written is refused at start, naming the field', () => {
    const refused = (openapi: unknown) => () => bcmsExtensions({}, { openapi: openapi as never });
    expect(refused({ info: { titel: 'x' } })).toThrow('unknown option "openapi.info.titel"');
    expect(refused({ info: { version: 2 } })).toThrow('option openapi.info.version must be a non-empty string, got 2');
    expect(refused({ info: { license: { url: 'https://x' } } })).toThrow('option openapi.info.license.name must be a non-empty string');
    expect(refused({ info: { license: { name: 'MIT', identifier: 'MIT', url: 'https://x' } } })).toThrow('an identifier or a url, not both');
    expect(refused({ access: 'private' })).toThrow("option openapi.access must be 'public', 'token' or 'off', got \"private\"");
    expect(refused({ acces: 'token' })).toThrow('unknown option "openapi.acces"');
  });
});

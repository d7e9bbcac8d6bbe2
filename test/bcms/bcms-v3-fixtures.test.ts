import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, BCMSRepo, createApiKey, type BcmsExtensionsRouter, type BcmsFunctionModule, type BcmsPlugin } from '../../lib';
import { signRequest } from '../../lib/client';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { portBcmsV3Fixture } from './support/bcms-v3';
import { backends, openTestDatabase, type Backend, type TestDatabase } from '../support/database';
import { bundleFile, deploy } from '../support/deploy';
import { hmacKey } from '../support/signature';

// The BCMS v3 fixtures (test/bcms/fixtures: a plugin and a functions project written as BCMS
// users write them, with BCMS's own import lines), ported with `bcms-ext port`'s own code into a
// folder of this file's own, then served over HTTP: everything but what test/bcms/bcms-v3-plugin
// covers (the book repository's round trip).
const DIR = path.join(__dirname, '..', '..', 'test-output', 'plugin-bcms-v3');

const readingListProject = portBcmsV3Fixture('reading-list', { parent: DIR });
const functionsProject = portBcmsV3Fixture('blog-functions', { parent: DIR });
const readingList = (require(readingListProject.backendMain as string) as { default: BcmsPlugin }).default;
const functions = functionsProject.functionFiles.map((file) => (require(file) as { default: BcmsFunctionModule }).default);

/**
 * `registry`: the ported code in the router's registry, in the service's process. `deployed`: the
 * same projects bundled as `bcms-ext bundle` bundles them and deployed, so that they run isolated.
 */
type Mode = 'registry' | 'deployed';
const modes = backends().flatMap((backend) => (['registry', 'deployed'] as const).map((mode): [string, Mode] => [backend, mode]));

/** The deployed mode's bundles, made once for every backend. */
let bundled: { kind: 'plugin' | 'function'; name: string; code: string }[] | undefined;
function bundles(): { kind: 'plugin' | 'function'; name: string; code: string }[] {
  bundled ??= [
    { kind: 'plugin', name: 'reading-list', code: bundleFile(readingListProject.dir, readingListProject.backendMain as string) },
    ...functionsProject.functionFiles.map((file) => ({ kind: 'function' as const, name: path.basename(file, '.ts'), code: bundleFile(functionsProject.dir, file) })),
  ];
  return bundled;
}

const reader = `Bearer ${signToken([role('USER', 'READ')], { payload: { userId: 'reader-1' } })}`;
const writer = `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE')])}`;

describe.each(modes)('the BCMS v3 fixtures, ported, over HTTP on %s (%s)', (backend, mode) => {
  let database: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;

  beforeAll(async () => {
    database = await openTestDatabase(backend as Backend);
    const registry = mode === 'registry' ? { plugins: [readingList], functions } : {};
    router = bcmsExtensions(registry, { database: database.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
    app = express().use(router);
    await router.ready;
    if (mode === 'deployed') {
      const deployer = await hmacKey(database.knex, [], { deploy: true });
      for (const { kind, name, code } of bundles()) await deploy(app, deployer, kind, name, code);
    }
  }, 60_000);
  afterAll(async () => {
    await router.close();
    await database.close();
  });

  test("the plugin is served under its pluginName's slug, its placeholder replaced", async () => {
    expect(readingList.name).toBe('reading-list');
    expect((await request(app).get('/api/plugin/reading-list/book/all').set('Authorization', reader)).status).toBe(200);
  });

  test("'directory/:id' (no leading /) with BCMS's JWT guard, and HTTPStatus.NOT_FOUNT", async () => {
    const book = { title: 'Emma', author: { name: 'Jane Austen' }, quotes: [], shelf: 'to-read' };
    expect((await request(app).post('/api/plugin/reading-list/book').set('Authorization', writer).send(book)).status).toBe(200);
    const shelf = await request(app).get('/api/plugin/reading-list/shelf/directory/to-read').set('Authorization', reader);
    expect(shelf.status).toBe(200);
    expect(shelf.body).toMatchObject({ shelf: 'to-read', items: [{ title: 'Emma' }] });
    const missing = await request(app).get('/api/plugin/reading-list/shelf/directory/attic').set('Authorization', reader);
    expect([missing.status, missing.body]).toEqual([404, { message: 'Shelf "attic" does not exist.' }]);
    expect((await request(app).get('/api/plugin/reading-list/shelf/directory/to-read')).status).toBe(401);
  });

  test('createJwtProtectionPreRequestHandler<BCMSUserCustomPool> guards /stats', async () => {
    const res = await request(app).get('/api/plugin/reading-list/shelf/stats').set('Authorization', reader);
    expect(res.status).toBe(200);
    expect(res.body.userId).toBe('reader-1');
    expect(res.body.shelves['to-read']).toEqual(expect.any(Number));
    const guest = `Bearer ${signToken([role('GUEST', 'READ')])}`;
    expect((await request(app).get('/api/plugin/reading-list/shelf/stats').set('Authorization', guest)).status).toBe(403);
  });

  test('create and update (no path) check their bodies against the ObjectSchema: 400 naming the field', async () => {
    const post = (body: object) => request(app).post('/api/plugin/reading-list/book').set('Authorization', writer).send(body);
    const cases: [object, string][] = [
      [{ author: { name: 'x' }, quotes: [], shelf: 's' }, 'body.title is required.'],
      [{ title: 'T', author: {}, quotes: [], shelf: 's' }, 'body.author.name is required.'],
      [{ title: 'T', author: { name: 'x' }, quotes: [{ text: 5 }], shelf: 's' }, 'body.quotes[0].text must be a string, got a number.'],
    ];
    for (const [body, message] of cases) {
      const res = await post(body);
      expect([res.status, res.body]).toEqual([400, { message }]);
    }
    const put = await request(app).put('/api/plugin/reading-list/book').set('Authorization', writer).send({ _id: 3 });
    expect([put.status, put.body]).toEqual([400, { message: 'body._id must be a string, got a number.' }]);
    // The reader's token has no WRITE: refused before the body is looked at.
    expect((await request(app).post('/api/plugin/reading-list/book').set('Authorization', reader).send({})).status).toBe(403);
  });

  test('functions: a public one reads BCMSRepo, one with no body gets {}, errors are BCMS status codes', async () => {
    const template = await BCMSRepo.template.add({ name: `blog-${backend}`, label: 'Blog' } as never);
    await BCMSRepo.entry.add({ templateId: template._id, meta: [{ lng: 'en', props: [{ id: 'title', data: ['Hello'] }] }] } as never);
    const titles = await request(app)
      .post('/api/function/blog-titles')
      .send({ template: `blog-${backend}` });
    expect(titles.body).toEqual({ success: true, result: [{ _id: expect.any(String), title: 'Hello' }] });
    const unknown = await request(app).post('/api/function/blog-titles').send({ template: 'nope' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toEqual({ code: 'HANDLER_ERROR', message: 'Template "nope" does not exist.' });
    expect((await request(app).post('/api/function/ping')).body).toEqual({ success: true, result: { pong: true, echo: null } });
  });

  test('a function without public is private: refused unsigned, answered when signed with a key that lists it', async () => {
    expect((await request(app).post('/api/function/submit-review').send({ title: 'Dune', rating: 5 })).status).toBe(401);
    const { id, secret } = await createApiKey(router.db, { name: 'reviews', functions: ['submit-review'] });
    const body = JSON.stringify({ title: 'Dune', rating: 5 });
    const headers = signRequest({ keyId: id, secret: secret as string, method: 'POST', url: '/api/function/submit-review', body });
    const res = await request(app).post('/api/function/submit-review').set(headers).set('Content-Type', 'application/json').send(body);
    expect(res.body).toEqual({ success: true, result: { accepted: true, title: 'Dune', rating: 5 } });
  });
});

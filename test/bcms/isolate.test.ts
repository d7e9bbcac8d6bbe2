import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy, functionSource, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// The BCMS layer inside an isolate (lib/bcms/isolate.ts): BCMSRepo, plugin repositories, useLogger
// and BCMSRouteProtection work in deployed code as in the service.

const errorCode = (res: request.Response): unknown => res.body?.error?.code;

describe.each(backends())('the BCMS layer in deployed code (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let log: ReturnType<typeof memoryLogger>;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    // Loads and calls have all the time a loaded machine may need: no limit is checked here.
    router = bcmsExtensions({}, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: log.logger, extensionMemoryMb: 96, ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  test('the BCMS API inside: BCMSRepo, createFSDBRepository, useLogger, BCMSRouteProtection (body check, token or key)', async () => {
    const code = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod, BCMSRouteProtection, JWTRoleName, JWTPermissionName, BCMSRepo, createFSDBRepository, useLogger } = require('bcms-extensions');
const logger = useLogger({ name: 'Inside' });
const notes = createFSDBRepository({ name: 'notes', collection: 'inside_notes', schema: { text: { __type: 'string', __required: true }, done: { __type: 'boolean', __required: false } } });
module.exports = createBcmsPlugin({ name: 'inside', controllers: [createController({ name: 'Inside', path: '/inside', methods: () => ({
  content: createControllerMethod({ path: '/content', type: 'post', handler: async ({ repo, request }) => {
    const template = await repo.template.add({ name: request.body.template, label: 'Inside' });
    await BCMSRepo.entry.add({ templateId: template._id, meta: [{ lng: 'en', props: [{ id: 'title', data: ['one'] }] }] });
    const entries = await BCMSRepo.entry.methods.findAllByTemplateId(template._id);
    logger.info('content', 'made a template and an entry');
    return { template: template.name, entries: entries.length, count: await repo.entry.countByTemplateId(template._id) };
  } }),
  notes: createControllerMethod({ path: '/notes', type: 'post', handler: async () => {
    await notes.addMany([{ text: 'a' }, { text: 'b' }, { text: 'c', done: true }]);
    await notes.updateMany((note) => note.done !== true, (note) => ({ ...note, done: true }));
    return { done: (await notes.findAllBy((note) => note.done === true)).length, all: await notes.count() };
  } }),
  checked: createControllerMethod({ path: '/checked', type: 'post', preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.WRITE, bodySchema: { title: { __type: 'string', __required: true } } }), handler: async ({ body, accessToken }) => ({ title: body.title, userId: accessToken.payload.userId }) }),
  keyed: createControllerMethod({ path: '/keyed', type: 'post', preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }), handler: async ({ key, token, request }) => ({ key: key ? key.name : null, token: token ? token.payload.userId : null, body: request.body }) }),
}) })] });`;
    await deploy(app, deployer, 'plugin', 'inside', code);

    const content = await request(app)
      .post('/api/plugin/inside/inside/content')
      .send({ template: `inside-${backend}` });
    expect(content.body).toEqual({ template: `inside-${backend}`, entries: 1, count: 1 });
    // Written through the service's pool: the host's database has it.
    expect(
      Number(
        (
          (await db
            .knex('bcms_templates')
            .where({ name: `inside-${backend}` })
            .count({ n: '*' })) as { n: unknown }[]
        )[0]?.n,
      ),
    ).toBe(1);
    expect(log.lines.some((line) => line.component === 'Inside' && line.place === 'content' && line.extension === 'plugin inside@1.0.0')).toBe(true);

    expect((await request(app).post('/api/plugin/inside/inside/notes')).body).toEqual({ done: 3, all: 3 });

    const admin = `Bearer ${signToken([role('ADMIN', 'READ', 'WRITE')], { payload: { userId: 'admin-1' } })}`;
    expect((await request(app).post('/api/plugin/inside/inside/checked').set('Authorization', admin).send({ title: 'T' })).body).toEqual({ title: 'T', userId: 'admin-1' });
    const bad = await request(app).post('/api/plugin/inside/inside/checked').set('Authorization', admin).send({ title: 5 });
    expect([bad.status, bad.body]).toEqual([400, { message: 'body.title must be a string, got a number.' }]);
    expect((await request(app).post('/api/plugin/inside/inside/checked').send({ title: 'T' })).status).toBe(401);

    expect((await request(app).post('/api/plugin/inside/inside/keyed').set('Authorization', admin).send({ n: 1 })).body).toEqual({ key: null, token: 'admin-1', body: { n: 1 } });
    const caller = await hmacKey(db.knex, [], { name: 'plugin caller', plugins: ['inside'] });
    const keyed = await signed(app, 'POST', '/api/plugin/inside/inside/keyed', caller, { n: 2 });
    expect(keyed.body).toEqual({ key: 'plugin caller', token: null, body: { n: 2 } });
  });

  test('a transaction left open by an isolate that dies is rolled back, and its connection given back', async () => {
    const code = functionSource(
      'half-done',
      `async ({ request }) => {
        const knex = require(${JSON.stringify(path.resolve(__dirname, '..', '..', 'dist', 'bcms', 'repo.js'))}).boundStore('test').database.knex;
        if (request.body.die) {
          await knex.transaction(async (trx) => { await trx('bcms_templates').insert({ id: 'half-${backend}', name: 'half-${backend}', label: 'Half', props: '[]' }); process.exit(2); });
        }
        return (await knex('bcms_templates').where({ name: 'half-${backend}' })).length;
      }`,
    );
    await deploy(app, deployer, 'function', 'half-done', code);
    expect(errorCode(await request(app).post('/api/function/half-done').send({ die: true }))).toBe('EXTENSION_CRASHED');
    expect((await request(app).post('/api/function/half-done').send({})).body.result).toBe(0);
    // The pool still has every connection: the service's own queries run.
    expect(await Promise.all([1, 2, 3, 4, 5, 6].map(() => db.knex.raw('select 1 as one')))).toHaveLength(6);
  });
});

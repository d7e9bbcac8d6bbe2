import fs from 'node:fs';
import { Module } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsEvent, type BCMSEventHandlerData, type BcmsExtensionsRouter } from '../../lib';
import { JWT_SECRET, memoryLogger } from '../support/app';
import { until } from '../support/events';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy, functionSource, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// DESIGN.md "Events and jobs": deployed event handlers and jobs run in isolates (the sandbox), take
// part in delivery and ticks as the registry's do, stop when undeployed and come back with rollback.
// What they do is seen through `useBcmsEventManager().emit` from inside their isolates, which a
// registry handler of the service records.

const DEPLOYED_EVENT = `"use strict";
const { createBcmsEvent, useBcmsEventManager, BCMSEventConfigScope, BCMSEventConfigMethod } = require('bcms-extensions');
exports.default = createBcmsEvent(async () => ({
  config: { scope: BCMSEventConfigScope.ENTRY, method: BCMSEventConfigMethod.ADD },
  handler: async ({ method, payload }) => {
    await useBcmsEventManager().emit('SEEN', method, { entry: payload._id, status: payload.status, pid: process.pid, uid: process.getuid() });
  },
}));`;

const DEPLOYED_JOB = `"use strict";
const { createBcmsJob, useBcmsEventManager } = require('bcms-extensions');
exports.default = createBcmsJob(async () => ({
  cron: { second: '*', minute: '*', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' },
  handler: async () => { await useBcmsEventManager().emit('TICKED', 'RUN', { pid: process.pid }); },
}));`;

describe.each(backends())('deployed events and jobs run in isolates (%s)', (backend) => {
  let database: TestDatabase;
  let filesDir: string;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  const seen: BCMSEventHandlerData[] = [];
  const ticks: BCMSEventHandlerData[] = [];
  const entries: BCMSEventHandlerData[] = [];

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-deployed-'));
    const record = (scope: string, into: BCMSEventHandlerData[]) =>
      createBcmsEvent(async () => ({ name: `record-${scope}`, config: { scope, method: 'ALL' }, handler: async (data) => void into.push(data) }));
    const entryAdds = createBcmsEvent(async () => ({ name: 'record-entry-adds', config: { scope: 'ENTRY', method: 'ADD' }, handler: async (data) => void entries.push(data) }));
    router = bcmsExtensions(
      { events: [record('SEEN', seen), record('TICKED', ticks), entryAdds] },
      // Loads, calls and handlers have all the time a loaded machine may need: no limit is checked here.
      { jwt: { secret: JWT_SECRET }, database: database.knex, logger: memoryLogger().logger, files: { dir: filesDir }, ...ROOMY },
    );
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(database.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await router.close();
    await database.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
  });

  test('a deployed event handler gets each write in its isolate; undeployed, it gets none; rolled back, it gets them again', async () => {
    await deploy(app, deployer, 'event', 'on-entry', DEPLOYED_EVENT);
    const [{ id: templateId }] = await router.db('bcms_templates').insert({ name: 'deployed_events' }).returning('id');
    const first = await router.repo.entry.add({ templateId, status: 'first' });
    await until(() => seen.some((s) => (s.payload as { entry: string }).entry === first._id), 'the deployed handler');
    const report = seen.find((s) => (s.payload as { entry: string }).entry === first._id)!;
    expect(report).toEqual({ scope: 'SEEN', method: 'ADD', payload: expect.objectContaining({ entry: first._id, status: 'first' }) });
    // Not the service's process.
    expect((report.payload as { pid: number }).pid).not.toBe(process.pid);

    // Whether a write is delivered to a handler is decided in the write's own transaction, by the
    // handler's row: once that says it is inactive (the instance takes the change up after the
    // undeploy's answer), a write has no delivery for it, now or later.
    const active = async (): Promise<boolean | undefined> => (await router.db('bcms_event_handlers').where({ name: 'on-entry' }).first())?.active;
    const undeployed = await signed(app, 'DELETE', '/api/extensions/deployments/event/on-entry', deployer);
    expect(undeployed.status).toBe(200);
    await until(async () => (await active()) === false, 'the handler inactive');
    const second = await router.repo.entry.add({ templateId, status: 'while undeployed' });
    expect(await router.db('bcms_event_deliveries').where({ handler: 'on-entry', doc: `ENTRY:${second._id}` })).toEqual([]);
    const handler = await router.db('bcms_event_handlers').where({ name: 'on-entry' }).first();
    expect(handler).toEqual(expect.objectContaining({ source: 'deployed', active: false }));

    const rolledBack = await signed(app, 'POST', '/api/extensions/deployments/event/on-entry/rollback', deployer);
    expect(rolledBack.status).toBe(200);
    await until(async () => (await active()) === true, 'the handler active again');
    const third = await router.repo.entry.add({ templateId, status: 'after rollback' });
    await until(() => seen.some((s) => (s.payload as { entry: string }).entry === third._id), 'the handler rolled back');
    // The write made while it was undeployed never came, before or after.
    expect(seen.some((s) => (s.payload as { entry: string }).entry === second._id)).toBe(false);
    await signed(app, 'DELETE', '/api/extensions/deployments/event/on-entry', deployer);
  });

  test('an entry written by deployed code, through its own database session, fires ENTRY ADD as any write does', async () => {
    const [{ id: templateId }] = await router.db('bcms_templates').insert({ name: 'written_by_extension' }).returning('id');
    await deploy(
      app,
      deployer,
      'function',
      'add-entry',
      functionSource('add-entry', `async ({ repo, request }) => (await repo.entry.add({ templateId: request.body.templateId, status: 'from the isolate' }))._id`),
    );
    const res = await request(app).post('/api/function/add-entry').send({ templateId });
    expect(res.status).toBe(200);
    await until(() => entries.some((e) => (e.payload as { _id: string })._id === res.body.result), "the extension's write");
    expect(entries.find((e) => (e.payload as { _id: string })._id === res.body.result)).toEqual({
      scope: 'ENTRY',
      method: 'ADD',
      payload: expect.objectContaining({ templateId, status: 'from the isolate' }),
    });
  });

  test('a deployed job ticks in its isolate; undeployed, it stops', async () => {
    await deploy(app, deployer, 'job', 'every-second', DEPLOYED_JOB);
    await until(() => ticks.length >= 2, 'two ticks of the deployed job');
    expect(ticks.every((tick) => (tick.payload as { pid: number }).pid !== process.pid)).toBe(true);
    // A run is recorded succeeded once its handler has returned, after what it emitted may have been delivered.
    const succeeded = async (): Promise<number> => (await router.db('bcms_job_runs').where({ job: 'every-second', status: 'succeeded' })).length;
    await until(async () => (await succeeded()) >= 2, 'two runs recorded');

    expect((await signed(app, 'DELETE', '/api/extensions/deployments/job/every-second', deployer)).status).toBe(200);
    // Once the job is inactive, its last run over and what that run emitted delivered, however long a
    // busy machine takes: then 2.5 s (two ticks and more) without a tick.
    await until(async () => (await router.db('bcms_jobs').where({ name: 'every-second' }).first())?.active === false, 'the job inactive');
    await until(async () => (await router.db('bcms_job_runs').where({ job: 'every-second', status: 'running' })).length === 0, 'its last run over');
    await until(async () => (await router.db('bcms_event_deliveries').where({ handler: 'record-TICKED' }).whereIn('status', ['pending', 'retrying', 'running'])).length === 0, 'its ticks delivered');
    const after = ticks.length;
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(ticks.length).toBe(after);
    expect(await router.db('bcms_jobs').where({ name: 'every-second' }).first()).toEqual(expect.objectContaining({ source: 'deployed', active: false }));
  });
});

describe("isolate: 'all': the registry's event handlers run in isolates, through the router", () => {
  test('a template written is delivered to the registry handler in its isolate', async () => {
    const database = await openTestDatabase('pglite');
    const filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-all-'));
    // Loaded by Node's own loader, as a host require()s its registry (Jest's require keeps its modules apart).
    const registry = (Module as unknown as { _load(request: string): unknown })._load(path.join(__dirname, '..', 'fixtures', 'isolated-registry', 'events.js')) as { audit: () => Promise<never> };
    const router = bcmsExtensions({ events: [registry.audit] }, { isolate: 'all', database: database.knex, logger: memoryLogger().logger, files: { dir: filesDir }, ...ROOMY });
    try {
      await router.ready;
      await router.repo.template.add({ name: 'audited' });
      const written = path.join(filesDir, '.registry', 'registry-audit.json');
      // Whole: the handler's write may be seen between the file's making and its text.
      const read = (): { payload: { name: string }; pid: number } | undefined => {
        try {
          return JSON.parse(fs.readFileSync(written, 'utf8'));
        } catch {
          return undefined;
        }
      };
      await until(() => read() !== undefined, 'the isolated handler');
      const seen = read()!;
      expect(seen.payload.name).toBe('audited');
      expect(seen.pid).not.toBe(process.pid);
    } finally {
      await router.close();
      await database.close();
      fs.rmSync(filesDir, { recursive: true, force: true });
    }
  });
});

import { Module } from 'node:module';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, type BcmsFunctionModule, type BcmsPlugin } from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { bundle, deploy, functionSource, signed } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// `isolate: 'all'` runs the registry's own plugins and functions in isolates too, loaded from the
// module files that export them; `isolate: 'none'` runs deployed code in the service's process.
// No limit is checked here: loads and calls have all the time a loaded machine may need (ROOMY).

// Loaded by Node's own loader (Jest's require keeps its modules apart): the registry's module files
// must be in Node's module cache, as they are in a host that require()s them.
const nodeRequire = (file: string): unknown => (Module as unknown as { _load(request: string): unknown })._load(path.join(__dirname, '..', 'fixtures', 'isolated-registry', file));
const registryPlugin = nodeRequire('plugin.js') as BcmsPlugin;
const registryFunction = (nodeRequire('function.js') as { default: BcmsFunctionModule }).default;

describe.each(backends())('where extension code runs (%s)', (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await db.close();
  });

  test("isolate: 'all': the registry's plugin (its setup included) and function run in isolates, with the same API", async () => {
    delete (globalThis as { registrySetupRan?: number }).registrySetupRan;
    const router = bcmsExtensions({ plugins: [registryPlugin], functions: [registryFunction] }, { database: db.knex, isolate: 'all', logger: memoryLogger().logger, ...ROOMY });
    try {
      const app = express().use(router);
      await router.ready;
      const plugin = await request(app).get('/api/plugin/registry-isolated/where');
      expect(plugin.status).toBe(200);
      expect(plugin.body).toEqual({ pid: expect.any(Number), setupPid: plugin.body.pid, templates: expect.any(Number) });
      expect(plugin.body.pid).not.toBe(process.pid);
      // The setup ran in the isolate, never in the service.
      expect((globalThis as { registrySetupRan?: number }).registrySetupRan).toBeUndefined();
      const fn = await request(app).post('/api/function/registry-where').send({ n: 1 });
      expect(fn.body).toEqual({ success: true, result: { pid: expect.any(Number), body: { n: 1 } } });
      expect(fn.body.result.pid).not.toBe(process.pid);
      // The app's own names stay its own: a deployment may not take them.
      const deployer = await hmacKey(db.knex, [], { deploy: true });
      expect((await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'registry-where', functionSource('registry-where', 'async () => 1')))).status).toBe(409);
    } finally {
      await router.close();
    }
  });

  test("isolate: 'all' refuses, at once, a registry entry that no module file exports", () => {
    const inline = createBcmsFunction(async () => ({ config: { name: 'inline', public: true }, handler: async () => 1 }));
    expect(() => bcmsExtensions({ functions: [inline] }, { database: db.knex, isolate: 'all', logger: memoryLogger().logger })).toThrow(
      /^registry\.functions\[0\]: with isolate: 'all' each plugin and function module is loaded again in isolates from the CommonJS file that exports it/,
    );
  });

  test("isolate: 'none': deployed code runs in the service's process", async () => {
    const router = bcmsExtensions({}, { database: db.knex, isolate: 'none', logger: memoryLogger().logger, ...ROOMY });
    try {
      const app = express().use(router);
      await router.ready;
      const deployer = await hmacKey(db.knex, [], { deploy: true });
      await deploy(app, deployer, 'function', 'in-process', functionSource('in-process', 'async () => process.pid'));
      expect((await request(app).post('/api/function/in-process')).body.result).toBe(process.pid);
    } finally {
      await router.close();
    }
  });

  test('the options are checked where the router is built', () => {
    const build = (options: object) => () => bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, ...options });
    expect(build({ isolate: 'some' })).toThrow(`option isolate must be 'deployed', 'all' or 'none', got "some"`);
    expect(build({ pluginTimeoutMs: 0 })).toThrow('option pluginTimeoutMs must be a positive integer of milliseconds, got 0');
    expect(build({ extensionMemoryMb: 1.5 })).toThrow('option extensionMemoryMb must be a positive integer of megabytes, got 1.5');
    expect(build({ extensionAnswerMb: 0 })).toThrow('option extensionAnswerMb must be a positive integer of megabytes, got 0');
    expect(build({ extensionAnswerMb: 512 })).toThrow('option extensionAnswerMb must be at most 256 (megabytes), got 512');
    expect(build({ extensionEnv: { PATH: 1 } })).toThrow('option extensionEnv must be an object of strings');
    expect(build({ deployments: 'maybe' })).toThrow(`option deployments must be 'on' or 'off', got "maybe"`);
  });
});

import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import { Module } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter, type BCMSEvent, type BCMSJob } from '../../lib';
import { ContentStore } from '../../lib/db/store';
import { DeployedExtensions, loadInProcess } from '../../lib/deploy/deployed';
import { LiveExtensions } from '../../lib/deploy/live';
import { activeDeployments, recordDeployment, undeployDeployment } from '../../lib/deploy/store';
import { Isolation, registryModuleSources } from '../../lib/isolate/runtime';
import { sandboxFor } from '../../lib/isolate/sandbox';
import { resolveOptions } from '../../lib/options';
import type { IdentifyPluginKey } from '../../lib/security/caller';
import { createAccessTokenVerifier } from '../../lib/security/jwt';
import { sha256Hex } from '../../lib/security/digest';
import { JWT_SECRET, memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { bundle, isRunning, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY, until } from '../support/wait';

// The deploy path of events and jobs (DESIGN.md "Events and jobs"): a functions project's
// src/events/<name>.ts and src/jobs/<name>.ts deploy as kinds `event` and `job`, named after their
// files, stored, listed, undeployed and rolled back as functions are; once live, the events engine
// reads them from LiveExtensions (deployedEvents, deployedJobs, onDeployedChange), as stand-ins
// whose handlers run in isolates.

/** An event bundle as `bcms-ext bundle` writes one: CommonJS, bcms-extensions left external. */
const eventSource = (config: string, handler: string): string => `"use strict";
const { createBcmsEvent, BCMSEventConfigScope, BCMSEventConfigMethod } = require('bcms-extensions');
const fs = require('node:fs');
exports.default = createBcmsEvent(async () => ({ config: ${config}, handler: ${handler} }));`;

const jobSource = (cron: string, handler: string): string => `"use strict";
const { createBcmsJob } = require('bcms-extensions');
const fs = require('node:fs');
exports.default = createBcmsJob(async () => ({ cron: ${cron}, handler: ${handler} }));`;

const EVERY_MINUTE = "{ minute: '*', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' }";
const ENTRY_ALL = '{ scope: BCMSEventConfigScope.ENTRY, method: BCMSEventConfigMethod.ALL }';

/** An event handler that writes what it was given (and where it ran) to seen.json, in its own folder of files.dir. */
const RECORDING_EVENT = eventSource(
  ENTRY_ALL,
  `async ({ scope, method, payload }) => {
    if (payload && payload.fail) throw new Error('no luck with ' + payload.n);
    fs.writeFileSync('seen.json', JSON.stringify({ scope, method, payload, at: payload && payload.at instanceof Date ? payload.at.toISOString() : null, pid: process.pid }));
  }`,
);

/** A job that writes its pid to runs.txt, or hangs while a file `hang` is in its folder. */
const RECORDING_JOB = jobSource(
  "{ minute: '*/5', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: 'MON-FRI' }",
  `async () => {
    if (fs.existsSync('hang')) await new Promise(() => {});
    fs.appendFileSync('runs.txt', process.pid + '\\n');
  }`,
);

describe.each(backends())('events and jobs deployed (%s)', (backend) => {
  let db: TestDatabase;
  let filesDir: string;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-deploy-'));
  });
  afterAll(async () => {
    await db.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
  });

  describe('over HTTP: deployed, listed, refused, undeployed and rolled back as functions are', () => {
    let router: BcmsExtensionsRouter;
    let app: express.Express;
    let deployer: DeployKey;
    beforeAll(async () => {
      router = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, sandbox: 'none', files: { dir: filesDir }, ...ROOMY });
      app = express().use(router);
      await router.ready;
      deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
    });
    afterAll(() => router.close());

    const post = (body: unknown) => signed(app, 'POST', '/api/extensions/deployments', deployer, body);

    test('an event and a job go live under their file names, and the list shows them running', async () => {
      const event = await post(bundle('event', 'on-entry', RECORDING_EVENT, { project: 'site' }));
      expect(event.status).toBe(201);
      expect(event.body.deployment).toMatchObject({ kind: 'event', name: 'on-entry', version: '1.0.0', project: 'site', active: true, deployedBy: `deployer (${deployer.keyId})` });
      const job = await post(bundle('job', 'tick', RECORDING_JOB, { project: 'site' }));
      expect(job.status).toBe(201);
      expect(job.body.deployment).toMatchObject({ kind: 'job', name: 'tick', active: true });
      // The same code again: nothing stored, as for a function.
      expect((await post(bundle('job', 'tick', RECORDING_JOB, { project: 'site' }))).body).toEqual({ unchanged: true });
      const list = await signed(app, 'GET', '/api/extensions/deployments', deployer);
      expect(list.status).toBe(200);
      const live = (list.body.deployments as { kind: string; name: string; active: boolean; state?: string }[]).filter((d) => d.active);
      expect(live).toEqual(
        expect.arrayContaining([expect.objectContaining({ kind: 'event', name: 'on-entry', state: 'running' }), expect.objectContaining({ kind: 'job', name: 'tick', state: 'running' })]),
      );
    });

    test('an event, a job and a function of one project may share a name: each kind is its own', async () => {
      const fn = `"use strict";\nconst { createBcmsFunction } = require('bcms-extensions');\nexports.default = createBcmsFunction(async () => ({ config: { name: 'shared', public: true }, handler: async () => 'fn' }));`;
      expect((await post(bundle('function', 'shared', fn))).status).toBe(201);
      expect((await post(bundle('event', 'shared', RECORDING_EVENT))).status).toBe(201);
      expect((await post(bundle('job', 'shared', RECORDING_JOB))).status).toBe(201);
      expect((await request(app).post('/api/function/shared')).body).toEqual({ success: true, result: 'fn' });
      expect((await signed(app, 'DELETE', '/api/extensions/deployments/event/shared', deployer)).status).toBe(200);
      // The function and the job of that name are still live.
      expect((await request(app).post('/api/function/shared')).body.result).toBe('fn');
      const active = ((await signed(app, 'GET', '/api/extensions/deployments', deployer)).body.deployments as { kind: string; name: string; active: boolean }[]).filter(
        (d) => d.name === 'shared' && d.active,
      );
      expect(active.map((d) => d.kind).sort()).toEqual(['function', 'job']);
    });

    test.each([
      [
        'an event whose scope is not a string',
        'event',
        eventSource('{ scope: 5, method: BCMSEventConfigMethod.ALL }', 'async () => {}'),
        /the event's config\.scope must be a string \(a BCMSEventConfigScope or one of your own\), got 5/,
      ],
      ['an event with no config', 'event', eventSource('undefined', 'async () => {}'), /the event has no config: it must be \{ scope, method \}/],
      ['an event whose handler is not a function', 'event', eventSource(ENTRY_ALL, "'soon'"), /the event's handler must be a function, got "soon"/],
      [
        'a bundle that exports no factory as an event',
        'event',
        '"use strict";\nexports.default = { config: {}, handler() {} };',
        /the bundle does not export an event: its default export must be createBcmsEvent\(async \(\) => \(\{ config: \{ scope, method \}, handler \}\)\)/,
      ],
      [
        'a job whose minute is out of range',
        'job',
        jobSource("{ minute: '61', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' }", 'async () => {}'),
        /the job's cron "61 \* \* \* \*" is not a crontab schedule: .*61/,
      ],
      [
        'a job whose field holds two',
        'job',
        jobSource("{ minute: '0 0', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' }", 'async () => {}'),
        /the job's cron\.minute must be one crontab field of at most 100 characters \("\*", "5", "\*\/15", "1-5", "MON"\), got "0 0"/,
      ],
      [
        'a job with a field missing',
        'job',
        jobSource("{ minute: '*', hour: '*', dayOfMonth: '*', month: '*' }", 'async () => {}'),
        /the job's cron\.dayOfWeek must be one crontab field .*, got nothing/,
      ],
      ['a job with no handler', 'job', jobSource(EVERY_MINUTE, 'undefined'), /the job's handler must be a function, got nothing/],
      [
        'a job whose factory throws',
        'job',
        "\"use strict\";\nconst { createBcmsJob } = require('bcms-extensions');\nexports.default = createBcmsJob(async () => { throw new Error('no schedule today'); });",
        /no schedule today/,
      ],
    ] as const)('%s is refused, 422 BUNDLE_LOAD_FAILED, saying what is wrong; nothing is stored', async (_what, kind, code, message) => {
      const res = await post(bundle(kind, 'refused', code));
      expect(res.status).toBe(422);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(Object.keys(res.body)).toEqual(['message']);
      expect(res.body.message).toMatch(/^The bundle did not load: /);
      expect(res.body.message).toMatch(message);
      const stored = (await signed(app, 'GET', '/api/extensions/deployments', deployer)).body.deployments as { name: string }[];
      expect(stored.filter((d) => d.name === 'refused')).toEqual([]);
    });

    test('a manifest of another kind is refused, 422 BUNDLE_INVALID, naming the four', async () => {
      const res = await post(bundle('widget' as never, 'x', RECORDING_JOB));
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ message: 'manifest.kind must be "plugin", "function", "event" or "job".' });
    });

    test('undeploy takes a job out of service (DELETE .../job/NAME); again, 404; rollback brings its last version back', async () => {
      expect((await post(bundle('job', 'nightly', RECORDING_JOB))).status).toBe(201);
      const gone = await signed(app, 'DELETE', '/api/extensions/deployments/job/nightly', deployer);
      expect(gone.status).toBe(200);
      expect(gone.body.undeployed).toMatchObject({ kind: 'job', name: 'nightly', active: false });
      const again = await signed(app, 'DELETE', '/api/extensions/deployments/job/nightly', deployer);
      expect(again.status).toBe(404);
      expect(again.body).toEqual({ message: 'No job named "nightly" is deployed.' });
      const back = await signed(app, 'POST', '/api/extensions/deployments/job/nightly/rollback', deployer);
      expect(back.status).toBe(200);
      expect(back.body.deployment).toMatchObject({ kind: 'job', name: 'nightly', active: true });
    });

    test('rollback of an event makes the version before the active one live again', async () => {
      expect((await post(bundle('event', 'versioned', RECORDING_EVENT, { version: '1.0.0' }))).status).toBe(201);
      const second = eventSource("{ scope: 'TEMPLATE', method: 'ADD' }", 'async () => {}');
      expect((await post(bundle('event', 'versioned', second, { version: '2.0.0' }))).status).toBe(201);
      const back = await signed(app, 'POST', '/api/extensions/deployments/event/versioned/rollback', deployer);
      expect(back.status).toBe(200);
      expect(back.body.deployment).toMatchObject({ kind: 'event', name: 'versioned', version: '1.0.0', active: true });
      const none = await signed(app, 'POST', '/api/extensions/deployments/event/never-deployed/rollback', deployer);
      expect(none.status).toBe(404);
      expect(none.body).toEqual({ message: 'No earlier version of event "never-deployed" to go back to.' });
    });
  });

  describe('what the events engine reads: LiveExtensions.deployedEvents(), deployedJobs(), onDeployedChange()', () => {
    // A database of its own: only what these tests deploy is active there.
    let own: TestDatabase;
    beforeAll(async () => {
      own = await openTestDatabase(backend);
    });
    afterAll(() => own.close());
    /**
     * The deploy path as the router wires it, without the router: the active deployments read
     * from the database, each started in isolates (or in this process), swapped into a
     * LiveExtensions whose tables the engine reads.
     */
    async function deployPath(isolate: 'deployed' | 'none', timeouts: { functionTimeoutMs?: number; jobTimeoutMs?: number } = {}) {
      const { logger } = memoryLogger();
      // Loads and runs get all the time a loaded machine may need, but for the one limit a test shortens.
      const settings = resolveOptions({ database: own.knex, logger, sandbox: 'none', files: { dir: filesDir }, jwt: { secret: JWT_SECRET }, isolate, ...ROOMY, jobTimeoutMs: 600_000, ...timeouts });
      const store = new ContentStore({ knex: own.knex, description: 'test', close: async () => {} }, logger);
      await store.start();
      const isolation = new Isolation(settings, {
        store,
        verifyAccessToken: createAccessTokenVerifier(settings.jwt),
        verifyPluginKey: (async () => undefined) as unknown as IdentifyPluginKey,
        events: new EventEmitter(),
        sandbox: sandboxFor(settings).choice,
      });
      const live = new LiveExtensions([]);
      const deployed = new DeployedExtensions({
        read: () => activeDeployments(own.knex),
        start: isolate === 'none' ? (deployment) => loadInProcess(deployment, settings.loadTimeoutMs) : (deployment) => isolation.deployment(deployment),
        recordFailure: async () => {},
        logger,
        swap: (set) => live.apply(set),
        enabled: true,
      });
      const record = async (kind: 'event' | 'job', name: string, code: string): Promise<void> => {
        await recordDeployment(own.knex, { kind, name, project: null, version: '1.0.0', sha256: sha256Hex(code), code, ui: null, signature: null, deployedBy: 'test' });
        await deployed.reload();
      };
      return {
        live,
        record,
        undeploy: async (kind: 'event' | 'job', name: string) => {
          await undeployDeployment(own.knex, kind, name);
          await deployed.reload();
        },
        isolation,
        close: async () => {
          await deployed.close();
          await isolation.close();
        },
      };
    }

    const folder = (kind: 'event' | 'job', name: string): string => path.join(filesDir, `.${kind}s`, name);
    test('a deployed event is a stand-in named after its file; its handler runs in an isolate with the payload as sent (a Date stays a Date)', async () => {
      const path_ = await deployPath('deployed');
      const changes: number[] = [];
      path_.live.onDeployedChange(() => changes.push(path_.live.deployedEvents().size));
      try {
        await path_.record('event', 'stand-in', RECORDING_EVENT);
        expect(changes.length).toBeGreaterThan(0);
        const event = path_.live.deployedEvents().get('stand-in') as BCMSEvent;
        expect(event).toMatchObject({ name: 'stand-in', config: { scope: 'ENTRY', method: 'ALL' } });
        await event.handler({ scope: 'ENTRY', method: 'UPDATE', payload: { n: 1, at: new Date(0), nested: { list: [1, 'two', null] } } });
        const seen = JSON.parse(fs.readFileSync(path.join(folder('event', 'stand-in'), 'seen.json'), 'utf8')) as { pid: number };
        expect(seen).toEqual({
          scope: 'ENTRY',
          method: 'UPDATE',
          payload: { n: 1, at: '1970-01-01T00:00:00.000Z', nested: { list: [1, 'two', null] } },
          at: '1970-01-01T00:00:00.000Z',
          pid: expect.any(Number),
        });
        expect(seen.pid).not.toBe(process.pid);

        // What the handler throws rejects the stand-in's promise: an Error with its message, the isolate's stack, none of the service's.
        const failure = (await Promise.resolve(event.handler({ scope: 'ENTRY', method: 'ADD', payload: { fail: true, n: 3 } })).then(
          () => undefined,
          (error: unknown) => error,
        )) as Error;
        expect(failure).toBeInstanceOf(Error);
        expect(failure.message).toMatch(/^no luck with 3 \(in extension event stand-in@1\.0\.0\)$/);
        expect(failure.stack).not.toMatch(/lib[\\/]isolate[\\/](host|pool|extension)\./);

        // Undeployed: gone from the table the engine reads, and the listener told.
        const before = changes.length;
        await path_.undeploy('event', 'stand-in');
        expect(path_.live.deployedEvents().has('stand-in')).toBe(false);
        expect(changes.length).toBeGreaterThan(before);
        expect(changes[changes.length - 1]).toBe(0);
      } finally {
        await path_.close();
      }
    });

    test('a deployed job runs each tick in an isolate; one past jobTimeoutMs is ended, its isolate replaced, and the promise rejects saying so', async () => {
      // Runs held to 1.5 s: the run past it never ends (it waits on nothing); the others write a line.
      const path_ = await deployPath('deployed', { jobTimeoutMs: 1_500 });
      try {
        await path_.record('job', 'ticker', RECORDING_JOB);
        const job = path_.live.deployedJobs().get('ticker') as BCMSJob;
        // The cron as the file has it, checked (and trimmed) when it loaded.
        expect(job).toMatchObject({ name: 'ticker', cron: { minute: '*/5', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: 'MON-FRI' } });
        await job.handler();
        const runs = (): number[] =>
          fs
            .readFileSync(path.join(folder('job', 'ticker'), 'runs.txt'), 'utf8')
            .trim()
            .split('\n')
            .map(Number);
        const [first] = runs();
        expect(first).not.toBe(process.pid);

        fs.writeFileSync(path.join(folder('job', 'ticker'), 'hang'), '');
        const started = Date.now();
        const timedOut = (await Promise.resolve(job.handler()).then(
          () => undefined,
          (error: unknown) => error,
        )) as Error;
        expect(timedOut).toBeInstanceOf(Error);
        expect(timedOut.message).toBe('The job ticker@1.0.0 ran past its time-out of 1500 ms (jobTimeoutMs); its isolate was ended and is replaced.');
        expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
        await until(() => !isRunning(first as number));

        fs.rmSync(path.join(folder('job', 'ticker'), 'hang'));
        await job.handler();
        const after = runs();
        expect(after).toHaveLength(2);
        expect(after[1]).not.toBe(first);
      } finally {
        await path_.close();
      }
    });

    test('an event handler that runs past functionTimeoutMs is ended the same way, its promise rejecting with why', async () => {
      const path_ = await deployPath('deployed', { functionTimeoutMs: 1_000 });
      try {
        await path_.record('event', 'slow', eventSource(ENTRY_ALL, 'async () => { for (;;) {} }'));
        const event = path_.live.deployedEvents().get('slow') as BCMSEvent;
        const error = (await Promise.resolve(event.handler({ scope: 'ENTRY', method: 'ADD', payload: null })).then(
          () => undefined,
          (e: unknown) => e,
        )) as Error;
        expect(error.message).toBe('The event slow@1.0.0 ran past its time-out of 1000 ms (functionTimeoutMs); its isolate was ended and is replaced.');
      } finally {
        await path_.close();
      }
    });

    test("isolate: 'all': the registry's events and jobs load in isolates from the module files that export their factories", async () => {
      // Loaded by Node's own loader, as a host require()s its registry (Jest's require keeps its modules apart).
      const registry = (Module as unknown as { _load(request: string): unknown })._load(path.join(__dirname, '..', 'fixtures', 'isolated-registry', 'events.js')) as {
        audit: () => Promise<BCMSEvent>;
        tick: () => Promise<BCMSJob>;
      };
      const sources = registryModuleSources([], [], [registry.audit], [registry.tick]);
      expect(sources.events).toEqual([{ type: 'module', file: expect.stringMatching(/events\.js$/), key: 'audit' }]);
      expect(() => registryModuleSources([], [], [async () => ({ config: { scope: 'ALL', method: 'ALL' }, handler: async () => {} })])).toThrow(
        /^registry\.events\[0\]: with isolate: 'all' each event and job \(its createBcmsEvent or createBcmsJob\) is loaded again in isolates from the CommonJS file that exports it/,
      );
      const path_ = await deployPath('deployed');
      try {
        const [event] = await path_.isolation.loadRegistryEvents(sources.events);
        // Its own name, beside BCMS's fields; a job without one is left for the events engine to name.
        expect(event).toMatchObject({ name: 'registry-audit', config: { scope: 'TEMPLATE', method: 'ADD' } });
        await event?.handler({ scope: 'TEMPLATE', method: 'ADD', payload: { n: 1 } });
        const seen = JSON.parse(fs.readFileSync(path.join(filesDir, '.registry', 'registry-audit.json'), 'utf8')) as { payload: unknown; pid: number };
        expect(seen).toEqual({ payload: { n: 1 }, pid: expect.any(Number) });
        expect(seen.pid).not.toBe(process.pid);
        await expect(event?.handler({ scope: 'TEMPLATE', method: 'ADD', payload: { fail: true, n: 2 } })).rejects.toThrow(/^registry handler refused 2 \(in extension registry event /);
        const [job] = await path_.isolation.loadRegistryJobs(sources.jobs);
        expect(job?.name).toBeUndefined();
        expect(job?.cron).toEqual({ minute: '0', hour: '*/6', dayOfMonth: '*', month: '*', dayOfWeek: '*' });
        await job?.handler();
        expect(Number(fs.readFileSync(path.join(filesDir, '.registry', 'registry-tick.txt'), 'utf8'))).not.toBe(process.pid);
      } finally {
        await path_.close();
      }
    });

    test("isolate: 'none': deployed events and jobs load in the service's process, their own handlers", async () => {
      const path_ = await deployPath('none');
      try {
        await path_.record('event', 'here', eventSource("{ scope: 'custom', method: 'PING' }", 'async ({ payload }) => ({ pid: process.pid, payload })'));
        await path_.record('job', 'here-job', jobSource(EVERY_MINUTE, 'async () => process.pid'));
        const event = path_.live.deployedEvents().get('here') as BCMSEvent;
        expect(event).toMatchObject({ name: 'here', config: { scope: 'custom', method: 'PING' } });
        expect(await event.handler({ scope: 'custom', method: 'PING', payload: 7 })).toEqual({ pid: process.pid, payload: 7 });
        const job = path_.live.deployedJobs().get('here-job') as BCMSJob;
        expect(job.name).toBe('here-job');
        expect(await job.handler()).toBe(process.pid);
      } finally {
        await path_.close();
      }
    });
  });
});

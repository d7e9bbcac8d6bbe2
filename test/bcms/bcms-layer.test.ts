import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import {
  bcmsExtensions,
  BCMSConfig,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  MongoDBEntitySchemaString,
  ObjectUtilityError,
  StringUtility,
  useFS,
  useObjectUtility,
  useSocket,
  type BcmsExtensionsRouter,
  type SocketEvent,
} from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy } from '../support/deploy';
import { hmacKey } from '../support/signature';

// purple-cheetah's utilities as BCMS plugins use them, with @banez's outputs.
describe('StringUtility, useObjectUtility, MongoDBEntitySchemaString', () => {
  test('StringUtility slugs as @banez/string-utility does, and finds text between markers', () => {
    expect(StringUtility.toSlug('Hello World_again!')).toBe('hello-world-again');
    expect(StringUtility.toSlug('a  b')).toBe('a--b');
    expect(StringUtility.toSlugUnderscore('Hello World-again!')).toBe('hello_world_again');
    expect(StringUtility.numberCode(6)).toMatch(/^\d{6}$/);
    expect(StringUtility.textBetween('<a>x</a>', '<a>', '</a>')).toBe('x');
    expect(StringUtility.textBetween('no marker', '<a>', '</a>')).toBe('');
    expect(StringUtility.allTextBetween('[1] and [2] and [3', '[', ']')).toEqual(['1', '2']);
  });

  test('compareWithSchema: undefined for a fit, an ObjectUtilityError naming the field otherwise', () => {
    const schema = { name: { __type: 'string', __required: true }, count: { __type: 'number', __required: false } } as const;
    const util = useObjectUtility();
    expect(util.compareWithSchema({ name: 'x', count: 2 }, schema, 'body')).toBeUndefined();
    const problem = util.compareWithSchema({ count: 'two' }, schema, 'body');
    expect(problem).toBeInstanceOf(ObjectUtilityError);
    expect((problem as ObjectUtilityError).message).toBe('body.name is required.');
    expect(util.compareWithSchema({ name: 'x', count: 'two' }, schema, 'body')).toMatchObject({ message: 'body.count must be a number, got a string.' });
  });

  test('MongoDBEntitySchemaString: the entity fields as a mongoose definition, with string ids', () => {
    expect(MongoDBEntitySchemaString).toEqual({ _id: { type: String, required: true }, createdAt: { type: Number, required: true }, updatedAt: { type: Number, required: true } });
    expect(BCMSConfig.local).toBe(true);
  });
});

describe.each(backends())('files and socket events (%s)', (backend) => {
  let db: TestDatabase;
  let filesDir: string;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  const events: SocketEvent[] = [];

  const inProcess = createBcmsPlugin({
    name: 'host-files',
    controllers: [
      createController({
        name: 'Files',
        path: '/files',
        methods: () => ({
          write: createControllerMethod({
            path: '/write',
            type: 'post',
            handler: async () => {
              const fsHelper = useFS({ base: 'host-files' });
              await fsHelper.save(['notes', 'a.txt'], 'written');
              useSocket().emitToScope({ scope: 'global', eventName: 'NOTE', eventData: { n: 1 } });
              return { text: await fsHelper.readString('notes/a.txt') };
            },
          }),
          escape: createControllerMethod({
            path: '/escape',
            type: 'get',
            handler: async () => {
              await useFS().save('../outside.txt', 'no');
              return {};
            },
          }),
        }),
      }),
    ],
  });

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-files-'));
    router = bcmsExtensions({ plugins: [inProcess] }, { database: db.knex, logger: memoryLogger().logger, files: { dir: filesDir } });
    router.events.on('socket', (event: SocketEvent) => events.push(event));
    app = express().use(router);
    await router.ready;
  });
  afterAll(async () => {
    await router.close();
    await db.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
  });

  test('in the service: useFS lands in files.dir, refuses a path out of it, and useSocket reaches router.events', async () => {
    const res = await request(app).post('/api/plugin/host-files/files/write');
    expect(res.body).toEqual({ text: 'written' });
    expect(fs.readFileSync(path.join(filesDir, 'host-files', 'notes', 'a.txt'), 'utf8')).toBe('written');
    expect(events).toContainEqual({ scope: 'global', eventName: 'NOTE', eventData: { n: 1 } });
    const escaped = await request(app).get('/api/plugin/host-files/files/escape');
    expect(escaped.status).toBe(500);
    expect(fs.existsSync(path.join(path.dirname(filesDir), 'outside.txt'))).toBe(false);
  });

  test("deployed: the plugin's cwd is its folder of files.dir; BCMS's local paths, useFS and child processes land there; its events reach router.events", async () => {
    const deployer = await hmacKey(db.knex, [], { deploy: true, name: 'files-deployer' });
    const code = `"use strict";
const path = require('path');
const { execFileSync } = require('child_process');
const { createBcmsPlugin, createController, createControllerMethod, useFS, useSocket, BCMSConfig } = require('bcms-extensions');
module.exports = createBcmsPlugin({
  name: 'jobs',
  controllers: [createController({ name: 'Jobs', path: '/jobs', methods: () => ({
    run: createControllerMethod({ path: '/run', type: 'post', handler: async () => {
      const fsHelper = useFS({ base: BCMSConfig.local ? path.join(process.cwd(), 'storage', 'jobs') : '/bcms-share/jobs' });
      await fsHelper.save(['logs', 'out.txt'], 'log line');
      execFileSync('sh', ['-c', 'mkdir -p workspace && echo cloned > workspace/repo.txt']);
      useSocket().emit({ eventName: 'JOB', eventData: { j: 'one' } });
      let refused = '';
      try { await useFS().save('/etc/bcms-test-escape', 'x'); } catch (error) { refused = error.name; }
      return { cwd: process.cwd(), refused };
    } }),
  }) })],
});`;
    await deploy(app, deployer, 'plugin', 'jobs', code);
    const res = await request(app).post('/api/plugin/jobs/jobs/run');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ cwd: fs.realpathSync(path.join(filesDir, 'jobs')), refused: 'FilesRootError' });
    expect(fs.readFileSync(path.join(filesDir, 'jobs', 'storage', 'jobs', 'logs', 'out.txt'), 'utf8')).toBe('log line');
    expect(fs.readFileSync(path.join(filesDir, 'jobs', 'workspace', 'repo.txt'), 'utf8')).toBe('cloned\n');
    expect(fs.existsSync('/etc/bcms-test-escape')).toBe(false);
    // The event crossed from the isolate before the answer did.
    expect(events).toContainEqual({ scope: 'global', eventName: 'JOB', eventData: { j: 'one' } });
  });
});

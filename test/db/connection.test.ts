import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction } from '../../lib';
import { openDatabase } from '../../lib/db/connection';
import { memoryLogger } from '../support/app';
import { runCli } from '../support/cli';
import { serverSchema } from '../support/database';
import { TcpProxy } from '../support/proxy';

const count = createBcmsFunction(async () => ({
  config: { name: 'count', public: true },
  handler: async ({ repo }) => (await repo.template.findAll()).map((t) => t.name),
}));
const add = createBcmsFunction(async () => ({
  config: { name: 'add', public: true },
  handler: async ({ repo, request }) => (await repo.template.add({ name: request.body.name })).name,
}));

describe('the database option', () => {
  test('with nothing configured: DATABASE_URL when set, else PGlite in .bcms/data under the working directory', () => {
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cwd-'));
    const previous = process.cwd();
    process.chdir(cwd);
    try {
      const embedded = openDatabase(undefined, {});
      expect(embedded.description).toBe(`pglite:${path.join(fs.realpathSync(cwd), '.bcms', 'data')}`);
      expect(fs.existsSync(path.join(cwd, '.bcms', 'data'))).toBe(true);
      void embedded.close();
      const server = openDatabase(undefined, { DATABASE_URL: 'postgres://someone:secret@db.example:5433/cms' });
      expect(server.description).toBe('postgres://db.example:5433/cms'); // never the password
      void server.close();
    } finally {
      process.chdir(previous);
    }
  });

  test('a value that is none of the three is refused when the router is built', () => {
    expect(() => bcmsExtensions({}, { database: 42 as never })).toThrow('option database must be a Knex instance, a Postgres URL, or { pglite: DIR }');
    expect(() => bcmsExtensions({}, { database: 'mysql://x@y/z' })).toThrow('option database: a string must be a Postgres URL');
    expect(() => bcmsExtensions({}, { database: { pglite: '' } })).toThrow('option database must be');
  });

  test('a DATABASE_URL that is not a Postgres URL is refused naming DATABASE_URL (no option was given), never its password', async () => {
    const said = 'DATABASE_URL must be a Postgres URL (postgres://user@host:5432/db), and it is a mysql: URL: point it at a Postgres server, or unset it for the embedded database.';
    expect(() => openDatabase(undefined, { DATABASE_URL: 'mysql://someone:secret@db.example/cms' })).toThrow(new TypeError(said));
    expect(() => openDatabase(undefined, { DATABASE_URL: 'not a url' })).toThrow(
      new TypeError('DATABASE_URL must be a Postgres URL (postgres://user@host:5432/db), and it is not a URL: point it at a Postgres server, or unset it for the embedded database.'),
    );
    // The router reads the process's environment.
    const previous = process.env.DATABASE_URL;
    process.env.DATABASE_URL = 'mysql://someone:secret@db.example/cms';
    try {
      expect(() => bcmsExtensions({}, {})).toThrow(new TypeError(said));
      // The option, when given, is what is named.
      expect(() => bcmsExtensions({}, { database: 'mysql://x@y/z' })).toThrow('option database: a string must be a Postgres URL');
    } finally {
      if (previous === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = previous;
    }
    // The CLI's commands that reach the database say the same.
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-cwd-'));
    for (const command of [['keys', 'list'], ['migrate']]) {
      expect(await runCli(command, { DATABASE_URL: 'mysql://someone:secret@db.example/cms' }, cwd)).toEqual({ status: 1, out: '', err: `bcms-ext ${command[0]}: ${said}\n` });
    }
  });

  test('{ pglite: DIR } on disk: data survives close() and a new router on the same directory', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-pglite-'));
    const first = bcmsExtensions({ functions: [add, count] }, { database: { pglite: dir }, logger: memoryLogger().logger });
    await first.ready;
    expect((await request(express().use(first)).post('/api/function/add').send({ name: 'kept' })).body.result).toBe('kept');
    await first.close();

    const second = bcmsExtensions({ functions: [add, count] }, { database: { pglite: dir }, logger: memoryLogger().logger });
    await second.ready;
    expect((await request(express().use(second)).post('/api/function/count')).body.result).toEqual(['kept']);
    await second.close();
  }, 60_000);

  // Needs the server: CI always sets DATABASE_URL (.ci/run). Without one, the outage test still
  // covers a URL, through PGlite served over TCP.
  (process.env.DATABASE_URL ? test : test.skip)('a Postgres URL opens a pool of the router own, which close() ends', async () => {
    // A schema of the test's own, through the URL, so the server's public schema is left alone.
    const { schema, url, drop } = await serverSchema('bcms_url');
    const router = bcmsExtensions({ functions: [count] }, { database: url, logger: memoryLogger().logger });
    await router.ready;
    expect(await router.db.raw('select current_schema() as s').then((r: { rows: unknown[] }) => r.rows)).toEqual([{ s: schema }]);
    expect(await router.db.raw('select 1 as one').then((r: { rows: unknown[] }) => r.rows)).toEqual([{ one: 1 }]);
    await router.close();
    await expect(router.db.raw('select 1')).rejects.toThrow();
    await drop();
  });
});

describe('a database that hangs instead of refusing', () => {
  test('ready resolves, and requests get 503 once the 5 s connect time-out passes, not a 500 or a hang', async () => {
    const proxy = await TcpProxy.reserve({ host: '127.0.0.1', port: 1 });
    await proxy.hang();
    const log = memoryLogger();
    const router = bcmsExtensions({ functions: [count] }, { database: `postgres://postgres@127.0.0.1:${proxy.port}/test`, logger: log.logger });
    await expect(router.ready).resolves.toBeUndefined();
    expect(log.text()).not.toMatch(/could not start/);
    const res = await request(express().use(router)).post('/api/function/count');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('DATABASE_UNAVAILABLE');
    await router.close();
    await proxy.stop();
  }, 30_000);
});

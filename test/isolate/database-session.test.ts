import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import knexFactory from 'knex';
import pg from 'pg';
import request from 'supertest';
import { bcmsExtensions, createBcmsFunction, type BcmsExtensionsRouter } from '../../lib';
import { main } from '../../lib/cli/main';
import { prepareExtensionRole } from '../../lib/db/extension-role';
import { migrate } from '../../lib/db/migrate';
import { runBounded } from '../../lib/isolate/bounded-query';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, serverSchema, type Backend, type TestDatabase } from '../support/database';
import { deploy, functionSource, signed, type DeployKey } from '../support/deploy';
import { hmacKey, signedPost } from '../support/signature';
import { ROOMY, until } from '../support/wait';

// The audit's attacks on the service's database session, made by deployed code in its isolate
// (DESIGN.md "Sandbox": the database session is the service's alone). Extension SQL reaches the
// service only as the bridge's `query` capability; these handlers ask for it themselves, over the
// isolate's channel to the service, as hostile code would, rather than through Knex.

/**
 * Top-level code of a hostile bundle: `sql(text, conn)` asks the service to run `text` on connection
 * `conn`. It takes over its own isolate's channel (lib/isolate/channel.ts, found beside the child's
 * main module): the first frame the isolate writes names the channel, whose replies it then reads first.
 */
const HOSTILE = `
const hostilePath = require('node:path');
const { Channel } = require(hostilePath.join(hostilePath.dirname(process.mainModule.filename), 'channel.js'));
let channel;
let asked = 1e9;
const waiting = new Map();
const write = Channel.prototype.write;
Channel.prototype.write = function (frame) {
  if (channel === undefined) {
    channel = this;
    const receive = this.options.receive;
    this.options.receive = (batch) => {
      const rest = [];
      for (const m of Array.isArray(batch) ? batch : []) {
        const resolve = m && m.t === 'reply' ? waiting.get(m.id) : undefined;
        if (resolve === undefined) { rest.push(m); continue; }
        waiting.delete(m.id);
        resolve(m.error ? { error: String(m.error.message), code: m.error.code ?? null } : { rows: m.value.rows });
      }
      if (rest.length > 0) receive(rest);
    };
  }
  return write.call(this, frame);
};
const sql = (text, conn = 1) => new Promise((resolve) => {
  const id = ++asked;
  waiting.set(id, resolve);
  channel.send([{ t: 'ask', id, ask: { op: 'query', conn, sql: text, bindings: [] } }]);
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));`;

/**
 * `run`: `{ steps: [{ sql, conn? }], together?: [{ sql, conn? }], holdUntil?: file, leave?: true }`. Steps
 * run one after another, then `together`'s all at once; `holdUntil` then waits until the test writes
 * that file in the function's own folder (its working directory); `leave` returns before their
 * answers (a handler that does not wait). Nothing waits for a time: a busy machine only answers later.
 */
const RUNNER = `async ({ request }) => {
  const { steps, together = [], holdUntil, leave } = request.body;
  if (leave) {
    for (const step of steps) void sql(step.sql, step.conn);
    // Returns once the server runs the last one (a role sees its own sessions).
    for (;;) {
      const seen = await sql("select count(*)::int as n from pg_stat_activity where state = 'active' and pid <> pg_backend_pid() and query = " + JSON.stringify(steps[steps.length - 1].sql).replace(/^"|"$/g, "'"), 99);
      if (seen.rows && seen.rows[0].n > 0) return 'running';
      await sleep(50);
    }
  }
  const answers = [];
  for (const step of steps) answers.push(await sql(step.sql, step.conn));
  answers.push(...(await Promise.all(together.map((step) => sql(step.sql, step.conn)))));
  if (holdUntil) while (!require('node:fs').existsSync(holdUntil)) await sleep(50);
  return answers;
}`;

/** Opens ten transactions on connections 1-10 at once; answers how many began, once `least` did (and half a second more). */
const TEN_OPEN = `async ({ request }) => {
  let began = 0;
  for (let conn = 1; conn <= 10; conn++) sql('BEGIN', conn).then((answer) => { if (!answer.error) began++; });
  while (began < request.body.least) await sleep(50);
  await sleep(500);
  return began;
}`;

/** What extension code is given for content: repo (templates, entries) and a plugin repository (documents). */
const CONTENT = `async ({ request, repo }) => {
  const { createFSDBRepository } = require('bcms-extensions');
  const notes = createFSDBRepository({ name: 'notes', collection: 'session_notes', schema: { text: { __type: 'string', __required: true } } });
  const template = await repo.template.add({ name: request.body.name, label: 'Kept' });
  const entry = await repo.entry.add({ templateId: template._id, meta: [{ lng: 'en', props: [] }] });
  await repo.entry.update({ _id: entry._id, status: 'done' });
  await notes.add({ text: request.body.name });
  const counted = await sql('select count(*)::int as n from bcms_entries');
  return { entries: (await repo.entry.findAllByTemplateId(template._id)).map((e) => e.status), notes: (await notes.findAll()).map((n) => n.text), counted: counted.rows[0].n };
}`;

/** The service's own signed call: a private function of the registry, run in the service's process. */
const ownWrite = createBcmsFunction(async () => ({
  config: { name: 'own-write', public: false },
  handler: async ({ request, repo }) => {
    const template = await repo.template.add({ name: String((request.body as { name: string }).name), label: 'Service' });
    return { id: template._id };
  },
}));

const errorsOf = (answers: { error?: string; code?: string | null }[]): (string | null | undefined)[] => answers.map((answer) => answer.code ?? (answer.error === undefined ? 'ok' : answer.error));

describe.each(backends())("the database session is the service's alone (%s)", (backend: Backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let caller: DeployKey;
  let log: ReturnType<typeof memoryLogger>;
  let filesDir: string;
  let names = 0;
  const unique = (prefix: string): string => `${prefix}-${backend}-${++names}`;

  /** The service's own work: a signed call that writes (and records its signature), the deployments list. */
  async function serviceAnswers(): Promise<void> {
    const call = await signedPost(app, '/api/function/own-write', caller, { name: unique('own') });
    expect([call.status, call.body.success]).toEqual([200, true]);
    const list = await signed(app, 'GET', '/api/extensions/deployments', deployer);
    expect(list.status).toBe(200);
  }

  const run = (body: object): Promise<request.Response> => request(app).post('/api/function/hostile').send(body);

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-session-files-'));
    // Calls and loads have all the time a loaded machine may need: no test here is of a time-out.
    router = bcmsExtensions({ functions: [ownWrite] }, { database: db.knex, logger: log.logger, files: { dir: filesDir }, ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
    caller = await hmacKey(db.knex, ['own-write'], { name: 'caller' });
    await deploy(app, deployer, 'function', 'hostile', functionSource('hostile', RUNNER, HOSTILE));
    await deploy(app, deployer, 'function', 'ten-open', functionSource('ten-open', TEN_OPEN, HOSTILE));
    await deploy(app, deployer, 'function', 'content', functionSource('content', CONTENT, HOSTILE));
  }, 120_000);
  afterAll(async () => {
    await router.close();
    await db.close();
    fs.rmSync(filesDir, { recursive: true, force: true });
  });

  test("ten transactions left open by extension code: the service's signed calls, deployments list and undeploy still answer", async () => {
    const most = backend === 'postgres' ? 4 : 1;
    const began = await request(app).post('/api/function/ten-open').send({ least: most });
    expect(began.status).toBe(200);
    // A pool of its own (4) on a server; PGlite's one connection, which it held for the call only.
    expect(began.body.result).toBe(most);
    await serviceAnswers();
    // A handler that forgets COMMIT, ten times: each call's transaction ends with the call, its write undone.
    for (let i = 0; i < 10; i++) {
      const res = await run({ steps: [{ sql: 'BEGIN' }, { sql: `insert into bcms_documents (collection, id, doc) values ('forgotten', '${i}', '{}')` }] });
      expect(errorsOf(res.body.result)).toEqual(['ok', 'ok']);
    }
    await serviceAnswers();
    expect(await db.knex('bcms_documents').where({ collection: 'forgotten' })).toEqual([]);
    await deploy(app, deployer, 'function', 'throwaway', functionSource('throwaway', 'async () => 1'));
    const undeployed = await signed(app, 'DELETE', '/api/extensions/deployments/function/throwaway', deployer);
    expect(undeployed.status).toBe(200);
    if (backend === 'postgres') {
      // Nothing of extension code's is left idle in a transaction once its calls are over.
      await until(async () => {
        const seen = await db.knex.raw(`select count(*)::int as n from pg_stat_activity where usename = 'bcms_extension' and state like 'idle in transaction%'`);
        return seen.rows[0].n === 0;
      }, 200);
    }
  }, 120_000);

  if (backend === 'postgres') {
    test('while extension code holds every connection of its own pool, the service answers', async () => {
      // Held until the test says so (a file in the function's folder), however long the service takes to answer meanwhile.
      const release = `release-${backend}-${++names}`;
      const holding = request(app)
        .post('/api/function/hostile')
        .send({ steps: [1, 2, 3, 4].map((conn) => ({ sql: 'BEGIN', conn })), holdUntil: release })
        .then((res) => res);
      const openTransactions = async (): Promise<number> =>
        (await db.knex.raw(`select count(*)::int as n from pg_stat_activity where usename = 'bcms_extension' and state like 'idle in transaction%'`)).rows[0].n;
      try {
        // Its transactions are open (seen by the server) before the service is asked.
        await until(async () => (await openTransactions()) === 4, 100);
        await serviceAnswers();
        // ... and were still open while it answered.
        expect(await openTransactions()).toBe(4);
      } finally {
        fs.writeFileSync(path.join(filesDir, '.functions', 'hostile', release), '');
      }
      expect((await holding).status).toBe(200);
    }, 120_000);
  }

  test("set default_transaction_read_only = on, set statement_timeout = 0: the service's writes and the next extension call are unaffected", async () => {
    const poison = ['set default_transaction_read_only = on', 'set statement_timeout = 0', "set search_path = 'pg_catalog'", 'set session characteristics as transaction read only'];
    expect(errorsOf((await run({ steps: poison.map((sql) => ({ sql })) })).body.result)).toEqual(['ok', 'ok', 'ok', 'ok']);
    // Inside a transaction, left open, and in one text with a transaction left open.
    expect(errorsOf((await run({ steps: [{ sql: 'BEGIN' }, ...poison.map((sql) => ({ sql }))] })).body.result)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
    if (backend === 'postgres') {
      // Several statements in one text are refused (one statement a text: lib/isolate/bounded-query.ts).
      expect(errorsOf((await run({ steps: [{ sql: 'set default_transaction_read_only = on; begin; set statement_timeout = 0' }] })).body.result)).toEqual(['42601']);
      expect(errorsOf((await run({ steps: [{ sql: "select set_config('default_transaction_read_only', 'on', false)" }] })).body.result)).toEqual(['ok']);
    }
    if (backend === 'pglite') {
      // The service's LISTEN on its one connection (deployments, socket events) outlives extension code's UNLISTEN.
      const listening = async (): Promise<string[]> => ((await db.knex.raw('select pg_listening_channels() as channel')).rows as { channel: string }[]).map((row) => row.channel);
      const before = await listening();
      expect(before).toContain('bcms_deployments');
      expect(errorsOf((await run({ steps: [{ sql: 'unlisten *' }, { sql: 'BEGIN' }, { sql: 'unlisten *' }, { sql: 'COMMIT' }] })).body.result)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(await listening()).toEqual(before);
    }
    for (let i = 0; i < 20; i++) await serviceAnswers();
    await deploy(app, deployer, 'function', 'after-poison', functionSource('after-poison', 'async () => 2'));
    const next = await run({
      steps: [
        { sql: 'show default_transaction_read_only' },
        { sql: 'show statement_timeout' },
        { sql: 'show transaction_read_only' },
        { sql: "insert into bcms_documents (collection, id, doc) values ('after', '1', '{}')" },
      ],
    });
    const [readOnly, timeout, transactionReadOnly, write] = next.body.result as { rows?: Record<string, string>[]; error?: string }[];
    expect(readOnly?.rows).toEqual([{ default_transaction_read_only: 'off' }]);
    expect(transactionReadOnly?.rows).toEqual([{ transaction_read_only: 'off' }]);
    expect(write?.error).toBeUndefined();
    // A server's extension sessions keep the time-out the service gives them (the longest call's: ten minutes here).
    if (backend === 'postgres') expect(timeout?.rows).toEqual([{ statement_timeout: '10min' }]);
    // The service's own session (PGlite's one connection) reads and writes as before.
    const [own] = (await db.knex.raw('select current_user as who, current_setting($$default_transaction_read_only$$) as ro')).rows as { who: string; ro: string }[];
    expect(own).toEqual({ who: backend === 'postgres' ? expect.any(String) : 'postgres', ro: 'off' });
  }, 180_000);

  if (backend === 'postgres') {
    test("a role's own session defaults (alter role current_user set ...) do not reach the next extension session", async () => {
      const set = await run({ steps: [{ sql: 'alter role current_user set default_transaction_read_only = on' }] });
      expect(errorsOf(set.body.result)).toEqual(['ok']);
      // The extension pool's sessions end (a server restart, say): the next ones are made under the role's defaults.
      await db.knex.raw(`select pg_terminate_backend(pid) from pg_stat_activity where usename = 'bcms_extension' and datname = current_database()`);
      // The pool learns of each ended session when it is next used (as after a server restart): until a new one answers.
      for (let tries = 0; tries < 10; tries++) {
        const probe = await run({ steps: [{ sql: 'select 1 as one' }] });
        if ((probe.body.result as { rows?: unknown[] }[])[0]?.rows !== undefined) break;
      }
      const next = await run({ steps: [{ sql: 'show default_transaction_read_only' }, { sql: "insert into bcms_documents (collection, id, doc) values ('after-alter', '1', '{}')" }] });
      const [readOnly, write] = next.body.result as { rows?: Record<string, string>[]; error?: string }[];
      expect([readOnly?.rows, write?.error]).toEqual([[{ default_transaction_read_only: 'off' }], undefined]);
      const settings = await db.knex.raw(
        `select coalesce(array_to_string(array(select unnest(setconfig) from pg_db_role_setting where setrole = (select oid from pg_roles where rolname = 'bcms_extension')), ','), '') as s`,
      );
      expect(settings.rows[0].s).not.toContain('default_transaction_read_only');
      expect(log.lines.some((line) => String(line.msg).startsWith("bcms-extensions: the extension role carried session defaults that were not the service's"))).toBe(true);
    }, 120_000);
  }

  test('select * from bcms_api_keys is refused, also after RESET ROLE, SET ROLE postgres and SET SESSION AUTHORIZATION postgres', async () => {
    const secretTables = ['bcms_api_keys', 'bcms_signature_replays', 'bcms_deployments', 'bcms_idempotency_keys', 'bcms_migrations', 'bcms_extension_role'];
    for (const table of secretTables) {
      const res = await run({ steps: [{ sql: `select * from ${table}` }] });
      expect([table, errorsOf(res.body.result)]).toEqual([table, ['42501']]);
    }
    const escapes = ['reset role', 'set role postgres', 'set session authorization postgres', 'set session authorization default', 'reset session authorization'];
    for (const statement of escapes) {
      // Each alone, then the select; and both in one transaction.
      const apart = await run({ steps: [{ sql: statement }, { sql: 'select * from bcms_api_keys' }] });
      expect([statement, (apart.body.result as { code?: string }[])[1]?.code]).toEqual([statement, '42501']);
      const inOne = await run({ steps: [{ sql: 'BEGIN' }, { sql: statement }, { sql: 'select * from bcms_api_keys' }, { sql: 'ROLLBACK' }] });
      // Refused, or not run at all (the escape itself was refused, and its transaction with it).
      expect([statement, (inOne.body.result as { code?: string }[])[2]?.code]).toEqual([statement, expect.stringMatching(/^(42501|25P02)$/)]);
    }
    if (backend === 'postgres') {
      // A login role that is a member of nothing: there is no role to become.
      const res = await run({ steps: [{ sql: 'set role postgres' }, { sql: 'set session authorization postgres' }] });
      expect(errorsOf(res.body.result)).toEqual(['42501', '42501']);
    }
    // Within one statement: set_config, a DO block, a temporary function, statements sent at once on one transaction.
    const within = await run({
      steps: [
        { sql: "select set_config('role', 'postgres', false), (select count(*) from bcms_api_keys)" },
        { sql: "do $$ begin perform set_config('role', 'postgres', false); raise exception 'got %', (select count(*) from bcms_api_keys); end $$" },
        { sql: "select query_to_xml('select * from bcms_api_keys', true, false, '')" },
        // A server lets a session make temporary functions (they run as the role); PGlite does not.
        { sql: "create function pg_temp.peek() returns bigint language sql as 'select count(*) from bcms_api_keys'", conn: 2 },
        { sql: 'select pg_temp.peek()', conn: 2 },
      ],
    });
    const [withSetConfig, withDo, withXml, made, peeked] = within.body.result as { rows?: unknown[]; error?: string; code?: string }[];
    for (const answer of [withSetConfig, withDo, withXml, peeked]) {
      expect(answer?.rows).toBeUndefined();
      expect(answer?.error).not.toMatch(/got \d/);
    }
    expect(made?.code ?? 'ok').toBe(backend === 'postgres' ? 'ok' : '42501');
    for (let round = 0; round < 5; round++) {
      const raced = await run({
        steps: [{ sql: 'BEGIN', conn: 7 }],
        together: [
          { sql: 'ROLLBACK', conn: 7 },
          { sql: 'select * from bcms_api_keys', conn: 7 },
          { sql: 'reset role', conn: 7 },
          { sql: 'select * from bcms_api_keys', conn: 7 },
        ],
      });
      const answers = raced.body.result as { rows?: unknown[] }[];
      expect(answers).toHaveLength(5);
      expect([answers[2]?.rows, answers[4]?.rows]).toEqual([undefined, undefined]);
    }
    // The service is itself still: its own reads of those tables work.
    await serviceAnswers();
    expect(Number((await db.knex('bcms_api_keys').count({ n: '*' }))[0]?.n)).toBeGreaterThanOrEqual(2);
  }, 180_000);

  test('content stays reachable from an isolate: repo (templates, entries) and plugin repositories (documents)', async () => {
    const name = unique('kept');
    const res = await request(app).post('/api/function/content').send({ name });
    expect(res.status).toBe(200);
    expect(res.body.result).toEqual({ entries: ['done'], notes: [name], counted: expect.any(Number) });
    expect(await db.knex('bcms_templates').where({ name }).first('label')).toEqual({ label: 'Kept' });
  }, 60_000);

  test('a statement a handler did not wait for does not outlive its call', async () => {
    if (backend === 'postgres') {
      // In a transaction whose statement time-out it lifted first: only the end of its call stops it.
      const sleeper = 'select pg_sleep(600)';
      const left = await run({
        leave: true,
        steps: [
          { sql: 'BEGIN', conn: 4 },
          { sql: 'set statement_timeout = 0', conn: 4 },
          { sql: sleeper, conn: 4 },
        ],
      });
      expect(left.body.result).toBe('running');
      // Ended with its call, whenever the machine gets there: the test's time-out is far below the statement's ten minutes.
      await until(async () => {
        const seen = await db.knex.raw(`select count(*)::int as n from pg_stat_activity where usename = 'bcms_extension' and query = ? and state = 'active'`, [sleeper]);
        return seen.rows[0].n === 0;
      }, 200);
    } else {
      // The embedded database has no statement time-out: a sleep is not extension code's to call.
      const sleep = await run({ steps: [{ sql: 'select pg_sleep(0)' }] });
      expect(errorsOf(sleep.body.result)).toEqual(['42501']);
    }
    await serviceAnswers();
  }, 60_000);
});

describe('how extension code connects', () => {
  test('the embedded database takes no extensionUrl', () => {
    expect(() => bcmsExtensions({}, { database: { pglite: 'memory://', extensionUrl: 'postgres://x@localhost/db' } as never })).toThrow(
      'option database.extensionUrl needs a Postgres server (database.url or database.knex): the embedded database has no other login',
    );
    expect(() => bcmsExtensions({}, { extensionPool: { max: 0 } })).toThrow('option extensionPool.max must be a positive integer of connections, got 0');
    expect(() => bcmsExtensions({}, { extensionPool: { min: 1 } as never })).toThrow('unknown option "extensionPool.min" (known: extensionPool.max)');
    expect(() => bcmsExtensions({}, { database: { url: 'postgres://a@b/c', extensionUrl: 'mysql://x@y/z' } })).toThrow(
      'option database.extensionUrl must be a Postgres URL that connects as the role extension queries run as',
    );
    expect(() => bcmsExtensions({}, { database: { extensionUrl: 'postgres://x@y/z' } as never })).toThrow(
      'option database: give one of database.url (a Postgres URL) and database.knex (a Knex instance)',
    );
    expect(() => bcmsExtensions({}, { database: { url: 'postgres://a@b/c', extensionURL: 'postgres://x@y/z' } as never })).toThrow('unknown option "database.extensionURL"');
  });

  test('bcms-ext db extension-role prints the role, its limits, its grants and its password for the service', async () => {
    let out = '';
    const add = (text: string): void => {
      out += text;
    };
    const io = { out: add, err: add, env: {} };
    expect(await main(['db', 'extension-role', '--schema', 'tenant_a', '--timeout-ms', '15000'], io)).toBe(0);
    expect(out).toMatch(/^create role "bcms_extension" login nosuperuser nocreatedb nocreaterole noinherit nobypassrls password '[\w-]{32}';$/m);
    expect(out).toContain('alter role "bcms_extension" set statement_timeout = 15000;');
    expect(out).toContain('grant usage on schema "tenant_a" to "bcms_extension";');
    expect(out).toContain('grant select, insert, update, delete on "tenant_a"."bcms_templates", "tenant_a"."bcms_entries", "tenant_a"."bcms_documents" to "bcms_extension";');
    expect(out).toMatch(/insert into "tenant_a"."bcms_extension_role" \(role, password\) values \('bcms_extension', '[\w-]{32}'\)/);
    out = '';
    expect(await main(['db', 'nothing'], io)).toBe(1);
    expect(out).toBe('bcms-ext db: expected "extension-role", got "nothing"\n');
  });

  if (process.env.DATABASE_URL) {
    test('a service whose user may not make roles, where there is no role: refused, saying what to do', async () => {
      const { schema, admin, drop } = await serverSchema('bcms_norole');
      const user = `bcms_svc_${randomBytes(4).toString('hex')}`;
      await admin.raw(`create role "${user}" login nosuperuser nocreaterole`);
      await admin.raw(`alter schema "${schema}" owner to "${user}"`);
      const base = new URL(process.env.DATABASE_URL as string);
      base.username = user;
      base.searchParams.set('options', `-c search_path=${schema}`);
      const service = knexFactory({ client: 'pg', connection: base.toString(), pool: { min: 0, max: 2 } });
      try {
        await migrate(service);
        const outcome = await prepareExtensionRole(service, { embedded: false, timeoutMs: 1000, role: `bcms_absent_${randomBytes(4).toString('hex')}` });
        expect(outcome).toEqual({
          ok: false,
          reason: expect.stringMatching(
            new RegExp(
              `^there is no role "bcms_absent_\\w+" for extension queries, and the service's database user "${user}" may not make one\\. Give the option database\\.extensionUrl .*\\bbcms-ext db extension-role\\b`,
            ),
          ),
        });
        const absent = await prepareExtensionRole(service, { embedded: false, timeoutMs: 1000, extensionUser: 'bcms_nobody_here' });
        expect(absent).toEqual({ ok: false, reason: expect.stringContaining('the role "bcms_nobody_here" of database.extensionUrl does not exist') });
      } finally {
        await service.destroy();
        await drop();
        const cleanup = knexFactory({ client: 'pg', connection: process.env.DATABASE_URL, pool: { min: 0, max: 1 } });
        await cleanup.raw(`drop role if exists "${user}"`).catch(() => {});
        await cleanup.destroy();
      }
    }, 60_000);

    test("a Knex instance's searchPath is the extension sessions' schema too", async () => {
      const { schema, drop } = await serverSchema('bcms_searchpath');
      const service = knexFactory({ client: 'pg', connection: process.env.DATABASE_URL, searchPath: [schema], pool: { min: 0, max: 3 } });
      const router = bcmsExtensions({}, { database: service, logger: memoryLogger().logger, ...ROOMY });
      try {
        const app = express().use(router);
        await router.ready;
        const deployer = await hmacKey(service, [], { deploy: true });
        await deploy(app, deployer, 'function', 'where', functionSource('where', RUNNER, HOSTILE));
        const res = await request(app)
          .post('/api/function/where')
          .send({ steps: [{ sql: 'select current_schema() as s' }, { sql: 'select count(*)::int as n from bcms_templates' }] });
        const [where, templates] = res.body.result as { rows?: { s?: string; n?: number }[] }[];
        expect([where?.rows, templates?.rows]).toEqual([[{ s: schema }], [{ n: 0 }]]);
      } finally {
        await router.close();
        await service.destroy();
        await drop();
      }
    }, 60_000);

    test("database.extensionUrl: a role made with the printed SQL is used; the service's own user is refused, with what to do", async () => {
      const { url, admin, schema, drop } = await serverSchema('bcms_extrole');
      const role = `bcms_ext_${randomBytes(4).toString('hex')}`;
      const log = memoryLogger();
      const service = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 3 } });
      const extensionUrl = new URL(url);
      extensionUrl.username = role;
      let router: BcmsExtensionsRouter | undefined;
      let refusing: BcmsExtensionsRouter | undefined;
      try {
        router = bcmsExtensions({}, { database: { knex: service, extensionUrl: extensionUrl.toString() }, logger: log.logger, ...ROOMY });
        const app = express().use(router);
        await router.ready;
        let sql = '';
        await main(['db', 'extension-role', '--schema', schema, '--role', role], {
          out: (text) => {
            sql += text;
          },
          err: () => {},
          env: {},
        });
        await admin.raw(sql);
        const deployer = await hmacKey(service, [], { deploy: true });
        await deploy(app, deployer, 'function', 'hostile', functionSource('hostile', RUNNER, HOSTILE));
        const res = await request(app)
          .post('/api/function/hostile')
          .send({ steps: [{ sql: 'select current_user as who' }, { sql: 'select count(*)::int as n from bcms_entries' }, { sql: 'select * from bcms_api_keys' }] });
        const [who, entries, keys] = res.body.result as { rows?: { who?: string; n?: number }[]; code?: string }[];
        expect([who?.rows, entries?.rows, keys?.code]).toEqual([[{ who: role }], [{ n: 0 }], '42501']);

        // The service's own user as extensionUrl: refused, never run as the service.
        const refusedLog = memoryLogger();
        refusing = bcmsExtensions({}, { database: { knex: service, extensionUrl: url }, logger: refusedLog.logger, ...ROOMY });
        const refusingApp = express().use(refusing);
        await refusing.ready;
        await deploy(refusingApp, deployer, 'function', 'hostile-again', functionSource('hostile-again', RUNNER, HOSTILE));
        const refused = await request(refusingApp)
          .post('/api/function/hostile-again')
          .send({ steps: [{ sql: 'select 1' }] });
        expect((refused.body.result as { error?: string }[])[0]?.error).toMatch(/^Extension queries are refused: the role "postgres" is privileged/);
        expect(refusedLog.lines.some((line) => String(line.msg).startsWith('bcms-extensions: extension queries are refused (never run as the service)'))).toBe(true);
      } finally {
        await refusing?.close();
        await router?.close();
        await service.destroy();
        await drop();
        const cleanup = knexFactory({ client: 'pg', connection: process.env.DATABASE_URL, pool: { min: 0, max: 1 } });
        await cleanup.raw(`drop role if exists "${role}"`).catch(() => {});
        await cleanup.destroy();
      }
    }, 120_000);
  }
});

// What the service holds of a statement, and how long a statement or a transaction of extension
// code may run, are the service's to bound, whatever the session was told: on a server, one large
// result once ended the service (its heap), and a statement started after `set statement_timeout = 0`
// held an exclusive lock past its time-out and its undeploy.
(process.env.DATABASE_URL ? describe : describe.skip)('statements of extension code, bounded by the service (postgres)', () => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;

  beforeAll(async () => {
    db = await openTestDatabase('postgres');
    // Calls (and so extension statements and transactions) held to 3 s, for the test of that limit; loads are not.
    router = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, functionTimeoutMs: 3000, pluginTimeoutMs: 3000, loadTimeoutMs: 600_000 });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
    await deploy(app, deployer, 'function', 'hostile', functionSource('hostile', RUNNER, HOSTILE));
  }, 60_000);
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  test('a result past 32 MB is refused as it arrives (TOO_LARGE) and the service lives; two statements in one text are refused', async () => {
    // The same function on a router whose calls have all the time a loaded machine may need: what it
    // checks (a result refused as it arrives) must not turn into a time-out when the machine is slow.
    // Started once it is deployed (it loads what is live at its start, and a call waits for that
    // load), and closed after: it would run the next test's deployment too, under its own limits.
    const roomy = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, ...ROOMY });
    try {
      const roomyApp = express().use(roomy);
      await roomy.ready;
      await resultsPastTheCap(roomyApp);
    } finally {
      await roomy.close();
    }
  }, 60_000);

  async function resultsPastTheCap(roomyApp: express.Express): Promise<void> {
    const res = await request(roomyApp)
      .post('/api/function/hostile')
      .send({
        steps: [
          { sql: "select repeat('x', 1000000) as v from generate_series(1, 40)" },
          { sql: "select repeat('x', 1000) as v from generate_series(1, 3)" },
          { sql: 'set statement_timeout = 0; select 1' },
        ],
      });
    expect(res.status).toBe(200);
    const [large, small, two] = res.body.result as { rows?: unknown[]; code?: string; error?: string }[];
    expect([large?.code, large?.error]).toEqual(['TOO_LARGE', expect.stringMatching(/larger than the 32 MB an extension may read at once/)]);
    expect(small?.rows).toHaveLength(3);
    expect(two?.code).toBe('42601');
    // Rows of no text still cost the service an object each: counted, and refused past the cap alike.
    // (Each in a call of its own: 700,000 rows are past the cap either way.)
    for (const sql of ['select from generate_series(1, 700000)', 'select null as n from generate_series(1, 700000)']) {
      const empty = await request(roomyApp)
        .post('/api/function/hostile')
        .send({ steps: [{ sql }] });
      expect([sql, empty.status, (empty.body.result as { code?: string }[] | undefined)?.[0]?.code]).toEqual([sql, 200, 'TOO_LARGE']);
    }
    expect(
      (
        await request(roomyApp)
          .post('/api/function/hostile')
          .send({ steps: [{ sql: 'select 1 as one' }] })
      ).body.result,
    ).toEqual([{ rows: [{ one: 1 }] }]);
  }

  test("a cancel that goes out after its statement ended (the result's end arrived first) does not cancel the connection's next statement", async () => {
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
    const canceller = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await Promise.all([client.connect(), canceller.connect()]);
    try {
      const pid = ((await client.query('select pg_backend_pid() as pid')) as { rows: { pid: number }[] }).rows[0]?.pid;
      // A slow cancel, as under load (it asks from another session, which may wait for its connection).
      const cancel = async (): Promise<void> => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        await canceller.query('select pg_cancel_backend($1)', [pid]);
      };
      // The statements' own limit is not what is checked: all the time a loaded machine may need.
      const limits = { maxBytes: 100_000, timeoutMs: 600_000 };
      await expect(runBounded(client, "select repeat('x', 100000) as v from generate_series(1, 10)", [], undefined, limits, cancel)).rejects.toMatchObject({ code: 'TOO_LARGE' });
      const next = await runBounded(client, 'select pg_sleep(0.6), 1 as one', [], undefined, limits, cancel);
      expect(next.rows).toEqual([{ pg_sleep: '', one: 1 }]);
      expect((client as { __knex__disposed?: unknown }).__knex__disposed).toBeUndefined();
      // A cancel that never goes out (its session cannot connect): answered after a while all the same, the connection never used again.
      await expect(runBounded(client, "select repeat('x', 100000) as v from generate_series(1, 10)", [], undefined, limits, () => new Promise<void>(() => {}))).rejects.toMatchObject({
        code: 'TOO_LARGE',
      });
      expect((client as { __knex__disposed?: unknown }).__knex__disposed).toBe('a cancel of its statement did not go out');
    } finally {
      await Promise.all([client.end(), canceller.end()]);
    }
  }, 30_000);

  test('a transaction begun outside any call, its statement_timeout set to 0 and an exclusive lock held, is cancelled and rolled back past the time-out', async () => {
    const marker = `bcms_lock_${randomBytes(4).toString('hex')}`;
    // Top-level code: once loaded (its channel known), with no call in flight.
    const background = `setTimeout(async () => {
      await sql('begin', 7);
      await sql('set statement_timeout = 0', 7);
      await sql('lock table bcms_entries in access exclusive mode', 7);
      await sql('select pg_sleep(600) as ${marker}', 7);
    }, 300);`;
    await deploy(app, deployer, 'function', 'locker', functionSource('locker', RUNNER, `${HOSTILE}\n${background}`));
    const sleeping = async (): Promise<number> =>
      Number(((await db.knex.raw(`select count(*)::int as n from pg_stat_activity where query like ? and state = 'active'`, [`%${marker}%`])) as { rows: { n: number }[] }).rows[0]?.n);
    let seen = 0;
    await until(async () => {
      seen = await sleeping();
      return seen > 0;
    }, 100);
    expect(seen).toBe(1);
    // Past the time-out (3 s) and a sweep, however late a busy machine gets there: the statement cancelled, the lock gone.
    await until(async () => (await sleeping()) === 0, 250);
    const exclusive = async (): Promise<number> =>
      Number(((await db.knex.raw(`select count(*)::int as n from pg_locks where relation = 'bcms_entries'::regclass and mode = 'AccessExclusiveLock'`)) as { rows: { n: number }[] }).rows[0]?.n);
    await until(async () => (await exclusive()) === 0, 250);
    const count = await db.knex.transaction(async (trx) => {
      await trx.raw("set local lock_timeout = '2s'");
      return ((await trx.raw('select count(*)::int as n from bcms_entries')) as { rows: { n: number }[] }).rows[0]?.n;
    });
    expect(count).toEqual(expect.any(Number));
    expect((await signed(app, 'DELETE', '/api/extensions/deployments/function/locker', deployer)).status).toBe(200);
  }, 60_000);
});

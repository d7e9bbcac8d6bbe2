import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { bcmsExtensions, createBcmsEvent, type BCMSEventHandlerData } from '../../lib';
import { memoryLogger } from '../support/app';
import { serverSchema } from '../support/database';
import { until } from '../support/events';

// DESIGN.md "Events and jobs": a process killed between a write's commit and its delivery loses
// nothing: another instance (the Postgres server), or the next start (PGlite, one process), delivers it.
// The child writes an entry, and SIGKILLs itself as soon as the write is committed: it may have claimed
// the delivery by then (a claim is kept for functionTimeoutMs + 10 s: 12 s here, on the server), or not.

jest.setTimeout(90_000);

const DIST = path.resolve(__dirname, '..', '..', 'dist', 'index.js');
const CHILD = `
const { bcmsExtensions, createBcmsEvent } = require(${JSON.stringify(DIST)});
const pino = require('pino');
const survivor = createBcmsEvent(async () => ({ name: 'survivor', config: { scope: 'ENTRY', method: 'ADD' }, handler: async () => {} }));
(async () => {
  const router = bcmsExtensions({ events: [survivor] }, { database: JSON.parse(process.argv[1]), logger: pino({ level: 'silent' }), functionTimeoutMs: 2000 });
  await router.ready;
  const [{ id }] = await router.db('bcms_templates').insert({ name: 'killed' }).returning('id');
  const entry = await router.repo.entry.add({ templateId: id, status: 'before the kill' });
  require('node:fs').writeSync(1, 'ENTRY:' + entry._id + '\\n');
  process.kill(process.pid, 'SIGKILL');
})();
`;

async function killedWriter(database: unknown): Promise<string> {
  const run = promisify(execFile)(process.execPath, ['-e', CHILD, JSON.stringify(database)], { cwd: path.resolve(__dirname, '..', '..') });
  const failure = (await run.then(
    () => undefined,
    (error: { signal?: string; stdout?: string; stderr?: string }) => error,
  )) as { signal?: string; stdout?: string; stderr?: string } | undefined;
  if (failure?.signal !== 'SIGKILL') throw new Error(`the child was to kill itself after its write: ${JSON.stringify(failure)}`);
  const id = /ENTRY:(\S+)/.exec(failure.stdout ?? '')?.[1];
  if (id === undefined) throw new Error(`the child wrote no entry: ${failure.stdout} ${failure.stderr}`);
  return id;
}

/** The survivor's deliveries once none is running: its outcome is recorded a moment after its handler ran. */
async function recorded(router: ReturnType<typeof bcmsExtensions>): Promise<Record<string, unknown>[]> {
  let rows: Record<string, unknown>[] = [];
  await until(async () => {
    rows = await router.db('bcms_event_deliveries').where({ handler: 'survivor' });
    return rows.every((row) => row.status !== 'running');
  }, 'the delivery recorded');
  return rows;
}

async function deliveredBy(database: unknown, entryId: string, handlerRunsIn: (router: ReturnType<typeof bcmsExtensions>) => Promise<unknown>): Promise<void> {
  const seen: BCMSEventHandlerData[] = [];
  const survivor = createBcmsEvent(async () => ({ name: 'survivor', config: { scope: 'ENTRY', method: 'ADD' }, handler: async (data) => void seen.push(data) }));
  const router = bcmsExtensions({ events: [survivor] }, { database: database as never, logger: memoryLogger().logger, functionTimeoutMs: 2000 });
  try {
    await router.ready;
    // After the killed process's claim ran out (12 s), if it had claimed it: whenever a busy machine gets there.
    await until(() => seen.length > 0, 'the delivery');
    expect(seen.map((data) => (data.payload as { _id: string })._id)).toEqual([entryId]);
    expect(seen[0]!.payload).toEqual(expect.objectContaining({ status: 'before the kill' }));
    await handlerRunsIn(router);
  } finally {
    await router.close();
  }
}

test('PGlite: the next start delivers what a killed process committed', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-killed-'));
  try {
    const entryId = await killedWriter({ pglite: dir });
    await deliveredBy({ pglite: dir }, entryId, async (router) => {
      // Tried once here, after a try of the killed process's if it had claimed it.
      expect(await recorded(router)).toEqual([expect.objectContaining({ status: 'delivered', attempts: expect.any(Number) })]);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

(process.env.DATABASE_URL ? test : test.skip)('Postgres server: another instance delivers what a killed instance committed', async () => {
  const { url, drop } = await serverSchema('bcms_killed');
  try {
    const entryId = await killedWriter(url);
    await deliveredBy(url, entryId, async (router) => {
      expect(await recorded(router)).toEqual([expect.objectContaining({ status: 'delivered', attempts: expect.any(Number) })]);
    });
  } finally {
    await drop();
  }
});

import { randomBytes } from 'node:crypto';
import knexFactory, { type Knex } from 'knex';
import { openDatabase } from '../../lib/db/connection';
import { TcpProxy } from './proxy';

export type Backend = 'pglite' | 'postgres';

export interface TestDatabase {
  backend: Backend;
  knex: Knex;
  close(): Promise<void>;
}

/** PGlite always; the Postgres server of DATABASE_URL too when it is set (as CI sets it). */
export function backends(): Backend[] {
  return process.env.DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
}

/**
 * A database of the test file's own: PGlite in memory, or a schema of its own on the server, so
 * test files running in parallel never see each other's rows.
 */
export async function openTestDatabase(backend: Backend): Promise<TestDatabase> {
  if (backend === 'pglite') {
    const database = openDatabase({ pglite: 'memory://' });
    return { backend, knex: database.knex, close: () => database.close() };
  }
  const { url, drop } = await serverSchema('bcms_test');
  // Quiet: closing while a connection is still being made is the test's doing, not news.
  const log = { warn() {}, error() {}, deprecate() {}, debug() {} };
  const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 5 }, log });
  return {
    backend,
    knex,
    async close() {
      await knex.destroy();
      await drop();
    },
  };
}

let shared: Promise<TestDatabase> | undefined;

/** One database for a whole test file, for tests that need one but are not about it. */
export function sharedTestDatabase(): Promise<TestDatabase> {
  shared ??= openTestDatabase(process.env.DATABASE_URL ? 'postgres' : 'pglite');
  return shared;
}

/** Closed after the file's tests (test/support/setup.ts). */
export async function closeSharedTestDatabase(): Promise<void> {
  if (shared === undefined) return;
  const database = await shared;
  shared = undefined;
  await database.close();
}

/**
 * A schema of its own on the DATABASE_URL server, and a URL whose connections use it
 * (`options=-c search_path=...`): for code that takes a URL rather than a Knex instance.
 */
export async function serverSchema(prefix: string): Promise<{ schema: string; url: string; admin: Knex; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set');
  const schema = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
  await admin.raw('create schema ??', [schema]);
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    schema,
    url: url.toString(),
    admin,
    async drop() {
      await admin.raw('drop schema if exists ?? cascade', [schema]);
      await admin.destroy();
    },
  };
}

/**
 * A schema of its own on the DATABASE_URL server, reached through a TCP proxy (started) that a
 * test cuts to play the database going away: `url` goes through the proxy.
 */
export async function proxiedServerSchema(prefix: string): Promise<{ schema: string; url: string; admin: Knex; proxy: TcpProxy; drop(): Promise<void> }> {
  const direct = await serverSchema(prefix);
  const base = new URL(process.env.DATABASE_URL as string);
  const proxy = await TcpProxy.reserve({ host: base.hostname, port: Number(base.port || 5432) });
  await proxy.start();
  const through = new URL(direct.url);
  through.hostname = '127.0.0.1';
  through.port = String(proxy.port);
  return { ...direct, url: through.toString(), proxy };
}

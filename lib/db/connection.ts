import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import type { PGlite } from '@electric-sql/pglite';
import type { Logger } from '../logger';
import { LOCK_FILE, lockDataDirectory } from './pglite-lock';
import { ownManifest } from '../manifest';
import {
  COMPLETE_MARK,
  extractTemplate,
  forgetKept,
  loadPgliteTemplate,
  pgliteVersion,
  shippedDataVersion,
  shippedTemplate,
  topLevelNames,
  type LoadedTemplate,
  type TarEntry,
} from './pglite-template';

/**
 * The `database` option: a Knex instance, a Postgres URL, or an embedded PGlite directory; or, to
 * say how extension code connects, `{ url, extensionUrl }` or `{ knex, extensionUrl }`.
 */
export type DatabaseOption = Knex | string | { pglite: string } | ServerWithExtensionRole;

/**
 * A Postgres server (`url` or `knex`) and `extensionUrl`: a URL that connects as the login role
 * extension queries run as (rights on the content tables only; see `bcms-ext db extension-role`).
 */
export type ServerWithExtensionRole = { url: string; knex?: never; extensionUrl?: string } | { knex: Knex; url?: never; extensionUrl?: string };

export interface Database {
  readonly knex: Knex;
  /** For logs: `postgres://host:port/db` (no password), `pglite:DIR`, or `knex instance`. */
  readonly description: string;
  /** `database.extensionUrl`: how extension queries connect (else as the role the service makes). */
  readonly extensionUrl?: string;
  /** Closes what this router opened; a Knex instance the host passed in stays open. */
  close(): Promise<void>;
}

/** Where the embedded database lives when nothing is configured: `.bcms/data` under the working directory. */
export const DEFAULT_PGLITE_DIR = path.join('.bcms', 'data');

/** `option`, else `DATABASE_URL`, else embedded PGlite in `.bcms/data`. */
export function openDatabase(option: DatabaseOption | undefined, env: NodeJS.ProcessEnv = process.env, logger?: Logger): Database {
  const log = knexLog(logger);
  // No option: the environment's URL, refused (if it is not one) as the environment's, not as an option nobody gave.
  if (option === undefined && env.DATABASE_URL) return openPostgres(env.DATABASE_URL, log, 'DATABASE_URL');
  const chosen = option ?? { pglite: path.resolve(DEFAULT_PGLITE_DIR) };
  if (isKnex(chosen)) {
    return { knex: chosen, description: 'knex instance', close: async () => {} };
  }
  if (typeof chosen === 'string') return openPostgres(chosen, log);
  if (chosen !== null && typeof chosen === 'object' && 'pglite' in chosen) {
    // The embedded database has one connection, and no login: extension statements run there under SET ROLE.
    if ('extensionUrl' in chosen) throw new TypeError('option database.extensionUrl needs a Postgres server (database.url or database.knex): the embedded database has no other login');
    if (typeof chosen.pglite === 'string' && chosen.pglite !== '') return openPglite(chosen.pglite, log, logger);
  } else if (chosen !== null && typeof chosen === 'object') {
    return openServerWithExtensionRole(chosen, log);
  }
  throw new TypeError('option database must be a Knex instance, a Postgres URL, or { pglite: DIR } ("memory://" for in memory); with a login of extension code\'s own: { url | knex, extensionUrl }');
}

function openServerWithExtensionRole(option: ServerWithExtensionRole, log: Knex.Config['log']): Database {
  for (const key of Object.keys(option)) {
    if (key !== 'url' && key !== 'knex' && key !== 'extensionUrl') throw new TypeError(`unknown option "database.${key}" (known: database.url, database.knex, database.extensionUrl)`);
  }
  const { url, knex, extensionUrl } = option as { url?: unknown; knex?: unknown; extensionUrl?: unknown };
  if ((url === undefined) === (knex === undefined)) throw new TypeError('option database: give one of database.url (a Postgres URL) and database.knex (a Knex instance), with database.extensionUrl');
  if (extensionUrl !== undefined && (typeof extensionUrl !== 'string' || !isPostgresUrl(extensionUrl))) {
    throw new TypeError('option database.extensionUrl must be a Postgres URL that connects as the role extension queries run as (postgres://bcms_extension:PASSWORD@host:5432/db)');
  }
  let database: Database;
  if (knex !== undefined) {
    if (!isKnex(knex)) throw new TypeError('option database.knex must be a Knex instance');
    database = { knex, description: 'knex instance', close: async () => {} };
  } else {
    if (typeof url !== 'string') throw new TypeError('option database.url must be a Postgres URL (postgres://user@host:5432/db)');
    database = openPostgres(url, log);
  }
  return extensionUrl === undefined ? database : { ...database, extensionUrl };
}

function isPostgresUrl(value: string): boolean {
  try {
    const { protocol } = new URL(value);
    return protocol === 'postgres:' || protocol === 'postgresql:';
  } catch {
    return false;
  }
}

function isKnex(value: unknown): value is Knex {
  return typeof value === 'function' && typeof (value as Knex).raw === 'function' && typeof (value as Knex).client === 'object';
}

/** Knex's own messages (connection retries, warnings) go to the router's logger, not to console. */
function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  if (logger === undefined) return undefined;
  const to = (level: 'warn' | 'error' | 'debug') => (message: unknown) => logger[level]({ knex: String(message) }, 'bcms-extensions: knex');
  return { warn: to('warn'), error: to('error'), deprecate: to('warn'), debug: to('debug') };
}

/** `from`: where the URL came from, for its refusal: the `database` option, or the `DATABASE_URL` variable. */
function openPostgres(url: string, log: Knex.Config['log'], from: 'option' | 'DATABASE_URL' = 'option'): Database {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:')) {
    if (from === 'option') throw new TypeError('option database: a string must be a Postgres URL (postgres://user@host:5432/db)');
    // Its scheme only: the rest of a URL may hold a password.
    const what = parsed === undefined ? 'not a URL' : `a ${parsed.protocol.slice(0, 20)} URL`;
    throw new TypeError(`DATABASE_URL must be a Postgres URL (postgres://user@host:5432/db), and it is ${what}: point it at a Postgres server, or unset it for the embedded database.`);
  }
  const description = `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  const knex = knexFactory({
    client: 'pg',
    // Fail fast while the server is down or hung, so callers get a 503 in seconds, not after knex's
    // 60 s, and a connection that stops answering is given up (and back to the pool) after 30 s.
    connection: { connectionString: url, connectionTimeoutMillis: 5_000, query_timeout: 30_000, keepAlive: true } as never,
    pool: { min: 0, max: 10 },
    acquireConnectionTimeout: 10_000,
    log,
  });
  return { knex, description, close: () => knex.destroy() };
}

function openPglite(dir: string, log: Knex.Config['log'], logger: Logger | undefined): Database {
  const inMemory = dir.startsWith('memory://');
  const dataDir = inMemory ? dir : path.resolve(dir);
  // PGlite first: knex-pglite requires it too, and would fail naming it rather than itself.
  const pglite = requireEmbedded<typeof import('@electric-sql/pglite')>('@electric-sql/pglite');
  const ClientPgLite = requireEmbedded<typeof import('knex-pglite')>('knex-pglite');
  let unlock = (): void => {};
  if (!inMemory) {
    fs.mkdirSync(dataDir, { recursive: true });
    // Here, while the router is built: a directory another process holds is refused at once.
    unlock = lockDataDirectory(dataDir);
  }
  const embedded = new EmbeddedPglite(startPglite(pglite, dataDir, inMemory, logger), unlock);
  const knex = knexFactory({ client: ClientPgLite as unknown as typeof Knex.Client, connection: { pglite: embedded } as never, log });
  const close = async (): Promise<void> => {
    // knex-pglite closes PGlite with its one connection; a database never queried has none.
    await knex.destroy();
    await embedded.close();
  };
  return { knex, description: `pglite:${dataDir}`, close };
}

/** Postgres's `shared_buffers` for embedded databases (see startPglite). */
export const PGLITE_SHARED_BUFFERS = '16MB';

const EMBEDDED_PACKAGES = ['@electric-sql/pglite', 'knex-pglite'];

/**
 * PGlite and knex-pglite are optional dependencies (peers, as Knex's drivers are): a host that gives
 * a Postgres server does not install 27 MB it never runs. Loaded only here, when no server is given;
 * when they are missing, the error says how to install them.
 */
function requireEmbedded<T>(name: string): T {
  try {
    return require(name) as T;
  } catch (error) {
    const missing = EMBEDDED_PACKAGES.find((pkg) => String((error as Error).message).includes(`'${pkg}'`));
    if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND' || missing === undefined) throw error;
    throw new Error(`the embedded database needs ${missing}, which is not installed. Install it with \`${pgliteInstallCommand()}\`, or give a Postgres server (DATABASE_URL, or the database option)`);
  }
}

/**
 * `npm install` of the embedded database's packages, in the ranges this package accepts (its peer
 * dependencies): npm then installs the newest of each range, which starts from the shipped template
 * as the oldest does (test/installed.test.ts installs it so).
 */
export function pgliteInstallCommand(): string {
  const ranges = ownManifest().peerDependencies ?? {};
  return `npm install ${EMBEDDED_PACKAGES.map((name) => (ranges[name] ? `${name}@${ranges[name]}` : name)).join(' ')}`;
}

/** After this long, a first start says on stderr what it is doing (once). */
const SLOW_START_MS = 1_000;

/**
 * Opens PGlite on `dataDir`. A new database starts from the initdb template (lib/db/pglite-template.ts)
 * rather than running initdb here, which would cost seconds and hundreds of MB never given back;
 * if no template can be had, PGlite's own initdb runs, slowly, and a warning says why.
 */
async function startPglite(pglite: PgliteModule, dataDir: string, inMemory: boolean, logger: Logger | undefined): Promise<PGlite> {
  const { PGlite } = pglite;
  // Postgres's 128 MB of shared buffers are WebAssembly memory that PGlite touches at start: 16 MB
  // took 0.1 s and 140 MB of RSS off every start (measured). One backend needs few buffers; the
  // files stay cached by the operating system all the same.
  const startParams = [...PGlite.defaultStartParams, '-c', `shared_buffers=${PGLITE_SHARED_BUFFERS}`];
  if (!inMemory && fs.existsSync(path.join(dataDir, COMPLETE_MARK))) return PGlite.create(dataDir, { startParams });
  // A first start on disk is a service's first start: one line says what the wait is for.
  const slow = inMemory
    ? undefined
    : setTimeout(() => logger?.info({ dataDir }, `bcms-extensions: preparing the embedded database (PGlite) in ${dataDir}; a first start takes a few seconds`), SLOW_START_MS);
  slow?.unref();
  try {
    return await startNewPglite(pglite, startParams, dataDir, inMemory, logger);
  } finally {
    clearTimeout(slow);
  }
}

type PgliteModule = typeof import('@electric-sql/pglite');
/** What every start passes to PGlite.create: the start parameters, and PGlite's WebAssembly when it was compiled ahead. */
type StartOptions = Pick<import('@electric-sql/pglite').PGliteOptions, 'startParams' | 'pgliteWasmModule'>;
type WasmModule = NonNullable<StartOptions['pgliteWasmModule']>;

/** A new database: from the template, or from PGlite's own initdb where none can be had. */
async function startNewPglite(pglite: PgliteModule, startParams: string[], dataDir: string, inMemory: boolean, logger: Logger | undefined): Promise<PGlite> {
  const compiled = compilePglite();
  let template: LoadedTemplate | undefined;
  try {
    template = await loadPgliteTemplate({ inMemory });
  } catch (error) {
    logger?.warn({ err: error }, 'bcms-extensions: no PGlite template; PGlite runs initdb itself (seconds, and its memory stays taken)');
  }
  if (!inMemory) {
    const names = template === undefined ? undefined : topLevelNames(template.entries);
    const unexpected = fs.readdirSync(dataDir).filter((name) => name !== LOCK_FILE && !names?.has(name));
    if (unexpected.length > 0) {
      throw new Error(
        `the PGlite data directory ${dataDir} holds no database (no ${COMPLETE_MARK}) but other files (${unexpected.slice(0, 3).join(', ')}${unexpected.length > 3 ? ', ...' : ''}): ` +
          'give PGlite an empty or new directory of its own',
      );
    }
  }
  const wasm = await compiled;
  const options: StartOptions = wasm === undefined ? { startParams } : { startParams, pgliteWasmModule: wasm };
  if (template === undefined) return pglite.PGlite.create(dataDir, options);
  const open = (from: LoadedTemplate): Promise<PGlite> => openTemplate(pglite, options, dataDir, inMemory, from);
  try {
    return await open(template);
  } catch (first) {
    let error = first;
    if (template.from === 'kept') {
      // This user's unpacked copy in the temporary directory did not open (damaged there since):
      // deleted, and the shipped template unpacked again.
      logger?.warn({ err: error }, "bcms-extensions: this user's unpacked copy of the PGlite template did not open; it is unpacked again");
      await forgetKept();
      template = await loadPgliteTemplate({ inMemory, unpack: true });
      try {
        return await open(template);
      } catch (again) {
        error = again;
      }
    }
    if (template.from !== 'shipped') throw error;
    // Postgres refuses a data directory of another major or catalog version than its own: the
    // shipped template was made by the PGlite this package was built with, and one outside the
    // peer range may be installed. One made by the installed PGlite is used instead.
    const shipped = shippedTemplate();
    logger?.warn(
      { err: error, template: shipped, pglite: pgliteVersion() },
      `bcms-extensions: the shipped PGlite template (data version ${shipped === undefined ? 'unknown' : shippedDataVersion(shipped)}) does not open with the installed @electric-sql/pglite ${pgliteVersion()}; ` +
        'making one with it (a few seconds, once)',
    );
    return open(await loadPgliteTemplate({ inMemory, made: true }));
  }
}

/**
 * PGlite's WebAssembly, read and compiled (on V8's own threads) while the template is read and
 * written, which leaves the main thread idle: PGlite, handed the module, skips both (0.15 s of a
 * new database's start here). Undefined when it is not where PGlite keeps it: PGlite then does it.
 */
function compilePglite(): Promise<WasmModule | undefined> {
  const { WebAssembly } = globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> } };
  return fs.promises
    .readFile(path.join(path.dirname(require.resolve('@electric-sql/pglite')), 'pglite.wasm'))
    .then((bytes) => WebAssembly.compile(bytes))
    .catch(() => undefined);
}

/** PGlite opened on a copy of the template: in memory, or written into `dataDir` first. */
async function openTemplate(pglite: PgliteModule, options: StartOptions, dataDir: string, inMemory: boolean, template: LoadedTemplate): Promise<PGlite> {
  if (inMemory) {
    if (typeof pglite.MemoryFS !== 'function') return pglite.PGlite.create(dataDir, { ...options, loadDataDir: new Blob([template.tar]) });
    return pglite.PGlite.create({ ...options, dataDir, fs: templateInMemory(pglite.MemoryFS, template.entries) });
  }
  // What is there is a first start that did not finish (no PG_VERSION, only the template's names),
  // or a template the installed PGlite refused: started again from the template.
  for (const name of fs.readdirSync(dataDir)) if (name !== LOCK_FILE) fs.rmSync(path.join(dataDir, name), { recursive: true, force: true });
  await extractTemplate(template.entries, dataDir);
  return pglite.PGlite.create(dataDir, options);
}

/**
 * PGlite's memory file system with the template's files in its data directory, before Postgres
 * starts: each file is handed over as it lies in the tar (`canOwn`), so the file system owns that
 * memory and nothing is copied. `loadDataDir` copied the tar into a `Blob` and out again, then each
 * file out of it, then into the file system: PGlite.create of a `memory://` database took 1.1 s
 * with it, 0.7 s without (this loaded machine, under `chrt -r`; profiled: the copies and the page
 * faults of their new memory).
 * The tar must be this database's alone (loadPgliteTemplate reads a new one each call): Postgres
 * writes into those files, and so into it.
 */
function templateInMemory(MemoryFS: PgliteModule['MemoryFS'], entries: TarEntry[]): InstanceType<PgliteModule['MemoryFS']> {
  class TemplateInMemory extends MemoryFS {
    override async initialSyncFs(): Promise<void> {
      await super.initialSyncFs();
      const module = (this.pg as PGlite).Module as PGlite['Module'] & { ENV: Record<string, string> };
      const files = module.FS as unknown as { mkdirTree(path: string): void; writeFile(path: string, data: Uint8Array, options: { canOwn: boolean }): void };
      const root = module.ENV.PGDATA;
      if (typeof root !== 'string' || root === '') throw new Error("PGlite's Module.ENV.PGDATA is not set: the template cannot be placed in memory");
      files.mkdirTree(root);
      for (const entry of entries) {
        if (entry.directory) files.mkdirTree(`${root}/${entry.name}`);
        else files.writeFile(`${root}/${entry.name}`, entry.data, { canOwn: true });
      }
    }
  }
  return new TemplateInMemory();
}

interface PgliteQueries {
  query: PGlite['query'];
  exec: PGlite['exec'];
  listen: PGlite['listen'];
}

/**
 * What knex-pglite (and the deployments' LISTEN) sees of PGlite: knex needs its connection when
 * the router is built, but a new database is only opened once its template is there.
 */
class EmbeddedPglite implements PgliteQueries {
  readonly waitReady: Promise<void>;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly opening: Promise<PGlite>,
    private readonly unlock: () => void,
  ) {
    this.waitReady = opening.then(() => {});
    // Seen by whoever queries (knex rejects with it); not an unhandled rejection meanwhile.
    this.waitReady.catch(() => {});
  }

  get closed(): boolean {
    return this.closing !== undefined;
  }

  query: PGlite['query'] = async (...args) => (await this.open()).query(...args);

  /** Several statements in one text (the extension bridge resets the session with one). */
  exec: PGlite['exec'] = async (...args) => (await this.open()).exec(...args);

  listen: PGlite['listen'] = async (...args) => (await this.open()).listen(...args);

  private async open(): Promise<PGlite> {
    if (this.closing !== undefined) throw new Error('PGlite is closed');
    return this.opening;
  }

  /** Closes PGlite (its data written out), then gives the directory back. */
  close(): Promise<void> {
    this.closing ??= this.opening
      .then(
        (db) => (db.closed ? undefined : db.close()),
        () => undefined,
      )
      .finally(() => this.unlock());
    return this.closing;
  }
}

/** Whether `knex` is over embedded PGlite (one process: nothing else can be using its database). */
export function isEmbedded(knex: Knex): boolean {
  const connection = (knex.client as { config?: { connection?: { pglite?: unknown } } }).config?.connection;
  return connection !== null && typeof connection === 'object' && connection.pglite !== undefined;
}

import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import type { PGlite } from '@electric-sql/pglite';
import type { Logger } from '../logger';
import { LOCK_FILE, lockDataDirectory } from './pglite-lock';
import { ownManifest } from '../manifest';
import { COMPLETE_MARK, extractTemplate, loadPgliteTemplate, readTar, topLevelNames, type TarEntry } from './pglite-template';

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
  const { PGlite } = requireEmbedded<typeof import('@electric-sql/pglite')>('@electric-sql/pglite');
  const ClientPgLite = requireEmbedded<typeof import('knex-pglite')>('knex-pglite');
  let unlock = (): void => {};
  if (!inMemory) {
    fs.mkdirSync(dataDir, { recursive: true });
    // Here, while the router is built: a directory another process holds is refused at once.
    unlock = lockDataDirectory(dataDir);
  }
  const embedded = new EmbeddedPglite(startPglite(PGlite, dataDir, inMemory, logger), unlock);
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

/** `npm install` of the embedded database's packages, at the versions this package is tested with. */
export function pgliteInstallCommand(): string {
  const versions = ownManifest().devDependencies ?? {};
  return `npm install ${EMBEDDED_PACKAGES.map((name) => (versions[name] ? `${name}@${versions[name]}` : name)).join(' ')}`;
}

/** After this long, a first start says on stderr what it is doing (once). */
const SLOW_START_MS = 1_000;

/**
 * Opens PGlite on `dataDir`. A new database starts from the initdb template (lib/db/pglite-template.ts)
 * rather than running initdb here, which would cost seconds and hundreds of MB never given back;
 * if no template can be had, PGlite's own initdb runs, slowly, and a warning says why.
 */
async function startPglite(PGlite: typeof import('@electric-sql/pglite').PGlite, dataDir: string, inMemory: boolean, logger: Logger | undefined): Promise<PGlite> {
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
    return await startNewPglite(PGlite, startParams, dataDir, inMemory, logger);
  } finally {
    clearTimeout(slow);
  }
}

/** A new database: from the template, or from PGlite's own initdb where none can be had. */
async function startNewPglite(PGlite: typeof import('@electric-sql/pglite').PGlite, startParams: string[], dataDir: string, inMemory: boolean, logger: Logger | undefined): Promise<PGlite> {
  let entries: TarEntry[] | undefined;
  let tar: Buffer | undefined;
  try {
    tar = await loadPgliteTemplate({ keepUnpacked: inMemory });
    // A database in memory loads the tar whole (PGlite reads it); its entries matter on disk only.
    if (!inMemory) entries = readTar(tar);
  } catch (error) {
    logger?.warn({ err: error }, 'bcms-extensions: no PGlite template; PGlite runs initdb itself (seconds, and its memory stays taken)');
  }
  if (!inMemory) {
    const unexpected = fs.readdirSync(dataDir).filter((name) => name !== LOCK_FILE && !(entries && topLevelNames(entries).has(name)));
    if (unexpected.length > 0) {
      throw new Error(
        `the PGlite data directory ${dataDir} holds no database (no ${COMPLETE_MARK}) but other files (${unexpected.slice(0, 3).join(', ')}${unexpected.length > 3 ? ', ...' : ''}): ` +
          'give PGlite an empty or new directory of its own',
      );
    }
  }
  if (tar === undefined) return PGlite.create(dataDir, { startParams });
  if (inMemory) return PGlite.create(dataDir, { startParams, loadDataDir: new Blob([tar]) });
  if (entries === undefined) return PGlite.create(dataDir, { startParams });
  // What is there is a first start that did not finish (no PG_VERSION, only the template's names):
  // started again from the template.
  for (const name of fs.readdirSync(dataDir)) if (name !== LOCK_FILE) fs.rmSync(path.join(dataDir, name), { recursive: true, force: true });
  await extractTemplate(entries, dataDir);
  return PGlite.create(dataDir, { startParams });
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

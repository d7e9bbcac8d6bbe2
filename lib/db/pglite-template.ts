import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { PACKAGE_ROOT } from '../manifest';
import { MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE } from './migrate';

/**
 * PGlite's initdb takes seconds and grows its WebAssembly heap by hundreds of MB that the process
 * never gets back. So it runs once, in a child process that exits (giving that memory back), and
 * its result, a tarball of the freshly initialised, migrated and cleanly shut down cluster, is kept
 * as a template: a new data directory is a copy of it, and a `memory://` database starts on its
 * files, placed in PGlite's memory file system (connection.ts).
 *
 * The template is taken after our migrations (the package's own, nothing else: no table of a
 * host's, no row of anybody's but `bcms_migrations`' own bookkeeping): running them took 0.35-0.45 s
 * of every new database's start, a third of the time allowed. A database made from it is up to
 * date with the migrations it was made with, and later ones run on it as on any database.
 *
 * It ships in the package: `npm run build` makes it and compresses it with brotli (41 MB of mostly
 * empty pages become 2.2 MB of the tarball; unpacking takes 0.1-0.2 s), in `dist/pglite-template/`. An
 * installed package only reads it: nothing is ever written into `node_modules`.
 *
 * Which PGlite can open it is Postgres's own rule: a server opens a data directory made by the same
 * major version with the same catalog version (and the same page layout), whatever its minor
 * version. Every PGlite of the peer range `^0.5.14` (0.5.14 to 0.5.17, Postgres 18.6 and 18.7) makes
 * and opens `PG_18_202506291`, and each opens a directory the others made. So the shipped template
 * is named by that data version (`PG_<major>_<catalog version>`, the name Postgres gives each
 * tablespace's directory, read from the made directory's `PG_VERSION` and `global/pg_control`) and
 * by the migrations it holds, not by the PGlite version that happened to make it, and any PGlite
 * of the range starts from it. Postgres checks that version when it opens the directory: a PGlite
 * that refuses the shipped template (one outside the range, installed anyway) gets one made by
 * itself, as below, and the log says why.
 *
 * Where the shipped one does not fit (that, or a clone not built yet), one is made at the first
 * start, in this user's directory of the system's temporary directory, named by the PGlite version
 * that made it: never in a data directory, and never opened as one.
 */

/** The installed PGlite's version (its package.json): the name of a template it made. */
export function pgliteVersion(): string {
  const entry = require.resolve('@electric-sql/pglite');
  const manifest = path.join(path.dirname(entry), '..', 'package.json');
  return (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/**
 * The migrations a template holds, by name and content, and the script that makes it: a changed or
 * added migration, or another way of making it, makes a new template (and a new name for this
 * user's unpacked copy).
 */
function hashMigrations(): string {
  const hash = createHash('sha256').update(INITDB);
  for (const name of fs
    .readdirSync(MIGRATIONS_DIRECTORY)
    .filter((file) => file.endsWith('.js'))
    .sort()) {
    hash
      .update(`${name}\0`)
      .update(fs.readFileSync(path.join(MIGRATIONS_DIRECTORY, name)))
      .update('\0');
  }
  return hash.digest('hex').slice(0, 12);
}

let migrations: string | undefined;
/** Read once: hashing the migrations each time took 10 ms of every database's start. */
const migrationsKey = (): string => (migrations ??= hashMigrations());

/** Where the package ships its template (made by `npm run build`: buildShippedTemplate). */
export const SHIPPED_DIRECTORY = path.join(PACKAGE_ROOT, 'dist', 'pglite-template');
const SHIPPED_SUFFIX = '.tar.brotli-parts';
/** `pglite-PG_18_202506291-<migrations>.tar.brotli-parts`: the data version, then the migrations. */
const SHIPPED_NAME = /^pglite-(PG_\d+_\d+)-([0-9a-f]{12})\.tar\.brotli-parts$/;

/**
 * The data version of an initialised data directory, as Postgres names each tablespace's directory
 * (`TABLESPACE_VERSION_DIRECTORY`): `PG_<major>_<catalog version>`, from its `PG_VERSION` and the
 * catalog version in `global/pg_control`. A Postgres server opens the directory only when both
 * are its own. The control file begins with the system identifier (8 bytes), the control file's
 * version (4), then the catalog version (4), in the machine's byte order (WebAssembly's is little-endian).
 */
export function dataVersionOf(entries: TarEntry[]): string {
  const file = (name: string): Buffer => {
    const entry = entries.find((each) => each.name === name && !each.directory);
    if (entry === undefined) throw new Error(`the PGlite template has no ${name}: it is not a data directory`);
    return entry.data;
  };
  const major = file(COMPLETE_MARK).toString('utf8').trim();
  const control = file('global/pg_control');
  if (!/^\d+$/.test(major) || control.length < 16) throw new Error('the PGlite template has no readable PG_VERSION or global/pg_control');
  return `PG_${major}_${control.readUInt32LE(12)}`;
}

let shipped: string | null | undefined;
/**
 * The template the package ships for the current migrations, in brotli-compressed parts, or
 * undefined (a clone not built yet). Found by the migrations alone: whether the installed PGlite
 * opens its data version is Postgres's to say when it opens it (see connection.ts).
 */
export function shippedTemplate(): string | undefined {
  if (shipped === undefined) {
    const names = fs.existsSync(SHIPPED_DIRECTORY) ? fs.readdirSync(SHIPPED_DIRECTORY) : [];
    const found = names.filter((name) => SHIPPED_NAME.exec(name)?.[2] === migrationsKey()).sort();
    shipped = found.length === 0 ? null : path.join(SHIPPED_DIRECTORY, found[found.length - 1] as string);
  }
  return shipped ?? undefined;
}

/** `PG_18_202506291` of a shipped template's file name. */
export function shippedDataVersion(file: string): string | undefined {
  return SHIPPED_NAME.exec(path.basename(file))?.[1];
}

/**
 * The shipped file: one line of JSON, `{"parts":[<bytes>, ...],"sizes":[<bytes unpacked>, ...],"pglite":"<version that made it>"}`,
 * then that many brotli streams, each a slice of the tar in order. Parts, because brotli unpacks one
 * stream on one thread: four unpack at once in libuv's pool, on every core. Each is unpacked into
 * one buffer of its size: zlib's default 16 KB chunks made a fresh process's unpacking 2-3x slower
 * (0.44 s against 0.18 s, measured).
 */
const PARTS = 4;

function packParts(tar: Buffer, madeWith: string): Buffer {
  const size = Math.ceil(tar.length / PARTS);
  const slices = Array.from({ length: PARTS }, (_, i) => tar.subarray(i * size, (i + 1) * size));
  const parts = slices.map((slice) => zlib.brotliCompressSync(slice, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: slice.length } }));
  const header = { parts: parts.map((part) => part.length), sizes: slices.map((slice) => slice.length), pglite: madeWith };
  return Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), ...parts]);
}

async function unpackParts(packed: Buffer): Promise<Buffer> {
  const newline = packed.indexOf(0x0a);
  const header = newline === -1 ? undefined : (JSON.parse(packed.subarray(0, newline).toString('utf8')) as { parts?: unknown; sizes?: unknown });
  const lengths = (value: unknown): value is number[] => Array.isArray(value) && value.every((length) => Number.isInteger(length) && length >= 0);
  if (!lengths(header?.parts) || !lengths(header.sizes) || header.parts.length !== header.sizes.length) {
    throw new Error('the shipped PGlite template has no parts header: rebuild the package (npm run build)');
  }
  const sizes = header.sizes;
  let offset = newline + 1;
  const slices = header.parts.map((length) => {
    const slice = packed.subarray(offset, offset + length);
    offset += length;
    return slice;
  });
  return Buffer.concat(await Promise.all(slices.map((slice, i) => promisify(zlib.brotliDecompress)(slice, { chunkSize: Math.max(sizes[i] ?? 0, 64 * 1024) }))));
}

/** The PGlite version that made a shipped template (its header's `pglite`), or undefined. */
function madeWithOf(file: string): string | undefined {
  let handle: number | undefined;
  try {
    handle = fs.openSync(file, 'r');
    const head = Buffer.alloc(1024);
    const line = head.subarray(0, fs.readSync(handle, head, 0, head.length, 0));
    const newline = line.indexOf(0x0a);
    const header = newline === -1 ? undefined : (JSON.parse(line.subarray(0, newline).toString('utf8')) as { pglite?: unknown });
    return typeof header?.pglite === 'string' ? header.pglite : undefined;
  } catch {
    return undefined;
  } finally {
    if (handle !== undefined) fs.closeSync(handle);
  }
}

/** This user's directory of templates in the system's temporary directory: never the package's folder. */
function userTemplateDirectory(): string {
  const uid = typeof process.getuid === 'function' ? String(process.getuid()) : 'user';
  return path.join(os.tmpdir(), `bcms-extensions-${uid}`);
}

/** Where this user keeps the shipped template unpacked (for `memory://` loads): named as the shipped file, less `.brotli-parts`. */
export function cachedTemplate(shippedFile = shippedTemplate()): string | undefined {
  return shippedFile === undefined ? undefined : path.join(userTemplateDirectory(), path.basename(shippedFile, '.brotli-parts'));
}

/** Where a template is made at run time when the shipped one is missing or refused: named by the PGlite version that makes it. */
export function madeTemplate(): string {
  return path.join(userTemplateDirectory(), `pglite-${pgliteVersion()}-${migrationsKey()}.tar`);
}

/** Where a template may be found: the shipped one, this user's unpacked copy of it, and the one made by the installed PGlite. */
export interface TemplatePlaces {
  shipped: string | undefined;
  cached: string | undefined;
  made: string;
}

export function templatePlaces(): TemplatePlaces {
  const shippedFile = shippedTemplate();
  return { shipped: shippedFile, cached: cachedTemplate(shippedFile), made: madeTemplate() };
}

/**
 * A template's tar, its entries (views into it), and where it came from: the shipped one (made by
 * the PGlite of the build), this user's unpacked copy of it (`kept`), or one the installed PGlite made.
 */
export interface LoadedTemplate {
  tar: Buffer;
  entries: TarEntry[];
  from: 'shipped' | 'kept' | 'made';
}

/**
 * The template's tar. One the installed PGlite made for this user comes first: it exists only
 * where the shipped one was missing or refused. Then the shipped one: a first start on disk unpacks
 * it in memory (once: it then has its data directory). `inMemory` (for `memory://` databases, which
 * load it each time: a test suite opens dozens) gives it as a database in memory loads it (its WAL
 * cut: cutWal), first reads this user's unpacked copy of that in the temporary directory (unless
 * `unpack`: that copy did not open), and keeps one there after unpacking, so that later loads skip
 * the 0.2-0.5 s of brotli. With no shipped
 * template (a clone not built yet), or `made` (the shipped one was refused by the installed
 * PGlite), one is made for this user in that directory (first, in a child process, about 5 s). A
 * copy there that is not whole (a crash while writing it, a stray file) is deleted and made or
 * unpacked again. Rejects when none can be had. Each call reads or unpacks a tar of its own: a
 * database in memory may take its memory over (see connection.ts).
 */
export async function loadPgliteTemplate(options: { inMemory?: boolean; made?: boolean; unpack?: boolean } = {}, places: TemplatePlaces = templatePlaces()): Promise<LoadedTemplate> {
  const loaded = (whole: { tar: Buffer; entries: TarEntry[] }, from: LoadedTemplate['from']): LoadedTemplate => {
    if (!options.inMemory) return { ...whole, from };
    const tar = cutWal(whole.tar, whole.entries);
    return { tar, entries: tar === whole.tar ? whole.entries : readTar(tar), from };
  };
  const own = await readWholeTemplate(places.made);
  if (own !== undefined) return loaded(own, 'made');
  if (!options.made && places.shipped !== undefined) {
    if (options.inMemory && !options.unpack && places.cached !== undefined) {
      const kept = await readWholeTemplate(places.cached);
      if (kept !== undefined) return loaded(kept, 'kept');
    }
    const packed = await fs.promises.readFile(places.shipped).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (packed !== undefined) {
      const tar = await unpackParts(packed);
      const template = loaded({ tar, entries: readTar(tar) }, 'shipped');
      // A copy: the database in memory takes this tar's memory over and writes into it while the
      // copy is written out (a kept copy written from it held pages of a running database).
      if (options.inMemory && places.cached !== undefined) keep(places.cached, Buffer.from(template.tar));
      return template;
    }
  }
  const made = (await readWholeTemplate(await ensureTemplate(places.made))) ?? (await readWholeTemplate(await ensureTemplate(places.made)));
  if (made === undefined) throw new Error(`the PGlite template made in ${path.dirname(places.made)} cannot be read back as a whole data directory`);
  return loaded(made, 'made');
}

/** `file` and its entries when it is this user's, in a directory of this user's, and a whole template; else undefined, and a torn one deleted. */
async function readWholeTemplate(file: string): Promise<{ tar: Buffer; entries: TarEntry[] } | undefined> {
  const tar = await readOwnFile(file);
  if (tar === undefined) return undefined;
  try {
    const entries = readTar(tar);
    if (entries.some((entry) => entry.name === COMPLETE_MARK)) return { tar, entries };
  } catch {
    // Not a whole tar: deleted below.
  }
  await fs.promises.rm(file, { force: true });
  return undefined;
}

/**
 * The bytes of `file` if nobody else could have put them there: its directory is this user's and
 * writable by no one else (isOurs), and the file itself, opened without following a symbolic link,
 * is a plain file of this user's that no one else may write.
 */
async function readOwnFile(file: string): Promise<Buffer | undefined> {
  if (!isOurs(path.dirname(file))) return undefined;
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch {
    return undefined; // not there, or a link
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile() || (typeof process.getuid === 'function' && (stat.uid !== process.getuid() || (stat.mode & 0o022) !== 0))) return undefined;
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/** Deletes this user's unpacked copy (one PGlite would not open), so that the next load unpacks the shipped one again. */
export async function forgetKept(places: TemplatePlaces = templatePlaces()): Promise<void> {
  if (places.cached !== undefined && isOurs(path.dirname(places.cached))) await fs.promises.rm(places.cached, { force: true });
}

const keeping = new Set<string>();

/**
 * Writes `tar` to `target` in the background, once per process: into a file of its own beside it,
 * synced, then renamed onto it, so a reader never sees half of one. Copies of other PGlite versions
 * or migrations are deleted. A failure (a full or read-only disk) is left: the next load unpacks again.
 */
function keep(target: string, tar: Buffer): void {
  if (keeping.has(target)) return;
  keeping.add(target);
  const dir = path.dirname(target);
  const write = async (): Promise<void> => {
    await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
    if (!isOurs(dir)) return;
    const temporary = path.join(dir, `.${path.basename(target)}.${randomBytes(6).toString('hex')}.partial`);
    const handle = await fs.promises.open(temporary, 'wx', 0o644);
    try {
      await handle.writeFile(tar);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.promises.rename(temporary, target);
    for (const old of await fs.promises.readdir(dir)) {
      if (/^pglite-.*\.tar$/.test(old) && old !== path.basename(target)) await fs.promises.rm(path.join(dir, old), { force: true });
    }
  };
  write().catch(() => {});
}

const making = new Map<string, Promise<string>>();

/** `target`, made first when it is not there (one maker per target in this process). */
export function ensureTemplate(target: string): Promise<string> {
  if (fs.existsSync(target) && isOurs(path.dirname(target))) return Promise.resolve(target);
  let pending = making.get(target);
  if (pending === undefined) {
    pending = makeTemplate([target]).finally(() => making.delete(target));
    making.set(target, pending);
  }
  return pending;
}

/**
 * For `npm run build`: makes the template (in the temporary directory) with the PGlite this
 * package is built with, and writes it compressed where the package ships it, named by its data
 * version. A shipped template of the current migrations made by that same PGlite is kept as it is.
 */
export async function buildShippedTemplate(): Promise<string> {
  const existing = shippedTemplate();
  if (existing !== undefined && madeWithOf(existing) === pgliteVersion()) return existing;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-extensions-template-'));
  try {
    const tar = fs.readFileSync(await makeTemplate([path.join(work, 'template.tar')]));
    const target = path.join(SHIPPED_DIRECTORY, `pglite-${dataVersionOf(readTar(tar))}-${migrationsKey()}${SHIPPED_SUFFIX}`);
    fs.mkdirSync(SHIPPED_DIRECTORY, { recursive: true });
    fs.writeFileSync(`${target}.partial`, packParts(tar, pgliteVersion()));
    fs.renameSync(`${target}.partial`, target);
    // Templates of other data versions or migrations are of no more use here.
    for (const old of fs.readdirSync(SHIPPED_DIRECTORY)) if (old !== path.basename(target)) fs.rmSync(path.join(SHIPPED_DIRECTORY, old), { force: true });
    shipped = target;
    return target;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

// Runs in the child: PGlite's own initdb into a directory, our migrations (knex's, as migrate()
// runs them), one more query (so Postgres writes its relation cache files, which the first query of
// every database made from the template then reads instead of building), and a clean close: a
// shut-down cluster starts without crash recovery. Before the close, the WAL moves to a new segment
// and a checkpoint makes the old one useless: initdb's and the migrations' 8 MB of WAL would be
// copied into every new database (and written to disk on every first start) for nothing. Postgres
// keeps the old segment as a spare under a later name, which is removed; then the directory is
// opened once more, as every database made from it will be.
const INITDB = `
const [pglite, knexModule, knexPglite, dir, directory, tableName] = process.argv.slice(1);
const fs = require('node:fs');
const path = require('node:path');
(async () => {
  const { PGlite } = require(pglite);
  const db = await PGlite.create(dir);
  const knex = require(knexModule)({ client: require(knexPglite), connection: { pglite: db } });
  await knex.migrate.latest({ directory, tableName, loadExtensions: ['.js'] });
  await knex.raw('select count(*) from pg_class');
  await knex.raw('select pg_switch_wal()');
  await knex.raw('checkpoint');
  const { rows } = await knex.raw('select pg_walfile_name(pg_current_wal_insert_lsn()) as segment');
  const segment = rows[0].segment;
  await knex.destroy();
  if (!db.closed) await db.close();
  for (const name of fs.readdirSync(path.join(dir, 'pg_wal'))) {
    if (/^[0-9A-F]{24}$/.test(name) && name !== segment) fs.rmSync(path.join(dir, 'pg_wal', name));
  }
  const check = await PGlite.create(dir);
  await check.query('select count(*) from ' + tableName);
  await check.close();
})().catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
`;

/**
 * A template is loaded as a database, so only one kept where nobody else could have put it is used:
 * a directory of this user's, writable by no one else (the temporary directory is everybody's), and
 * not a symbolic link (which anybody may leave in the temporary directory, pointing anywhere).
 */
function isOurs(dir: string): boolean {
  if (typeof process.getuid !== 'function') return true;
  const stat = fs.lstatSync(dir, { throwIfNoEntry: false });
  return stat?.isDirectory() === true && stat.uid === process.getuid() && (stat.mode & 0o022) === 0;
}

/** Makes the template in the first of `candidates` that can be written (exported for the tests). */
export async function makeTemplate(candidates: string[]): Promise<string> {
  const failures: string[] = [];
  for (const target of candidates) {
    let work: string;
    try {
      fs.mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
      if (!isOurs(path.dirname(target))) throw new Error('owned by another user, or writable by others');
      work = fs.mkdtempSync(`${target}.work-`);
    } catch (error) {
      failures.push(`${path.dirname(target)}: ${(error as Error).message}`);
      continue;
    }
    try {
      const dir = path.join(work, 'data');
      await new Promise<void>((resolve, reject) => {
        // Plain Node: no --experimental-vm-modules or debugger flags from a test runner.
        const env = { ...process.env, NODE_OPTIONS: '' };
        const args = [require.resolve('@electric-sql/pglite'), require.resolve('knex'), require.resolve('knex-pglite'), dir, MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE];
        execFile(process.execPath, ['-e', INITDB, ...args], { env, maxBuffer: 16 * 1024 * 1024 }, (error, _stdout, stderr) => {
          if (error) reject(new Error(`PGlite's initdb for the template failed: ${stderr.trim().slice(-2000) || error.message}`));
          else resolve();
        });
      });
      if (!fs.existsSync(path.join(dir, COMPLETE_MARK))) throw new Error(`PGlite's initdb for the template left no ${COMPLETE_MARK}`);
      // Written beside the target and renamed onto it: a reader (another process making it at the
      // same moment, too) never sees half a file.
      const temporary = path.join(work, 'template.tar');
      const fd = fs.openSync(temporary, 'w', 0o644);
      try {
        fs.writeSync(fd, writeTar(dir));
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(temporary, target);
      // Templates of other PGlite versions or migrations are of no more use here.
      for (const old of fs.readdirSync(path.dirname(target))) {
        if (/^pglite-.*\.tar$/.test(old) && old !== path.basename(target)) fs.rmSync(path.join(path.dirname(target), old), { force: true });
      }
      return target;
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }
  throw new Error(`no place to keep the PGlite template (${failures.join('; ')})`);
}

/** A ustar header block. */
function tarHeader(name: string, mode: number, size: number, mtime: number, type: '0' | '5'): Buffer {
  const block = Buffer.alloc(512);
  let prefix = '';
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100) throw new Error(`a path too long for the PGlite template: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  block.write(base, 0, 100, 'utf8');
  block.write(`${(mode & 0o7777).toString(8).padStart(7, '0')}\0`, 100);
  block.write('0000000\0', 108); // uid
  block.write('0000000\0', 116); // gid
  block.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  block.write(
    `${Math.floor(mtime / 1000)
      .toString(8)
      .padStart(11, '0')}\0`,
    136,
  );
  block.write('        ', 148); // the checksum counts itself as spaces
  block.write(type, 156);
  block.write('ustar\0', 257);
  block.write('00', 263);
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return block;
}

/** A ustar archive of `entries`, in their order. */
export function packTar(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    blocks.push(tarHeader(entry.name, entry.mode, entry.directory ? 0 : entry.data.length, entry.mtime, entry.directory ? '5' : '0'));
    if (entry.directory) continue;
    blocks.push(entry.data);
    if (entry.data.length % 512 !== 0) blocks.push(Buffer.alloc(512 - (entry.data.length % 512)));
  }
  blocks.push(Buffer.alloc(1024)); // two zero blocks end the archive
  return Buffer.concat(blocks);
}

/** A ustar archive of `dir`'s directories and plain files, names relative to it (as `loadDataDir` reads them). */
export function writeTar(dir: string): Buffer {
  const entries: TarEntry[] = [];
  const walk = (relative: string): void => {
    for (const name of fs.readdirSync(path.join(dir, relative)).sort()) {
      const child = relative === '' ? name : `${relative}/${name}`;
      const stat = fs.statSync(path.join(dir, child));
      if (stat.isDirectory()) {
        entries.push({ name: child, directory: true, mode: stat.mode, mtime: stat.mtimeMs, data: Buffer.alloc(0) });
        walk(child);
      } else if (stat.isFile()) {
        entries.push({ name: child, directory: false, mode: stat.mode, mtime: stat.mtimeMs, data: fs.readFileSync(path.join(dir, child)) });
      }
    }
  };
  walk('');
  return packTar(entries);
}

/** Postgres's WAL page (XLOG_BLCKSZ) and a WAL segment's name in a data directory. */
const WAL_PAGE = 8192;
const WAL_SEGMENT = /^pg_wal\/[0-9A-F]{24}$/;

/**
 * The template as a database in memory loads it: each WAL segment cut after its last written page
 * and one empty one. The template's one segment holds a few KB of WAL (its last checkpoints: see
 * INITDB) in 16 MB of zeros, 40% of the tar, which every `memory://` start read from this user's
 * copy and kept in PGlite's memory file system for nothing (the copy: 41 MB before, 24.5 MB
 * after). A file cut short is what Postgres meets past the end of WAL anyway: a read there finds
 * no record, and a write there extends the file (a test writes across segments). On disk,
 * segments keep their full size (written sparse).
 */
export function cutWal(tar: Buffer, entries = readTar(tar)): Buffer {
  let cut = false;
  const kept = entries.map((entry) => {
    if (entry.directory || !WAL_SEGMENT.test(entry.name)) return entry;
    let end = entry.data.length;
    while (end > 0 && entry.data[end - 1] === 0) end--;
    const length = Math.min(entry.data.length, (Math.ceil(end / WAL_PAGE) + 1) * WAL_PAGE);
    if (length === entry.data.length) return entry;
    cut = true;
    return { ...entry, data: entry.data.subarray(0, length) };
  });
  return cut ? packTar(kept) : tar;
}

export interface TarEntry {
  /** Relative, `/`-separated, never absolute and never with `..`. */
  readonly name: string;
  readonly directory: boolean;
  readonly mode: number;
  /** Milliseconds since the epoch (a tar keeps seconds). */
  readonly mtime: number;
  readonly data: Buffer;
}

/**
 * The entries of an uncompressed tar (ustar, as PGlite's `dumpDataDir` writes it). Anything else
 * (a link, an extended header, a name that climbs out) is refused: the template is a data
 * directory of plain files and directories, and a tar that is not one is not ours.
 */
export function readTar(tar: Buffer): TarEntry[] {
  const entries: TarEntry[] = [];
  const text = (from: number, length: number) => {
    const field = tar.subarray(from, from + length);
    const end = field.indexOf(0);
    return field.subarray(0, end === -1 ? length : end).toString('utf8');
  };
  const octal = (from: number, length: number) => {
    const value = text(from, length).trim();
    if (!/^[0-7]+$/.test(value)) throw new Error(`not a tar: bad number "${value}" at byte ${from}`);
    return parseInt(value, 8);
  };
  let offset = 0;
  let ended = false;
  while (offset + 512 <= tar.length) {
    if (tar.subarray(offset, offset + 512).every((byte) => byte === 0)) {
      ended = true; // end of archive
      break;
    }
    const prefix = text(offset + 345, 155);
    const name = (prefix ? `${prefix}/` : '') + text(offset, 100);
    const size = octal(offset + 124, 12);
    const type = String.fromCharCode(tar[offset + 156] ?? 0);
    const relative = name.split('/').filter((part) => part !== '' && part !== '.');
    if (relative.length === 0 || relative.includes('..')) throw new Error(`not a data directory tar: entry "${name}"`);
    const start = offset + 512;
    if (start + size > tar.length) throw new Error(`not a tar: entry "${name}" runs past the end`);
    const mtime = octal(offset + 136, 12) * 1000;
    if (type === '5') entries.push({ name: relative.join('/'), directory: true, mode: octal(offset + 100, 8), mtime, data: Buffer.alloc(0) });
    else if (type === '0' || type === '\0') entries.push({ name: relative.join('/'), directory: false, mode: octal(offset + 100, 8), mtime, data: tar.subarray(start, start + size) });
    else throw new Error(`not a data directory tar: entry "${name}" has type "${type}"`);
    offset = start + Math.ceil(size / 512) * 512;
  }
  // A tar cut short (a crash while it was written) may end at an entry's boundary: whole ones end in zero blocks.
  if (!ended) throw new Error('not a whole tar: it has no end-of-archive block');
  return entries;
}

/** The file that says a data directory is complete: Postgres's own, written last. */
export const COMPLETE_MARK = 'PG_VERSION';

/**
 * Writes the template's files into `dir`. `PG_VERSION` goes last, so a crash part-way leaves a
 * directory that is recognisably unfinished (no PG_VERSION, only the template's names: see
 * topLevelNames) rather than a broken database.
 * The directories first, then the files, eight at a time: a thousand small files written one after
 * another took 0.42 s here, most of it waiting on each system call; eight at once, 0.16 s.
 */
export async function extractTemplate(entries: TarEntry[], dir: string): Promise<void> {
  const marks = entries.filter((entry) => entry.name === COMPLETE_MARK);
  const mark = marks[0];
  if (mark === undefined || marks.length !== 1) throw new Error(`the PGlite template has no ${COMPLETE_MARK}: it is not a data directory`);
  const target = (entry: TarEntry) => path.join(dir, ...entry.name.split('/'));
  for (const entry of entries) fs.mkdirSync(entry.directory ? target(entry) : path.dirname(target(entry)), { recursive: true, mode: 0o700 });
  const files = entries.filter((entry) => !entry.directory && entry.name !== COMPLETE_MARK);
  let next = 0;
  const writer = async (): Promise<void> => {
    for (let entry = files[next++]; entry !== undefined; entry = files[next++]) {
      await writeSparse(target(entry), entry.data, entry.mode & 0o777 || 0o600);
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));
  await writeSparse(target(mark), mark.data, mark.mode & 0o777 || 0o600);
}

/**
 * Writes `data` up to its last non-zero byte and extends the file to its full size without writing
 * the zeros: the 16 MB WAL segment is almost all zeros, and writing it was most of a first start's
 * copying time. Postgres reads the unwritten part as the zeros it is.
 */
async function writeSparse(target: string, data: Buffer, mode: number): Promise<void> {
  let end = data.length;
  while (end > 0 && data[end - 1] === 0) end--;
  const handle = await fs.promises.open(target, 'w', mode);
  try {
    let written = 0;
    while (written < end) written += (await handle.write(data, written, end - written, written)).bytesWritten;
    if (end < data.length) await handle.truncate(data.length);
  } finally {
    await handle.close();
  }
}

/** Top-level names a first start writes: a directory holding only these is one that did not finish. */
export function topLevelNames(entries: TarEntry[]): Set<string> {
  return new Set(entries.map((entry) => entry.name.split('/', 1)[0] as string));
}

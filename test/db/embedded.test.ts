import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { MIGRATIONS_TABLE } from '../../lib';
import { openDatabase } from '../../lib/db/connection';
import { memoryLogger } from '../support/app';
import { LOCK_FILE } from '../../lib/db/pglite-lock';
import { cachedTemplate, cutWal, dataVersionOf, loadPgliteTemplate, makeTemplate, readTar, shippedDataVersion, shippedTemplate, writeTar, type TemplatePlaces } from '../../lib/db/pglite-template';
import { until } from '../support/wait';

// The embedded database (PGlite): a new one starts from the template, one data directory has one
// owner, and what a write acknowledged survives the process being killed. Processes of their own
// run the built package (test/support/embedded-server.js), as a host runs it.
const SERVER = path.join(__dirname, '..', 'support', 'embedded-server.js');
const newDir = (label: string) => fs.mkdtempSync(path.join(os.tmpdir(), `bcms-embedded-${label}-`));
const migrationNames = () =>
  fs
    .readdirSync(path.join(__dirname, '..', '..', 'migrations'))
    .filter((name) => name.endsWith('.js'))
    .sort();

interface Service {
  child: ChildProcess;
  port: number;
  exited: Promise<number | string | null>;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Starts the service on `dir`; resolves once it listens, rejects with what it printed if it cannot start. */
function startService(dir: string): Promise<Service> {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' };
  delete env.DATABASE_URL;
  const child = spawn(process.execPath, [SERVER, dir], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      output += chunk;
      const port = /listening (\d+)/.exec(output)?.[1];
      if (port) resolve({ child, port: Number(port), exited });
    });
    child.stderr!.on('data', (chunk) => (output += chunk));
    void exited.then(() => reject(new Error(output.trim())));
  });
}

async function addTemplate(port: number, name: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/api/function/add`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name }) });
  await res.arrayBuffer();
  return res.status;
}

async function templateNames(dir: string): Promise<string[]> {
  const database = openDatabase({ pglite: dir });
  try {
    return (await database.knex('bcms_templates').select('name')).map((row: { name: string }) => row.name);
  } finally {
    await database.close();
  }
}

describe('a new embedded database', () => {
  test('memory://: made from the template, migrated, and a database of its own each time', async () => {
    const first = openDatabase({ pglite: 'memory://' });
    const second = openDatabase({ pglite: 'memory://' });
    try {
      const applied = (await first.knex(MIGRATIONS_TABLE).select('name').orderBy('id')).map((row: { name: string }) => row.name);
      expect(applied).toEqual(migrationNames());
      await first.knex('bcms_templates').insert({ name: 'only-in-first' });
      expect(await second.knex('bcms_templates').count({ n: '*' })).toEqual([{ n: 0 }]);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });

  test('on disk: the template copied into the directory (PG_VERSION last), locked while open, unlocked by close()', async () => {
    const dir = newDir('disk');
    const database = openDatabase({ pglite: dir });
    expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(true);
    await database.knex.raw('select 1');
    expect(fs.readFileSync(path.join(dir, 'PG_VERSION'), 'utf8').trim()).toMatch(/^\d+$/);
    expect(await database.knex('bcms_templates').count({ n: '*' })).toEqual([{ n: 0 }]);
    await database.close();
    expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(false);
  });

  test('a first start that stopped half-way (template files, no PG_VERSION) is started afresh', async () => {
    const dir = newDir('half');
    const template = readTar((await loadPgliteTemplate()).tar);
    // As a crash during the copy leaves it: some of the template's files, not PG_VERSION.
    fs.mkdirSync(path.join(dir, 'base', '5'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'base', '5', '1259'), 'torn');
    expect(template.some((entry) => entry.name === 'base/5/1259')).toBe(true);
    expect(await templateNames(dir)).toEqual([]);
  });

  test('a directory holding other files and no database is refused, and nothing in it is touched', async () => {
    const dir = newDir('foreign');
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'mine');
    const database = openDatabase({ pglite: dir }, {}, memoryLogger().logger);
    await expect(database.knex.raw('select 1')).rejects.toThrow(
      `the PGlite data directory ${dir} holds no database (no PG_VERSION) but other files (notes.txt): give PGlite an empty or new directory of its own`,
    );
    await database.close();
    expect(fs.readdirSync(dir)).toEqual(['notes.txt']);
  });
});

describe('one data directory, one owner', () => {
  test('a second router in this process is refused at once, naming the directory', async () => {
    const dir = newDir('twice');
    const database = openDatabase({ pglite: dir });
    expect(() => openDatabase({ pglite: dir })).toThrow(`the PGlite data directory ${dir} is in use by another router of this process (close it first: router.close())`);
    await database.close();
    const again = openDatabase({ pglite: dir });
    await again.close();
  });

  test('a second process is refused with an error naming the first; once that one is killed, the directory opens', async () => {
    const dir = newDir('two-processes');
    const first = await startService(dir);
    await expect(startService(dir)).rejects.toThrow(
      `failed the PGlite data directory ${dir} is in use by process ${first.child.pid}: an embedded database has one owner at a time. Stop that one, or give this one another directory (or a Postgres server through DATABASE_URL)`,
    );
    expect(() => openDatabase({ pglite: dir })).toThrow(`is in use by process ${first.child.pid}`);
    // Killed, it leaves its lock file behind: a lock whose process is gone is taken over.
    first.child.kill('SIGKILL');
    await first.exited;
    expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(true);
    const second = await startService(dir);
    expect(await addTemplate(second.port, 'after-takeover')).toBe(200);
    second.child.kill('SIGTERM');
    await second.exited;
  }, 60_000);
});

describe('a killed process', () => {
  test('SIGKILL under load loses no write that was acknowledged', async () => {
    const dir = newDir('crash');
    const service = await startService(dir);
    const acknowledged: string[] = [];
    let stop = false;
    // Four writers add templates one after another until the process dies under them.
    const writers = Array.from({ length: 4 }, async (_, writer) => {
      for (let i = 0; !stop; i++) {
        const name = `w${writer}-${i}`;
        try {
          if ((await addTemplate(service.port, name)) === 200) acknowledged.push(name);
        } catch {
          return; // the connection died with the process
        }
      }
    });
    // Under load, once some writes were acknowledged (however long that takes on a loaded machine).
    await until(() => acknowledged.length > 20, 10);
    service.child.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    expect(await service.exited).toBe('SIGKILL');
    expect(acknowledged.length).toBeGreaterThan(20);

    const stored = new Set(await templateNames(dir));
    expect(acknowledged.filter((name) => !stored.has(name))).toEqual([]);
  }, 60_000);
});

describe('the template', () => {
  test('made by two processes at once, where the first places cannot be used: one whole template in the next', async () => {
    const blocked = path.join(newDir('blocked'), 'a-file');
    fs.writeFileSync(blocked, '');
    // Writable by anybody: a template there could have been put by anybody, so none is made there.
    const open = newDir('everybody');
    fs.chmodSync(open, 0o777);
    const target = path.join(newDir('template'), 'pglite-test.tar');
    const candidates = [path.join(blocked, 'x.tar'), path.join(open, 'x.tar'), target];
    // Two makers at once, as two test files on a fresh clone: each writes beside the target and renames.
    const made = await Promise.all([makeTemplate(candidates), makeTemplate(candidates)]);
    expect(made).toEqual([target, target]);
    expect(fs.readdirSync(open)).toEqual([]);
    expect(fs.readdirSync(path.dirname(target))).toEqual(['pglite-test.tar']);
    const db = await PGlite.create('memory://', { loadDataDir: new Blob([fs.readFileSync(target)]) });
    expect((await db.query<{ name: string }>(`select name from ${MIGRATIONS_TABLE} order by id`)).rows.map((row) => row.name)).toEqual(migrationNames());
    await db.close();
  }, 120_000);

  test('the shipped template is named by the data version it holds, the one the installed PGlite makes and opens', async () => {
    const shipped = shippedTemplate()!;
    expect(path.basename(shipped)).toMatch(/^pglite-PG_\d+_\d+-[0-9a-f]{12}\.tar\.brotli-parts$/);
    const tar = (await loadPgliteTemplate({}, { shipped, cached: undefined, made: path.join(newDir('none'), 'none.tar') })).tar;
    expect(dataVersionOf(readTar(tar))).toBe(shippedDataVersion(shipped));
    // Postgres's own name for it: the directory it gives each tablespace, from the running server.
    const db = await PGlite.create('memory://', { loadDataDir: new Blob([tar]) });
    const { rows } = await db.query<{ major: string; catalog: number }>("select current_setting('server_version_num')::int / 10000 as major, catalog_version_no as catalog from pg_control_system()");
    await db.close();
    expect(shippedDataVersion(shipped)).toBe(`PG_${rows[0]!.major}_${rows[0]!.catalog}`);
  });

  describe("this user's copies (memory:// loads, and templates made here)", () => {
    const work: string[] = [];
    afterAll(() => {
      for (const dir of work) fs.rmSync(dir, { recursive: true, force: true });
    });
    /** A new directory of this user's (0700), with the places a template may be found in it: the shipped one stays the package's. */
    const cacheIn = (label: string): TemplatePlaces & { dir: string; cached: string } => {
      const parent = newDir(label);
      work.push(parent);
      const dir = path.join(parent, 'user');
      fs.mkdirSync(dir, { mode: 0o700 });
      return { dir, shipped: shippedTemplate(), cached: path.join(dir, 'pglite-test.tar'), made: path.join(dir, 'pglite-made.tar') };
    };
    const written = async (file: string) => {
      await until(() => fs.existsSync(file), 20);
      return fs.readFileSync(file);
    };

    test('the shipped template is unpacked in memory; the copy is kept only when asked, and read from then on', async () => {
      const places = cacheIn('cache');
      const once = await loadPgliteTemplate({}, places);
      expect(once.from).toBe('shipped');
      expect(readTar(once.tar).some((entry) => entry.name === 'PG_VERSION')).toBe(true);
      expect(fs.existsSync(places.cached)).toBe(false);
      const kept = await loadPgliteTemplate({ inMemory: true }, places);
      expect(kept.tar.equals(cutWal(once.tar))).toBe(true);
      expect((await written(places.cached)).equals(kept.tar)).toBe(true);
      // The next load reads the kept copy: no shipped template needed any more.
      const again = await loadPgliteTemplate({ inMemory: true }, { ...places, shipped: path.join(places.dir, 'none.tar.brotli-parts') });
      expect([again.from, again.tar.equals(kept.tar)]).toEqual(['kept', true]);
      // Named as the shipped file, in this user's directory of the temporary directory.
      expect(path.basename(cachedTemplate()!)).toBe(path.basename(shippedTemplate()!, '.brotli-parts'));
    });

    test('one the installed PGlite made comes first; refused, the shipped one is passed over and one made', async () => {
      const places = cacheIn('made');
      const shipped = (await loadPgliteTemplate({}, places)).tar;
      // As after the installed PGlite refused the shipped template: no shipped one is read, one is made here.
      const made = await loadPgliteTemplate({ inMemory: true, made: true }, places);
      expect(made.from).toBe('made');
      expect(fs.readdirSync(places.dir)).toEqual(['pglite-made.tar']);
      expect(made.tar.equals(cutWal(fs.readFileSync(places.made)))).toBe(true);
      // A data directory of its own making: another system identifier (the control file's first 8 bytes) than the shipped one's.
      const identifier = (tar: Buffer) =>
        readTar(tar)
          .find((entry) => entry.name === 'global/pg_control')!
          .data.subarray(0, 8)
          .toString('hex');
      expect(identifier(made.tar)).not.toBe(identifier(shipped));
      // From then on it is the one loaded, the shipped one there or not.
      const next = await loadPgliteTemplate({ inMemory: true }, places);
      expect([next.from, next.tar.equals(made.tar)]).toEqual(['made', true]);
    }, 120_000);

    test("the copy kept is the template's, not the pages of the database that started from it while the copy was written", async () => {
      const tmp = newDir('kept-race');
      work.push(tmp);
      const good = (await loadPgliteTemplate({ inMemory: true }, { shipped: shippedTemplate(), cached: undefined, made: path.join(tmp, 'none.tar') })).tar;
      // Writes at once, while the unpacked template is written out in the background.
      const script = `const { openDatabase } = require(${JSON.stringify(path.join(__dirname, '..', '..', 'dist', 'db', 'connection.js'))});
const database = openDatabase({ pglite: 'memory://' });
database.knex.raw("create table busy as select g, repeat(md5(g::text), 4) as body from generate_series(1, 20000) g").then(async () => { await database.knex.raw('checkpoint'); await database.close(); console.log('done'); });`;
      const result = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, TMPDIR: tmp, NODE_OPTIONS: '' }, encoding: 'utf8' });
      expect([result.status, result.stdout.trim()]).toEqual([0, 'done']);
      expect((await written(path.join(tmp, `bcms-extensions-${process.getuid!()}`, path.basename(cachedTemplate()!)))).equals(good)).toBe(true);
    }, 60_000);

    test('a whole copy that PGlite does not open is set aside with a warning: the shipped one is unpacked and kept again', async () => {
      // In a process of its own (the built package), whose temporary directory is the test's.
      const tmp = newDir('kept-bad');
      work.push(tmp);
      const dir = path.join(tmp, `bcms-extensions-${process.getuid!()}`);
      fs.mkdirSync(dir, { mode: 0o700 });
      const cached = path.join(dir, path.basename(cachedTemplate()!));
      // A whole tar, but of a data directory Postgres refuses (as a copy damaged in place would be).
      const good = (await loadPgliteTemplate({ inMemory: true }, { shipped: shippedTemplate(), cached: undefined, made: path.join(dir, 'none.tar') })).tar;
      const bad = Buffer.from(good);
      readTar(bad)
        .find((entry) => entry.name === 'PG_VERSION')!
        .data.write('17');
      fs.writeFileSync(cached, bad, { mode: 0o644 });
      const script = `const { openDatabase } = require(${JSON.stringify(path.join(__dirname, '..', '..', 'dist', 'db', 'connection.js'))});
const say = (fields, message) => console.log('warn: ' + message);
const logger = { info() {}, debug() {}, error: say, warn: say, child: () => logger };
const database = openDatabase({ pglite: 'memory://' }, {}, logger);
database.knex('bcms_templates').count({ n: '*' }).then(async (rows) => { console.log(JSON.stringify(rows)); await database.close(); });`;
      const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp, NODE_OPTIONS: '' };
      const result = spawnSync(process.execPath, ['-e', script], { env, encoding: 'utf8' });
      expect([result.status, result.stdout.trim().split('\n')]).toEqual([
        0,
        ["warn: bcms-extensions: this user's unpacked copy of the PGlite template did not open; it is unpacked again", '[{"n":0}]'],
      ]);
      expect((await written(cached)).equals(good)).toBe(true);
    }, 60_000);

    test('a copy cut short (at an entry boundary, PG_VERSION in it) or empty is deleted, and the shipped one used and kept again', async () => {
      const whole = (await loadPgliteTemplate({ inMemory: true }, cacheIn('unused'))).tar;
      const entries = readTar(whole);
      expect(entries.findIndex((entry) => entry.name === 'PG_VERSION')).toBeLessThan(entries.length / 2);
      // The first half of the entries: whole headers and data, then nothing (no end-of-archive blocks).
      let cut = 0;
      for (const entry of entries.slice(0, Math.floor(entries.length / 2))) cut += 512 + Math.ceil(entry.data.length / 512) * 512;
      for (const torn of [whole.subarray(0, cut), Buffer.alloc(0)]) {
        const places = cacheIn('torn');
        fs.writeFileSync(places.cached, torn, { mode: 0o644 });
        const loaded = await loadPgliteTemplate({ inMemory: true }, places);
        expect(loaded.tar.equals(whole)).toBe(true);
        expect((await written(places.cached)).equals(whole)).toBe(true);
      }
    });

    test('a copy nobody but this user could have put there is the only one read: not through a link, not one others may write', async () => {
      const whole = (await loadPgliteTemplate({ inMemory: true }, cacheIn('unused'))).tar;
      const foreign = Buffer.from(whole);
      foreign.write('not-ours', whole.length - 2048); // a different, still whole, tar
      // A directory that is a symbolic link (anybody may leave one in the temporary directory).
      const target = cacheIn('link-target');
      fs.writeFileSync(target.cached, foreign, { mode: 0o644 });
      fs.writeFileSync(target.made, foreign, { mode: 0o644 });
      const linkParent = newDir('link');
      work.push(linkParent);
      fs.symlinkSync(target.dir, path.join(linkParent, 'user'));
      const throughLink = { ...target, cached: path.join(linkParent, 'user', 'pglite-test.tar'), made: path.join(linkParent, 'user', 'pglite-made.tar') };
      expect((await loadPgliteTemplate({ inMemory: true }, throughLink)).tar.equals(whole)).toBe(true);
      // A file that others may write, in a directory of this user's.
      const open = cacheIn('open');
      for (const file of [open.cached, open.made]) {
        fs.writeFileSync(file, foreign, { mode: 0o666 });
        fs.chmodSync(file, 0o666);
      }
      expect((await loadPgliteTemplate({ inMemory: true }, open)).tar.equals(whole)).toBe(true);
      // The file itself a link to one of this user's.
      const linked = cacheIn('file-link');
      fs.symlinkSync(target.cached, linked.cached);
      fs.symlinkSync(target.made, linked.made);
      expect((await loadPgliteTemplate({ inMemory: true }, linked)).tar.equals(whole)).toBe(true);
    });
  });

  test('its WAL is one segment holding little more than a checkpoint; in memory it is cut short, and a database written past its end and across segments keeps every row', async () => {
    const full = (await loadPgliteTemplate({}, { shipped: shippedTemplate(), cached: undefined, made: path.join(newDir('none'), 'none.tar') })).tar;
    const wal = (tar: Buffer) => readTar(tar).filter((entry) => /^pg_wal\/[0-9A-F]{24}$/.test(entry.name));
    const [segment, ...others] = wal(full);
    expect(others).toEqual([]);
    expect(segment!.data.length).toBe(16 * 1024 * 1024);
    const written = segment!.data.findLastIndex((byte) => byte !== 0) + 1;
    expect(written).toBeLessThan(256 * 1024);
    const cut = cutWal(full);
    expect(wal(cut).map((entry) => entry.data.length)).toEqual([(Math.ceil(written / 8192) + 1) * 8192]);
    expect(cutWal(cut)).toBe(cut);
    // Through the router's own path (memory://, the template's files handed to PGlite as they lie in the tar).
    const database = openDatabase({ pglite: 'memory://' });
    try {
      await database.knex.raw('create table wal_check (id int primary key, body text)');
      await database.knex.raw('insert into wal_check select g, repeat(md5(g::text), 8) from generate_series(1, 60000) g');
      await database.knex.raw('checkpoint');
      await database.knex.raw("insert into wal_check select g, 'after' from generate_series(60001, 70000) g");
      const { rows } = await database.knex.raw('select count(*)::int as n, pg_walfile_name(pg_current_wal_lsn()) as segment from wal_check');
      expect(rows[0].n).toBe(70000);
      expect(rows[0].segment > path.basename(segment!.name)).toBe(true);
    } finally {
      await database.close();
    }
  }, 120_000);

  test('a tar that is not a data directory is refused, naming the entry', () => {
    const dir = newDir('tar');
    fs.mkdirSync(path.join(dir, 'base'));
    fs.writeFileSync(path.join(dir, 'PG_VERSION'), '18\n');
    const tar = writeTar(dir);
    expect(readTar(tar).map((entry) => entry.name)).toEqual(['PG_VERSION', 'base']);
    const climbing = Buffer.from(tar);
    climbing.write('../evil\0', 0, 'utf8');
    expect(() => readTar(climbing)).toThrow('not a data directory tar: entry "../evil"');
    const linked = Buffer.from(tar);
    linked.write('2', 156);
    expect(() => readTar(linked)).toThrow('not a data directory tar: entry "PG_VERSION" has type "2"');
    expect(() => readTar(Buffer.alloc(700, 'x'))).toThrow(/^not a tar: bad number/);
    // Cut short after whole entries: no end-of-archive blocks.
    expect(() => readTar(tar.subarray(0, tar.length - 1024))).toThrow('not a whole tar: it has no end-of-archive block');
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * One embedded database has one owner. PGlite does not lock its data directory: two processes
 * (or two routers in one) opening the same one would both write to it and corrupt it. So the owner
 * keeps a lock file in the directory, created exclusively, naming its process; a lock whose process
 * is gone (killed, crashed) is taken over. This is what Postgres does with `postmaster.pid`.
 */
export const LOCK_FILE = 'bcms-extensions.lock';

interface Owner {
  pid: number;
  hostname: string;
  /** The process's start time in clock ticks since boot (Linux), so a reused pid is not taken for its owner. */
  started: string | null;
}

/** Directories this process holds (real paths). */
const held = new Set<string>();

function startTimeOf(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22, counted after the command name, which is in parentheses and may hold spaces.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function isAlive(owner: Owner): boolean {
  if (owner.pid === process.pid) return false; // not held by us (checked before): a pid reused after a restart
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const started = startTimeOf(owner.pid);
  return owner.started === null || started === null || started === owner.started;
}

function readOwner(file: string): Owner | null {
  try {
    const owner = JSON.parse(fs.readFileSync(file, 'utf8')) as Owner;
    return Number.isInteger(owner.pid) && typeof owner.hostname === 'string' ? owner : null;
  } catch {
    return null;
  }
}

function inUse(dir: string, detail: string): Error {
  return new Error(
    `the PGlite data directory ${dir} is in use ${detail}: an embedded database has one owner at a time. ` +
      `Stop that one, or give this one another directory (or a Postgres server through DATABASE_URL)`,
  );
}

/**
 * Takes the data directory `dir` (which must exist) for this process, or throws an Error that
 * names who holds it. Resolves to a function that gives it back.
 */
export function lockDataDirectory(dir: string): () => void {
  const real = fs.realpathSync(dir);
  if (held.has(real)) throw inUse(dir, 'by another router of this process (close it first: router.close())');
  const file = path.join(real, LOCK_FILE);
  const me: Owner = { pid: process.pid, hostname: os.hostname(), started: startTimeOf(process.pid) };
  for (let attempt = 0; ; attempt++) {
    try {
      fs.writeFileSync(file, `${JSON.stringify(me)}\n`, { flag: 'wx', mode: 0o600 });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = readOwner(file);
    if (owner === null) {
      // Being written this very moment by a process that is starting, or left empty by a crash
      // between its creation and its first write: only an old one is the latter.
      const age = Date.now() - (fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0);
      if (age < 5_000 || attempt > 0) throw inUse(dir, `(its lock file ${file} is being written; if no process uses the directory, delete that file)`);
    } else if (owner.hostname !== me.hostname) {
      throw inUse(dir, `by process ${owner.pid} on ${owner.hostname} (if it no longer runs, delete ${file})`);
    } else if (isAlive(owner) || attempt > 0) {
      throw inUse(dir, `by process ${owner.pid}`);
    }
    // The owner is gone: its lock is stale.
    fs.rmSync(file, { force: true });
  }
  held.add(real);
  return () => {
    held.delete(real);
    const owner = readOwner(file);
    if (owner !== null && owner.pid === me.pid && owner.started === me.started) fs.rmSync(file, { force: true });
  };
}

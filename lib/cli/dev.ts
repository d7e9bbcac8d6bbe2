import fs from 'node:fs';
import path from 'node:path';
import { UsageError, type Io } from './_io';
import { runBundle } from './bundle';
import { runDeploy } from './deploy';

export const DEV_USAGE = `  dev                                       In a plugin project: bundle and deploy to BCMS_URL
                                            (the local service), then again on every change
                                            under backend/, src/, ui/ and public/, and to its
                                            package.json, tsconfig and plugin config. Ctrl+C stops it.
`;

const QUIET_MS = 300;
/** Folders of the build's own output or dependencies, not the author's. */
const IGNORED_DIRS = new Set(['node_modules', 'dist', 'bcms-bundle', '.git']);
/** The folders a plugin's sources live in: plugin-starter's and bcms-ext create's, and a Vue CLI project's. */
const SOURCE_DIRS = ['backend', 'src', 'ui', 'public'];
/** The project's own settings, at its root: a new pluginName or tsconfig redeploys too. */
const SETTINGS = /^(?:bcms-plugin\.config\.json|package\.json|tsconfig(?:\.[\w-]+)?\.json|vite\.config\.[cm]?[jt]s|tailwind\.config\.[cm]?js)$/;

/**
 * Calls `changed` on every change under `dirs` of `root` (new folders included) and to its
 * settings files. Every folder is watched as a folder, never a file: an editor's atomic save
 * (write a copy, rename it over the file) replaces the file's inode, which a watch of the file
 * would lose, and the folder's watch sees it. Returns what stops it.
 */
export function watchProject(root: string, dirs: readonly string[], changed: (file: string) => void): () => void {
  const watchers = new Map<string, fs.FSWatcher>();
  const watchDir = (dir: string): void => {
    if (watchers.has(dir)) return;
    let watcher: fs.FSWatcher;
    try {
      watcher = fs.watch(dir, (_event, file) => {
        const name = file === null ? '' : String(file);
        // Vite's own temporary copy of its config, made while it builds.
        if (IGNORED_DIRS.has(name) || /\.timestamp-\d+/.test(name)) return;
        const full = path.join(dir, name);
        // A new folder (or one renamed in): watched from now on, with what it holds.
        if (name !== '' && fs.existsSync(full) && fs.statSync(full).isDirectory()) watchTree(full);
        changed(full);
      });
    } catch {
      return; // gone already
    }
    // A watched folder removed: its watch ends, and a folder made there again is found by its parent's.
    watcher.on('error', () => {
      watcher.close();
      watchers.delete(dir);
    });
    watchers.set(dir, watcher);
  };
  const watchTree = (dir: string): void => {
    watchDir(dir);
    let entries: fs.Dirent[] = [];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) if (entry.isDirectory() && !IGNORED_DIRS.has(entry.name)) watchTree(path.join(dir, entry.name));
  };
  for (const dir of dirs) watchTree(path.join(root, dir));
  const settings = fs.watch(root, (_event, file) => {
    const name = file === null ? '' : String(file);
    if (SETTINGS.test(name)) changed(path.join(root, name));
    // A source folder made after the start.
    if (dirs.includes(name) && fs.existsSync(path.join(root, name))) watchTree(path.join(root, name));
  });
  return () => {
    settings.close();
    for (const watcher of watchers.values()) watcher.close();
    watchers.clear();
  };
}

/**
 * Bundles and deploys, then again after each burst of changes (once they have been quiet for
 * 300 ms). A failed round is reported and the watch goes on: the service keeps the last good
 * version. Resolves when `stop` resolves (SIGINT by default).
 */
export async function runDev(io: Io, cwd = process.cwd(), stop: Promise<void> = sigint()): Promise<number> {
  if (!fs.existsSync(path.join(cwd, 'bcms-plugin.config.json'))) throw new UsageError('no bcms-plugin.config.json here: run it in a plugin project (bcms-ext create plugin NAME)');
  const watched = SOURCE_DIRS.filter((dir) => fs.existsSync(path.join(cwd, dir)));
  let running: Promise<void> | undefined;
  let pending = false;
  const round = async (): Promise<void> => {
    io.out(`\n[${new Date().toLocaleTimeString()}] bundling and deploying\n`);
    try {
      await runBundle([], io, cwd);
      await runDeploy([], io, cwd);
      io.out('Deployed: the service serves this version now.\n');
    } catch (error) {
      io.err(`${error instanceof UsageError ? error.message : String(error)}\nThe service keeps the version it had; save again to retry.\n`);
    }
  };
  const schedule = (): void => {
    if (running !== undefined) {
      pending = true;
      return;
    }
    running = round().finally(() => {
      running = undefined;
      if (pending) {
        pending = false;
        schedule();
      }
    });
  };
  let timer: NodeJS.Timeout | undefined;
  const changed = (): void => {
    clearTimeout(timer);
    timer = setTimeout(schedule, QUIET_MS);
  };
  const unwatch = watchProject(cwd, SOURCE_DIRS, changed);
  io.out(`Watching ${watched.map((dir) => `${dir}/`).join(', ')} and the project's settings; Ctrl+C stops.\n`);
  schedule();
  await stop;
  clearTimeout(timer);
  unwatch();
  await running;
  return 0;
}

function sigint(): Promise<void> {
  return new Promise((resolve) => process.once('SIGINT', () => resolve()));
}

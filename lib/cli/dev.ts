import fs from 'node:fs';
import path from 'node:path';
import { UsageError, type Io } from './_io';
import { runBundle } from './bundle';
import { runDeploy } from './deploy';

export const DEV_USAGE = `  dev                                       In a plugin project: bundle and deploy to BCMS_URL
                                            (the local service), then again on every change
                                            under backend/ and ui/. Ctrl+C stops it.
`;

const QUIET_MS = 300;
const IGNORED = new Set(['node_modules', 'dist', 'bcms-bundle', '.git']);

/** Every directory under `dir` but dependencies and build output: fs.watch is not recursive everywhere. */
function directories(dir: string): string[] {
  const found = [dir];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory() && !IGNORED.has(entry.name)) found.push(...directories(path.join(dir, entry.name)));
  }
  return found;
}

/**
 * Bundles and deploys, then again after each burst of changes (once they have been quiet for
 * 300 ms). A failed round is reported and the watch goes on: the service keeps the last good
 * version. Resolves when `stop` resolves (SIGINT by default).
 */
export async function runDev(io: Io, cwd = process.cwd(), stop: Promise<void> = sigint()): Promise<number> {
  if (!fs.existsSync(path.join(cwd, 'bcms-plugin.config.json'))) throw new UsageError('no bcms-plugin.config.json here: run it in a plugin project (bcms-ext create plugin NAME)');
  const watched = ['backend', 'ui'].map((dir) => path.join(cwd, dir)).filter((dir) => fs.existsSync(dir));
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
  const watchers = watched.flatMap(directories).map((dir) => fs.watch(dir, changed));
  io.out(`Watching ${watched.map((dir) => `${path.relative(cwd, dir)}/`).join(' and ')}; Ctrl+C stops.\n`);
  schedule();
  await stop;
  clearTimeout(timer);
  for (const watcher of watchers) watcher.close();
  await running;
  return 0;
}

function sigint(): Promise<void> {
  return new Promise((resolve) => process.once('SIGINT', () => resolve()));
}

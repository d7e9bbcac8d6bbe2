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
/** Changes here are the build's own output or dependencies, not the author's. */
const IGNORED = /(^|[\\/])(node_modules|dist|bcms-bundle|\.git)([\\/]|$)/;

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
  // Recursive (new folders included), and the project's own settings: a new pluginName redeploys too.
  const watchers = [
    ...watched.map((dir) => fs.watch(dir, { recursive: true }, (_event, file) => (file !== null && IGNORED.test(String(file)) ? undefined : changed()))),
    ...['bcms-plugin.config.json', 'package.json'].map((file) => fs.watch(path.join(cwd, file), changed)),
  ];
  io.out(`Watching ${watched.map((dir) => `${path.relative(cwd, dir)}/`).join(' and ')} and bcms-plugin.config.json; Ctrl+C stops.\n`);
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

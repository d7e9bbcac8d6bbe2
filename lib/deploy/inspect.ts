import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { DeploymentKind } from './load';

/** The compiled worker (dist/deploy), from dist or lib alike: a worker thread runs JavaScript only. */
const WORKER = path.resolve(__dirname, '..', '..', 'dist', 'deploy', 'inspect-worker.js');

/**
 * Loads a bundle apart, in a worker thread, before it may go live: resolves when it loads and
 * exports what its manifest says, rejects with its load error, or with a time-out after
 * `timeoutMs` (the worker is stopped, whatever the bundle was doing).
 */
export function inspectBundle(kind: DeploymentKind, name: string, code: string, filename: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { workerData: { kind, name, code, filename }, stdout: true, stderr: true });
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`the bundle did not finish loading within ${timeoutMs} ms`));
    }, timeoutMs);
    const settle = (): void => clearTimeout(timer);
    worker.once('message', (message: { ok: boolean; message?: string }) => {
      settle();
      void worker.terminate();
      if (message.ok) resolve();
      else reject(new Error(message.message));
    });
    worker.once('error', (error) => {
      settle();
      reject(error);
    });
    worker.once('exit', (code) => {
      settle();
      reject(new Error(`the bundle's loader stopped (exit code ${code}) before it answered`));
    });
  });
}

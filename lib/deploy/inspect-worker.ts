// Loads a bundle in a worker thread, so that a bundle that never finishes loading (a loop at its
// top level, a factory that never resolves) can be stopped: the service terminates the worker.
import { parentPort, workerData } from 'node:worker_threads';
import { loadExtension, type DeploymentKind } from './load';

const { kind, name, code, filename } = workerData as { kind: DeploymentKind; name: string; code: string; filename: string };
loadExtension(kind, name, code, filename, { setUp: false }).then(
  () => parentPort?.postMessage({ ok: true }),
  (error: unknown) => parentPort?.postMessage({ ok: false, message: (error as Error)?.message ?? String(error) }),
);

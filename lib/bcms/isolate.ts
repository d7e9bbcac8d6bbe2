/**
 * The BCMS layer in an isolate, run before extension code (the `isolateModule` of lib/bcms/layer.ts):
 * BCMSRepo, plugin repositories and `useLogger` use the isolate's store and logger; `useFS` writes
 * in the isolate's own folder, which the host made its cwd; `useSocket` events go to the service.
 */
import type { IsolateServices } from '../layer';
import { setFilesRoot } from './fs';
import { bindBcmsRepo } from './repo';
import { setSocketPublisher } from './socket';
import { bindLogger } from './use-logger';

export function bindIsolate({ store, logger, emit }: IsolateServices): void {
  bindBcmsRepo(store);
  bindLogger(logger);
  setFilesRoot(process.cwd());
  setSocketPublisher((event) => emit('socket', event));
}

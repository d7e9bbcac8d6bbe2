/** What the BCMS layer takes from the router built last: where files land, and where socket events go. */
import type { EventEmitter } from 'node:events';
import { setFilesRoot } from './fs';
import { setSocketPublisher, type SocketEvent } from './socket';

/** `useFS` rooted in `filesDir`; `useSocket` events emitted on `events` as `'socket'`. */
export function bindBcmsServices(filesDir: string, events: EventEmitter): void {
  setFilesRoot(filesDir);
  setSocketPublisher((event: SocketEvent) => events.emit('socket', event));
}

/**
 * The BCMS layer's part of a router: where `useFS` writes, and where `useSocket` events go (the
 * router's `events`, then every instance's plugin UIs through the socket hub).
 */
import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { Work } from '../http/exchange';
import type { Logger } from '../logger';
import type { AccessTokenVerifier } from '../security/jwt';
import { setFilesRoot } from './fs';
import { setSocketPublisher, type SocketEvent } from './socket';
import { createEventStream, SocketHub } from './socket-hub';

export interface BcmsLayer {
  /** `'socket'`: each event sent here (a plugin's `useSocket`, a content change through the SDK routes). */
  events: EventEmitter;
  /** `GET /api/extensions/events`. */
  serveEvents: (req: Request, res: Response) => Work;
  close(): Promise<void>;
}

/** Binds `useFS` and `useSocket` to the router being built (the one built last serves them). */
export function bindBcmsLayer(deps: { filesDir: string; knex: Knex; logger: Logger; verifyAccessToken: AccessTokenVerifier }): BcmsLayer {
  const { filesDir, knex, logger, verifyAccessToken } = deps;
  const events = new EventEmitter();
  const hub = new SocketHub(knex, logger);
  events.on('socket', (event: SocketEvent) => hub.publish(event));
  setFilesRoot(filesDir);
  setSocketPublisher((event) => events.emit('socket', event));
  return { events, serveEvents: createEventStream({ hub, verifyAccessToken }), close: () => hub.close() };
}

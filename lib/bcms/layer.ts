/**
 * The BCMS layer's part of each router: BCMSRepo, plugin repositories and `useLogger` follow the
 * router built last; `useFS` writes under its files directory; `useSocket` events and the SDK's
 * content changes reach every instance's plugin UIs (`GET /api/extensions/events`); the BCMS
 * client's signed calls are accepted, and its access list answered. Added to the core by
 * lib/index.ts; in an isolate, lib/bcms/isolate.ts does the same on the isolate's side.
 */
import path from 'node:path';
import type { Request } from 'express';
import type { Layer, RouterServices } from '../layer';
import type { KeySignatureScheme } from '../security/caller';
import { ACCESS_LIST_PATH, createAccessListServer } from './client/access-list';
import { clientSignatureQuery, createClientSignatureVerifier, type VerifyClientSignedRequest } from './client/signature';
import { setFilesRoot } from './fs';
import { bindBcmsRepo } from './repo';
import { setSocketPublisher, type SocketEvent } from './socket';
import { createEventStream, EVENTS_PATH, SocketHub } from './socket-hub';
import { bindLogger } from './use-logger';

export const bcmsLayer: Layer = {
  name: 'bcms',
  // Always the compiled file: isolates are forked from dist/ (lib/isolate/host.ts).
  isolateModule: path.resolve(__dirname, '..', '..', 'dist', 'bcms', 'isolate.js'),
  isolateEvents: { socket: toSocketEvent },
  bindRouter(services: RouterServices) {
    const { settings, store, logger, verifyAccessToken, signatures, events, functions, readBody } = services;
    bindBcmsRepo(store);
    bindLogger(logger);
    setFilesRoot(settings.filesDir);
    const hub = new SocketHub(store.database.knex, logger);
    // Events from isolates arrive checked (toSocketEvent); the SDK's and useSocket's are made here.
    const toHub = (event: SocketEvent): void => hub.publish(event);
    events.on('socket', toHub);
    setSocketPublisher((event) => events.emit('socket', event));
    const verifyClient = createClientSignatureVerifier(signatures);
    return {
      routes: [
        { path: EVENTS_PATH, family: 'plugin', serve: createEventStream({ hub, verifyAccessToken }) },
        { path: ACCESS_LIST_PATH, family: 'function', serve: createAccessListServer({ functions, verify: verifyClient, readBody }) },
      ],
      keySchemes: [clientKeyScheme(verifyClient)],
      close: () => {
        events.off('socket', toHub);
        return hub.close();
      },
    };
  },
};

/** An isolate's `useSocket` event, from untrusted code: a non-empty name, a string scope; anything else is dropped. */
function toSocketEvent(value: unknown): SocketEvent | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { scope, eventName, eventData } = value as Record<string, unknown>;
  if (typeof eventName !== 'string' || eventName === '') return undefined;
  return { scope: typeof scope === 'string' ? scope : 'global', eventName, eventData };
}

/** The BCMS client's query-string signature (`?key&nonce&timestamp&signature`), as a key scheme of the core. */
function clientKeyScheme(verify: VerifyClientSignedRequest): KeySignatureScheme {
  return {
    find: (req: Request) => clientSignatureQuery(req.url),
    verify: (req, query, permission, readBody) => verify(req, query as string, permission, readBody),
  };
}

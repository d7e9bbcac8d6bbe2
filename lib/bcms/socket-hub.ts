/**
 * BCMS's socket, as plugin UIs see it (`window.bcms.sdk.socket`): every event sent on any instance
 * (a plugin's `useSocket().emit`, a change to an entry or a template through the SDK routes)
 * reaches every signed-in UI of every instance. An instance sends an event as a NOTIFY on its
 * database; each listens (only once a UI is connected to it) and streams what it hears to its UIs
 * as Server-Sent Events, at `GET /api/extensions/events`.
 */
import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import { listenOn } from '../deploy/listen';
import { BcmsHttpError } from '../http/errors';
import type { Work } from '../http/exchange';
import type { Logger } from '../logger';
import type { AccessTokenVerifier } from '../security/jwt';
import type { SocketEvent } from './socket';

export const SOCKET_CHANNEL = 'bcms_socket';
export const EVENTS_PATH = '/api/extensions/events';
/** Postgres refuses a NOTIFY payload of 8000 bytes or more. */
const MAX_PAYLOAD_BYTES = 7900;
/** A comment line this often keeps proxies from closing an idle stream. */
const HEARTBEAT_MS = 25_000;
/** The longest delay a Node timer takes (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

type Subscriber = (event: SocketEvent) => void;

export class SocketHub {
  private readonly subscribers = new Set<Subscriber>();
  private stopListening: (() => Promise<void>) | undefined;
  private closed = false;

  constructor(
    private readonly knex: Knex,
    private readonly logger: Logger,
  ) {}

  /** Sends an event to every instance's UIs. A failure (the database away, an event too large) is logged, never thrown. */
  publish(event: SocketEvent): void {
    const payload = JSON.stringify({ scope: event.scope, eventName: event.eventName, eventData: event.eventData ?? null });
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) {
      this.logger.warn(
        { eventName: event.eventName, bytes: Buffer.byteLength(payload) },
        `bcms-extensions: a socket event over ${MAX_PAYLOAD_BYTES} bytes is not sent; send an id and let the UI fetch the rest`,
      );
      return;
    }
    this.knex.raw('select pg_notify(?, ?)', [SOCKET_CHANNEL, payload]).catch((error: unknown) => {
      this.logger.warn({ err: error, eventName: event.eventName }, 'bcms-extensions: a socket event could not be sent (the database did not answer)');
    });
  }

  /** Calls `subscriber` with every event from now on; returns what ends that. Listening starts with the first subscriber. */
  subscribe(subscriber: Subscriber): () => void {
    this.subscribers.add(subscriber);
    if (this.stopListening === undefined && !this.closed) {
      this.stopListening = listenOn(this.knex, this.logger, { channel: SOCKET_CHANNEL, what: 'socket events', onNotify: (payload) => this.deliver(payload) });
    }
    return () => void this.subscribers.delete(subscriber);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
    await this.stopListening?.();
  }

  private deliver(payload: string | undefined): void {
    let event: SocketEvent;
    try {
      event = JSON.parse(payload ?? '') as SocketEvent;
    } catch {
      return;
    }
    if (event === null || typeof event !== 'object' || typeof event.eventName !== 'string') return;
    for (const subscriber of this.subscribers) subscriber(event);
  }
}

/**
 * `GET /api/extensions/events`: a signed-in user's stream of socket events, as Server-Sent Events
 * (`event: <eventName>`, `data: <eventData as JSON>`). It stays open until the client goes, or
 * until the token expires.
 */
export function createEventStream(deps: { hub: SocketHub; verifyAccessToken: AccessTokenVerifier }) {
  const { hub, verifyAccessToken } = deps;
  return function serveEvents(req: Request, res: Response): Work {
    if (req.method !== 'GET') throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here; use GET.`, { Allow: 'GET' });
    return verifyAccessToken(req).then(
      (token) =>
        new Promise<void>((resolve) => {
          res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' });
          res.write(': connected\n\n');
          const unsubscribe = hub.subscribe(({ eventName, eventData }) => {
            // A name is one line of the stream: one that could end it is not sent.
            if (/[\r\n]/.test(eventName)) return;
            res.write(`event: ${eventName}\ndata: ${JSON.stringify(eventData ?? null)}\n\n`);
          });
          const heartbeat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
          heartbeat.unref();
          // Events only for as long as the token is valid: then the stream ends, and a client that
          // comes back with that token is refused (401) like any other request.
          const exp = token.payload.exp;
          const expiry = typeof exp === 'number' ? setTimeout(() => res.end(), Math.min(MAX_TIMER_MS, Math.max(0, exp * 1000 - Date.now()))) : undefined;
          expiry?.unref();
          res.on('close', () => {
            clearInterval(heartbeat);
            clearTimeout(expiry);
            unsubscribe();
            resolve();
          });
        }),
    );
  };
}

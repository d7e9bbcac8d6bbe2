/**
 * purple-cheetah's `useSocket`, as BCMS plugins use it: `emit` and `emitToScope` send an event to
 * the plugin UIs subscribed to it (`window.bcms.sdk.socket.subscribe(eventName, handler)`). The
 * service has no socket connections of its own, so the methods that look one up find none.
 */

/** One event a plugin sent: its name and data, and the scope BCMS would have sent it to. */
export interface SocketEvent {
  scope: string;
  eventName: string;
  eventData: unknown;
}

/** What `useSocket()` returns, as BCMS's: emits that reach the subscribed plugin UIs, and lookups that find no connection. */
export interface Socket {
  findConnection(query?: unknown): null;
  findConnections(query?: unknown): [];
  findConnectionById(id: string): null;
  findConnectionsByScope(scope: string): [];
  disconnectById(id: string): void;
  disconnect(query?: unknown): void;
  disconnectScope(scope: string): void;
  /** Sends an event to every subscriber (a connection id, as BCMS takes, is not needed: there are none). */
  emit<T>(config: { connectionId?: string; socketId?: string; eventName: string; eventData: T }): boolean;
  emitToScope<T>(config: { scope: string; eventName: string; eventData: T }): boolean;
}

type Publish = (event: SocketEvent) => void;
let publish: Publish | undefined;

/** Where events go: the router built last (in the service), or the service (in an isolate). */
export function setSocketPublisher(next: Publish | undefined): void {
  publish = next;
}

function send(event: SocketEvent): boolean {
  if (typeof event.eventName !== 'string' || event.eventName === '') throw new TypeError('useSocket: eventName must be a non-empty string');
  if (publish === undefined) return false;
  publish(event);
  return true;
}

const socket: Socket = {
  findConnection: () => null,
  findConnections: () => [],
  findConnectionById: () => null,
  findConnectionsByScope: () => [],
  disconnectById: () => undefined,
  disconnect: () => undefined,
  disconnectScope: () => undefined,
  emit: ({ eventName, eventData }) => send({ scope: 'global', eventName, eventData }),
  emitToScope: ({ scope, eventName, eventData }) => send({ scope: String(scope), eventName, eventData }),
};

/** BCMS's socket manager: `emit` and `emitToScope` reach the plugin UIs subscribed to the event; it has no connections to look up. */
export function useSocket(): Socket {
  return socket;
}

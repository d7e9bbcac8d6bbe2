// The bridge between a plugin UI's frame and the page around it (the admin shell, or a host's own
// page that loads the SDK).
//
// Plugin UIs load in <iframe sandbox="allow-scripts allow-forms allow-popups allow-downloads">, and
// the service sends their documents with a CSP `sandbox` of the same flags: their origin is opaque,
// so a plugin's code reads neither the page's storage (where the token is) nor its DOM, even when
// it is opened on its own. Its `window.bcms` asks the page over postMessage instead: the page makes
// each request with the token, shows the notifications and dialogs, relays the socket's events, and
// posts a copy of the token's decoded header and payload (for `getAccessToken()`), never the token.
import type { BcmsJwt, BcmsNotification, BcmsSdkError, BcmsSdkSendConfig, BcmsSocket, BcmsSocketCallback, BcmsUser } from '../sdk/types';

/** The flags of a plugin UI's frame: scripts, forms, popups and downloads; never `allow-same-origin`. */
export const FRAME_SANDBOX = 'allow-scripts allow-forms allow-popups allow-downloads';

/** Marks this bridge's messages among whatever else a page and its frames post. */
const CHANNEL = 'bcms-extensions/frame';
/** A frame's name carries the state it starts with: a plugin's first line can read the token's claims. */
const NAME_PREFIX = 'bcms-frame:';

/** What a frame knows of the page: posted when it says hello and on every change, and in its name. */
export interface FrameState {
  /** The token's decoded header and payload, without its signature: the claims, never a credential. */
  token: BcmsJwt | null;
  /** The users the page knows (the store's getters read them). */
  users: BcmsUser[];
  /** Whether the page's event stream is open (`socket.connected()`). */
  connected: boolean;
}

/** What a frame asks of the page, with the reply a call waits for. */
type Call = { method: 'send'; args: [BcmsSdkSendConfig] } | { method: 'confirm'; args: [string, string] } | { method: 'signOut' | 'socket.connect'; args: [] };

type FrameMessage =
  | { channel: typeof CHANNEL; type: 'hello' }
  | ({ channel: typeof CHANNEL; type: 'call'; id: number } & Call)
  | { channel: typeof CHANNEL; type: 'notify'; kind: keyof BcmsNotification; text: string }
  | { channel: typeof CHANNEL; type: 'subscribe' | 'unsubscribe'; event: string }
  /** The frame's own route (its URL's #fragment, where BCMS UIs keep it) changed. */
  | { channel: typeof CHANNEL; type: 'route'; hash: string };

/** What the page dispatches on its window when a plugin frame's route changes: the shell keeps it in its URL. */
export interface FrameRouteDetail {
  frame: HTMLIFrameElement;
  hash: string;
}

/** An error as it crosses: what `send` rejects with (BcmsSdkError's fields). */
interface PostedError {
  name: string;
  message: string;
  status?: number;
  code?: string;
}

type PageMessage =
  | { channel: typeof CHANNEL; type: 'state'; state: FrameState }
  | { channel: typeof CHANNEL; type: 'result'; id: number; ok: true; value: unknown }
  | { channel: typeof CHANNEL; type: 'result'; id: number; ok: false; error: PostedError }
  | { channel: typeof CHANNEL; type: 'event'; event: string; data: unknown };

const NOTIFICATION_KINDS: readonly string[] = ['success', 'info', 'warning', 'error'];

function ours(data: unknown): data is { channel: typeof CHANNEL; type: string } {
  return data !== null && typeof data === 'object' && (data as { channel?: unknown }).channel === CHANNEL && typeof (data as { type?: unknown }).type === 'string';
}

// ---------------------------------------------------------------------------------------------
// The page's side

/** What the page does for its frames: its own SDK's parts, which hold the token. */
export interface PageServices {
  state(): FrameState;
  send(config: BcmsSdkSendConfig): Promise<unknown>;
  /** Why a frame's request is not made (a 403 to the frame), or undefined. */
  refuse(config: BcmsSdkSendConfig): string | undefined;
  signOut(): void;
  confirm(title: string, text: string): Promise<boolean>;
  notification: BcmsNotification;
  subscribe(event: string, callback: BcmsSocketCallback): () => void;
  connect(): Promise<void>;
  /** The URL under which plugin UIs are served (`<origin><base>/plugin/`): only their frames are served. */
  pluginUrl: string;
}

let page: PageServices | undefined;
/** The frames that said hello, each with its socket subscriptions (event → unsubscribe). */
const frames = new Map<Window, Map<string, () => void>>();

/** Starts answering the page's plugin frames. */
export function serveFrames(services: PageServices): void {
  page = services;
  window.addEventListener('message', onFrameMessage);
}

/** The `name` a plugin frame is made with: the state it starts with. */
export function frameName(): string {
  return NAME_PREFIX + JSON.stringify(page?.state() ?? { token: null, users: [], connected: false });
}

/** Tells every frame that the state changed (a sign-out, a user learnt, the stream opened or closed). */
export function broadcastState(): void {
  if (page === undefined) return;
  const state = page.state();
  for (const frame of frames.keys()) {
    if (pluginFrame(frame) === undefined) forget(frame);
    else post(frame, { channel: CHANNEL, type: 'state', state });
  }
  // A frame that reloads starts with the state of now.
  for (const iframe of document.querySelectorAll('iframe')) {
    if (iframe.name.startsWith(NAME_PREFIX)) iframe.name = NAME_PREFIX + JSON.stringify(state);
  }
}

/**
 * The frame element that holds `source`, when it is a plugin UI's frame of this page: a message from
 * any other window (another site's frame, a frame's own frames) is not answered.
 */
function pluginFrame(source: MessageEventSource | null): HTMLIFrameElement | undefined {
  if (source === null || page === undefined) return undefined;
  for (const iframe of document.querySelectorAll('iframe')) {
    if (iframe.contentWindow === source && iframe.src.startsWith(page.pluginUrl)) return iframe;
  }
  return undefined;
}

function post(frame: Window, message: PageMessage): void {
  // A sandboxed frame's origin is opaque: it cannot be named as the target. The message goes to
  // this one window, which is the plugin's (checked on the way in).
  try {
    frame.postMessage(message, '*');
  } catch (error) {
    // A value that cannot be cloned (not JSON): the call fails instead of never answering.
    if (message.type === 'result') post(frame, { channel: CHANNEL, type: 'result', id: message.id, ok: false, error: { name: 'DataCloneError', message: (error as Error).message } });
  }
}

function forget(frame: Window): void {
  for (const unsubscribe of frames.get(frame)?.values() ?? []) unsubscribe();
  frames.delete(frame);
}

function onFrameMessage(event: MessageEvent): void {
  const message = event.data as FrameMessage;
  if (!ours(message) || page === undefined) return;
  const iframe = pluginFrame(event.source);
  const frame = iframe?.contentWindow;
  if (frame === null || frame === undefined) return;
  const services = page;
  switch (message.type) {
    case 'hello':
      // A frame that (re)loaded starts afresh: its old subscriptions went with its old document.
      forget(frame);
      frames.set(frame, new Map());
      post(frame, { channel: CHANNEL, type: 'state', state: services.state() });
      return;
    case 'notify':
      if (NOTIFICATION_KINDS.includes(message.kind)) services.notification[message.kind](String(message.text));
      return;
    case 'subscribe': {
      const subscriptions = frames.get(frame);
      const name = String(message.event);
      if (subscriptions === undefined || subscriptions.has(name)) return;
      subscriptions.set(
        name,
        services.subscribe(name, (data) => {
          if (pluginFrame(frame) === undefined) forget(frame);
          else post(frame, { channel: CHANNEL, type: 'event', event: name, data });
        }),
      );
      return;
    }
    case 'unsubscribe':
      frames.get(frame)?.get(String(message.event))?.();
      frames.get(frame)?.delete(String(message.event));
      return;
    case 'call':
      void answer(frame, iframe as HTMLIFrameElement, message, services);
      return;
    case 'route':
      if (typeof message.hash === 'string' && message.hash.length <= 2000 && (message.hash === '' || message.hash.startsWith('#'))) {
        window.dispatchEvent(new CustomEvent<FrameRouteDetail>('bcms:frame-route', { detail: { frame: iframe as HTMLIFrameElement, hash: message.hash } }));
      }
      return;
  }
}

async function answer(frame: Window, iframe: HTMLIFrameElement, call: Call & { id: number }, services: PageServices): Promise<void> {
  try {
    let value: unknown;
    if (call.method === 'send') {
      const refusal = services.refuse(call.args[0]);
      if (refusal !== undefined) throw Object.assign(new Error(refusal), { name: 'BcmsSdkError', status: 403 });
      value = await services.send(call.args[0]);
    } else if (call.method === 'confirm') {
      value = await services.confirm(String(call.args[0]), String(call.args[1]));
      // The dialog was the page's: the keyboard goes back into the frame, which puts it where it was.
      if (iframe.isConnected) iframe.focus();
    } else if (call.method === 'signOut') services.signOut();
    else if (call.method === 'socket.connect') await services.connect();
    else throw new TypeError(`window.bcms has no ${String((call as { method: unknown }).method)}.`);
    post(frame, { channel: CHANNEL, type: 'result', id: call.id, ok: true, value });
  } catch (error) {
    const { name, message, status, code } = error as Partial<BcmsSdkError>;
    post(frame, { channel: CHANNEL, type: 'result', id: call.id, ok: false, error: { name: String(name ?? 'Error'), message: String(message ?? error), status, code } });
  }
}

// ---------------------------------------------------------------------------------------------
// The frame's side

/**
 * What a `window.bcms` is made of where it runs (sdk.ts builds the rest over them): in the page
 * that holds the token, its own; in a frame, the bridge's.
 */
export interface BcmsParts {
  send<T>(config: BcmsSdkSendConfig): Promise<T>;
  getAccessToken(): BcmsJwt | null;
  signOut(): void;
  /** The users known before this object learnt any (a frame's: the page's). */
  users(): BcmsUser[];
  socket: BcmsSocket;
  notification: BcmsNotification;
  confirm(title: string, text: string): Promise<boolean>;
}

/** How long a frame waits for the page's first answer before it says that nothing answers. */
const HELLO_MS = 5000;

/** Connects this frame to the page around it (`window.parent`, kept before anything can replace it). */
export function connectToPage(pageWindow: Window): BcmsParts {
  let state = startingState();
  let heard = false;
  let nextId = 0;
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();
  const listeners = new Map<string, Set<BcmsSocketCallback>>();

  const postToPage = (message: FrameMessage): void => pageWindow.postMessage(message, '*');

  window.addEventListener('message', (event) => {
    const message = event.data as PageMessage;
    if (event.source !== pageWindow || !ours(message)) return;
    heard = true;
    if (message.type === 'state') {
      const wasSignedIn = state.token !== null;
      state = message.state;
      // The page signed out (a 401, its own button, another tab): the frame's listeners are told too.
      if (wasSignedIn && state.token === null) window.dispatchEvent(new CustomEvent('bcms:signed-out'));
    } else if (message.type === 'result') {
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (message.ok) waiting?.resolve(message.value);
      else waiting?.reject(Object.assign(new Error(message.error.message), message.error) as BcmsSdkError);
    } else if (message.type === 'event') {
      for (const callback of listeners.get(message.event) ?? []) callSubscriber(message.event, callback, message.data);
    }
  });
  postToPage({ channel: CHANNEL, type: 'hello' });
  // The page may keep where the UI is (a reload opens it there again).
  window.addEventListener('hashchange', () => postToPage({ channel: CHANNEL, type: 'route', hash: location.hash }));
  setTimeout(() => {
    if (!heard) console.warn('window.bcms: the page around this plugin does not answer. Open the plugin from the admin shell (or a page that loads the SDK).');
  }, HELLO_MS);

  function call<T>(message: Call): Promise<T> {
    const id = ++nextId;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      try {
        postToPage({ channel: CHANNEL, type: 'call', id, ...message });
      } catch (error) {
        // Data that cannot be cloned (a function, a DOM node): as fetch would refuse a body it cannot send.
        pending.delete(id);
        reject(new TypeError(`window.bcms: ${(error as Error).message}`));
      }
    });
  }

  const socket: BcmsSocket = {
    subscribe(event, callback) {
      const name = String(event);
      let set = listeners.get(name);
      if (set === undefined) {
        set = new Set();
        listeners.set(name, set);
        postToPage({ channel: CHANNEL, type: 'subscribe', event: name });
      }
      set.add(callback);
      return () => {
        set.delete(callback);
        if (set.size > 0 || listeners.get(name) !== set) return;
        listeners.delete(name);
        postToPage({ channel: CHANNEL, type: 'unsubscribe', event: name });
      };
    },
    connect: () => call<void>({ method: 'socket.connect', args: [] }),
    // This frame's subscriptions end; the page's stream stays for the page.
    disconnect() {
      for (const name of listeners.keys()) postToPage({ channel: CHANNEL, type: 'unsubscribe', event: name });
      listeners.clear();
    },
    connected: () => state.connected,
    id: () => null,
    emit: () => undefined,
  };

  const notify =
    (kind: keyof BcmsNotification) =>
    (text: string): void =>
      postToPage({ channel: CHANNEL, type: 'notify', kind, text: String(text) });

  return {
    send(config) {
      if (config === null || typeof config !== 'object' || typeof config.url !== 'string') return Promise.reject(new TypeError('send takes { url, method?, data?, headers? }'));
      // A path is the service's API (the page puts /api in front); anything else is resolved here,
      // against this frame's own address, as fetch in the frame would.
      const servicePath = config.url.startsWith('/') && !config.url.startsWith('//');
      // Only data crosses: the body as JSON (what fetch would send of it; a UI's reactive proxies
      // cannot be cloned), the headers as strings.
      const crossing: BcmsSdkSendConfig = {
        url: servicePath ? config.url : new URL(config.url, location.href).href,
        method: config.method,
        headers: config.headers === undefined ? undefined : Object.fromEntries(Object.entries(config.headers).map(([name, value]) => [name, String(value)])),
        data: config.data === undefined ? undefined : (JSON.parse(JSON.stringify(config.data)) as unknown),
        doNotAuth: config.doNotAuth,
      };
      return call({ method: 'send', args: [crossing] });
    },
    getAccessToken: () => (state.token === null ? null : structuredClone(state.token)),
    signOut: () => void call({ method: 'signOut', args: [] }),
    users: () => state.users,
    socket,
    notification: { success: notify('success'), info: notify('info'), warning: notify('warning'), error: notify('error') },
    async confirm(title, text) {
      const returnTo = document.activeElement as HTMLElement | null;
      const ok = await call<boolean>({ method: 'confirm', args: [String(title), String(text)] });
      if (returnTo?.isConnected && returnTo !== document.body) returnTo.focus();
      return ok;
    },
  };
}

/** The state the page gave this frame in its name, or nobody signed in. */
function startingState(): FrameState {
  if (window.name.startsWith(NAME_PREFIX)) {
    try {
      return JSON.parse(window.name.slice(NAME_PREFIX.length)) as FrameState;
    } catch {
      // a name of another making
    }
  }
  return { token: null, users: [], connected: false };
}

/**
 * `window.parent.bcms`, as BCMS plugin UIs start (`window.bcms = window.parent.bcms`): the real
 * parent is of another origin now, and reading a property of it would throw. `parent` is a
 * replaceable attribute: in this frame it becomes a view of the real parent that has `bcms`, and
 * passes everything else through (`postMessage`, `frames`, `location = ...`); what another origin
 * may not read is undefined, as nothing of the page is this frame's to read.
 */
export function exposeOnParent(realParent: Window, bcms: unknown): void {
  const view = new Proxy(Object.create(null) as object, {
    get(_target, key) {
      if (key === 'bcms') return bcms;
      try {
        const value: unknown = Reflect.get(realParent, key);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(realParent) : value;
      } catch {
        return undefined;
      }
    },
    set(_target, key, value) {
      try {
        return Reflect.set(realParent, key, value);
      } catch {
        return false;
      }
    },
    has: (_target, key) => key === 'bcms' || key === 'postMessage',
  });
  Object.defineProperty(window, 'parent', { value: view, configurable: true, writable: true, enumerable: true });
}

/** One socket subscriber, given an event: what it throws or rejects with is logged, and the others still get it. */
export function callSubscriber(event: string, callback: BcmsSocketCallback, data: unknown): void {
  try {
    const result = callback(data) as { catch?: (handler: (error: unknown) => void) => unknown } | undefined;
    result?.catch?.((error) => console.error(`socket ${event}:`, error));
  } catch (error) {
    console.error(`socket ${event}:`, error);
  }
}

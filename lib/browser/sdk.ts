// `window.bcms`, served at `<base>/api/extensions/sdk.js` to the admin shell and, injected first
// into each plugin UI's index.html, to every plugin UI. Its names and argument shapes are BCMS's
// (`@becomes/cms-sdk` 3.4.3 and the BCMS UI's `window.bcms`), so a BCMS plugin UI runs as it is.
//
// The page that holds the token (the admin shell, or a host's page that loads this script) makes
// the requests, keeps the event stream and shows the notifications and dialogs. A plugin UI runs
// in a sandboxed frame of another (opaque) origin: its `window.bcms` is the same API over a bridge
// to that page (frame-bridge.ts), and the token never enters the frame.
import type {
  BcmsEntry,
  BcmsEntryCreateData,
  BcmsEntryLite,
  BcmsEntryUpdateData,
  BcmsGlobal,
  BcmsJwt,
  BcmsSdk,
  BcmsSdkError,
  BcmsSdkFunction,
  BcmsSdkPlugin,
  BcmsSdkSendConfig,
  BcmsTemplate,
  BcmsTemplateCreateData,
  BcmsTemplateUpdateData,
  BcmsThrowable,
  BcmsModal,
  BcmsSocket,
  BcmsSocketCallback,
  BcmsUser,
  BcmsVueStore,
} from '../sdk/types';
import { confirm, notification, notificationHost } from './dialogs.js';
import { broadcastState, callSubscriber, connectToPage, exposeOnParent, serveFrames, type BcmsParts } from './frame-bridge.js';

const TOKEN_KEY = 'bcms.accessToken';
/** Marks a `window.bcms` made by this script; `Symbol.for` is shared by every realm of the page, frames included. */
const OURS = Symbol.for('bcms-extensions.window.bcms');
/** Where the service is: this script's own URL, less `/api/extensions/sdk.js` (the router may be mounted under a prefix). */
const scriptUrl = new URL(import.meta.url);
const base = scriptUrl.pathname.replace(/\/api\/extensions\/sdk\.js$/, '');
const origin = scriptUrl.origin;

function sdkError(status: number, message: string, code?: string): BcmsSdkError {
  const error = Object.assign(new Error(message), { name: 'BcmsSdkError', status }) as BcmsSdkError;
  if (code !== undefined) error.code = code;
  return error;
}

// ---------------------------------------------------------------------------------------------
// The token

/** The token this page keeps; none in a page of an opaque origin (a plugin UI opened on its own), which has no storage. */
function rawToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

/** One part of a JWT: base64url (RFC 7515 §2) of UTF-8 JSON. */
function decodePart(part: string): unknown {
  const base64 = part
    .replace(/-/g, '+')
    .replace(/_/g, '/')
    .padEnd(Math.ceil(part.length / 4) * 4, '=');
  const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

/**
 * The app's user, when the service knows them by this page's cookies (its `auth.fromRequest` reads
 * the app's session) rather than by a kept token: their claims as the user route named them, in a
 * token's shape (`typ: 'auth.fromRequest'`, as the service's handlers see them), or null.
 */
let session: BcmsJwt | null = null;
/** The user route: its answer to a request without a token says who the app's session is. */
const USER_PATH = `${base}/api/extensions/user`;

/** The session's claims from the user route's answer (BCMS's BCMSUser). */
function learnSession(user: unknown): void {
  const { _id, roles, customPool } = (user ?? {}) as Partial<BcmsUser>;
  if (typeof _id !== 'string') return;
  session = { header: { alg: 'none', typ: 'auth.fromRequest' }, payload: { userId: _id, rls: Array.isArray(roles) ? roles : [], props: customPool ?? {} } } as BcmsJwt;
  broadcastState();
}

/**
 * The kept token's header and payload, a fresh copy each time (as BCMS's SDK gives it); else the
 * app's session user's claims; or null. Not verified: the service does that.
 */
function getAccessToken(): BcmsJwt | null {
  const raw = rawToken();
  if (raw === null && session !== null) return structuredClone(session);
  const parts = raw?.split('.');
  if (parts?.length !== 3) return null;
  try {
    const header = decodePart(parts[0] as string);
    const payload = decodePart(parts[1] as string);
    if (header === null || typeof header !== 'object' || payload === null || typeof payload !== 'object') return null;
    return { header, payload } as BcmsJwt;
  } catch {
    return null;
  }
}

function signOut(): void {
  session = null;
  try {
    localStorage.removeItem(TOKEN_KEY);
  } catch {
    // no storage: nothing was kept
  }
  // The `storage` event reaches other documents only: this one is told directly, and so are its plugins' frames.
  window.dispatchEvent(new CustomEvent('bcms:signed-out'));
  broadcastState();
}

// ---------------------------------------------------------------------------------------------
// send, and the SDK's calls

/** A path is the service's API, as in BCMS (`/plugin/x/todo` is `<base>/api/plugin/x/todo`); a full URL is left as it is. */
function requestUrl(url: string): URL {
  const relative = url.startsWith('/') && !url.startsWith('//');
  return new URL(relative ? `${base}/api${url}` : url, location.href);
}

/** The routes that manage API keys: a key made there would outlast the session, so plugin frames never reach them. */
const KEYS_PATH = `${base}/api/extensions/keys`.toLowerCase();

/**
 * Why the page will not make a plugin frame's request, or undefined. A frame acts as the signed-in
 * user while it is open; an API key it made would be a credential of its own, kept after sign-out.
 */
function refusedToFrames(config: BcmsSdkSendConfig): string | undefined {
  let url: URL;
  try {
    url = requestUrl(String(config.url));
  } catch {
    return undefined; // send itself says what is wrong with it
  }
  // As the router matches paths: without regard to case, and with repeated slashes as one.
  const path = url.pathname.toLowerCase().replace(/\/{2,}/g, '/');
  if (url.origin === origin && (path === KEYS_PATH || path.startsWith(`${KEYS_PATH}/`))) {
    return 'A plugin UI may not manage API keys (they would outlast the session): use bcms-ext keys, or the service itself.';
  }
  return undefined;
}

async function send<T>(config: BcmsSdkSendConfig): Promise<T> {
  if (config === null || typeof config !== 'object' || typeof config.url !== 'string') {
    throw new TypeError('send takes { url, method?, data?, headers? }');
  }
  const url = requestUrl(config.url);
  // One value per header, whatever the spelling of its name: fetch would join `authorization` and
  // `Authorization` into one header, and a token put beside a caller's own value could be echoed
  // back to the caller (a plugin's frame) by whatever reads that header.
  const headers = new Headers({ Accept: 'application/json' });
  let asksForToken = false;
  for (const [name, value] of Object.entries(config.headers ?? {})) {
    if (name.toLowerCase() !== 'authorization') headers.set(name, String(value));
    else if (value === '') asksForToken = true;
    else headers.set('Authorization', String(value)); // the caller's own credentials
  }
  let authorized = false;
  /** Asked for the token with none kept: the request goes with the page's cookies alone, for a service that knows the app's session (`auth.fromRequest`). */
  let bySession = false;
  if (asksForToken) {
    // BCMS's convention: an empty Authorization asks for the token; it goes to this origin only,
    // and alone: never beside a value of the caller's.
    headers.delete('Authorization');
    if (config.doNotAuth !== true && url.origin === origin) {
      const token = rawToken();
      if (token === null) bySession = true;
      else {
        headers.set('Authorization', `Bearer ${token}`);
        authorized = true;
      }
    }
  }
  if (config.data !== undefined && !headers.has('Content-Type')) headers.set('Content-Type', 'application/json');
  let response: Response;
  try {
    response = await fetch(url, {
      method: (config.method ?? (config.data === undefined ? 'GET' : 'POST')).toUpperCase(),
      headers,
      body: config.data === undefined ? undefined : JSON.stringify(config.data),
    });
  } catch (error) {
    throw sdkError(-1, (error as Error).message, '-1');
  }
  let answer: unknown;
  try {
    answer = await response.json();
  } catch {
    answer = undefined;
  }
  // The token was refused (expired, revoked): the user is signed out everywhere.
  if (response.status === 401 && authorized) signOut();
  if (bySession) {
    if (response.status === 401) {
      // The app's session the page knew has ended: signed out everywhere, as a refused token signs out.
      if (session !== null) signOut();
      // Nobody was signed in here: BCMS's answer to a call that asks for a token with none kept.
      else throw sdkError(401, 'Not logged in.');
    }
    if (response.ok && url.pathname === USER_PATH) learnSession(answer);
  }
  if (!response.ok) {
    const body = (answer !== null && typeof answer === 'object' ? answer : {}) as { message?: unknown; code?: unknown; error?: { code?: string; message?: string } };
    const message = body.error?.message ?? (typeof body.message === 'string' ? body.message : `${response.status} ${response.statusText}`.trim());
    const code = body.error?.code ?? (typeof body.code === 'string' ? body.code : undefined);
    throw sdkError(response.status, message, code);
  }
  return answer as T;
}

// ---------------------------------------------------------------------------------------------
// The event stream

/** BCMS's lower-case names for its events, as BCMS names them. */
const EVENT_ALIASES: Record<string, string> = { entry: 'ENTRY', template: 'TEMPLATE' };
const subscribers = new Map<string, Set<BcmsSocketCallback>>();
let stream: AbortController | undefined;
let streaming = false;
const RECONNECT_MS = 2000;

/** Reads the Server-Sent Events of `/api/extensions/events` (fetch, so that the token goes in a header, never in the URL). */
async function openStream(): Promise<void> {
  if (stream !== undefined) return;
  const token = rawToken();
  const controller = new AbortController();
  stream = controller;
  let response: Response;
  // Without a token, the app's session (its cookie, for auth.fromRequest) says who listens.
  const headers: Record<string, string> = token === null ? { Accept: 'text/event-stream' } : { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' };
  try {
    response = await fetch(`${base}/api/extensions/events`, { headers, signal: controller.signal });
  } catch (error) {
    stream = undefined;
    throw sdkError(-1, (error as Error).message, '-1');
  }
  if (!response.ok || response.body === null) {
    stream = undefined;
    // A refused token, or the app's session ended: signed out everywhere. Nobody was signed in: only refused.
    if (response.status === 401 && (token !== null || session !== null)) signOut();
    throw sdkError(response.status, `The service's events were refused (${response.status}).`);
  }
  streaming = true;
  broadcastState();
  void readEvents(response.body).finally(() => {
    if (stream !== controller) return;
    stream = undefined;
    streaming = false;
    broadcastState();
    // Dropped by the network or a restart: back while anyone listens.
    if (subscribers.size > 0) setTimeout(() => void openStream().catch(() => undefined), RECONNECT_MS);
  });
}

async function readEvents(body: ReadableStream<Uint8Array>): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch {
      return;
    }
    if (chunk.done) return;
    buffer += decoder.decode(chunk.value, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
      deliver(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
  }
}

/** One event of the stream (`event: NAME`, `data: JSON`) to its subscribers and to `ANY`'s. */
function deliver(block: string): void {
  let name = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (data.length === 0) return;
  let value: unknown;
  try {
    value = JSON.parse(data.join('\n'));
  } catch {
    return;
  }
  for (const callback of [...(subscribers.get(name) ?? []), ...(subscribers.get('ANY') ?? [])]) callSubscriber(name, callback, value);
}

/** The page's socket: one event stream, whoever subscribes (its plugins' frames through the bridge). */
const socket: BcmsSocket = {
  subscribe(event, callback) {
    const name = EVENT_ALIASES[event] ?? String(event);
    let set = subscribers.get(name);
    if (set === undefined) {
      set = new Set();
      subscribers.set(name, set);
    }
    set.add(callback);
    void openStream().catch((error: unknown) => console.warn('window.bcms.sdk.socket:', (error as Error).message));
    return () => {
      set.delete(callback);
      if (set.size === 0) subscribers.delete(name);
      if (subscribers.size === 0) socket.disconnect();
    };
  },
  connect: () => openStream(),
  disconnect() {
    const open = stream;
    stream = undefined;
    streaming = false;
    open?.abort();
    if (open !== undefined) broadcastState();
  },
  connected: () => streaming,
  id: () => null,
  emit: () => undefined,
};

// ---------------------------------------------------------------------------------------------
// window.bcms, made of the parts of where it runs

const id = encodeURIComponent;
const templates = '/extensions/templates';
const entries = (templateId: string): string => `${templates}/${id(templateId)}/entries`;

/** BCMS's `window.bcms` over its parts: the SDK's calls go through `send`, with the token. */
function createBcms(parts: BcmsParts): BcmsGlobal & { users(): BcmsUser[] } {
  /** A call of the SDK's own: always with the token. */
  const call = <T>(path: string, method = 'GET', data?: unknown): Promise<T> => parts.send<T>({ url: path, method, data, headers: { Authorization: '' } });

  /** Who `user.get()` and `user.getAll()` answered, over the users the parts knew: for the store's getters. */
  let learnt: BcmsUser[] = [];
  const users = (): BcmsUser[] => [...learnt, ...parts.users().filter((known) => !learnt.some((user) => user._id === known._id))];
  const remember = (answered: BcmsUser[]): BcmsUser[] => {
    learnt = [...answered, ...learnt.filter((known) => !answered.some((user) => user._id === known._id))];
    broadcastState();
    return answered;
  };

  const isLoggedIn = async (): Promise<boolean> => {
    const token = parts.getAccessToken();
    if (token === null) {
      // No token kept: the service may know the app's session (auth.fromRequest): its user route says.
      try {
        await sdk.user.get();
      } catch {
        return false;
      }
      return parts.getAccessToken() !== null;
    }
    const { exp } = token.payload;
    return typeof exp !== 'number' || exp * 1000 > Date.now();
  };

  const throwable: BcmsThrowable = async <ThrowableResult, OnSuccessResult, OnErrorResult>(
    fn: () => Promise<ThrowableResult>,
    onSuccess?: (data: ThrowableResult) => Promise<OnSuccessResult> | OnSuccessResult,
    onError?: (error: unknown) => Promise<OnErrorResult> | OnErrorResult,
  ): Promise<OnSuccessResult | OnErrorResult> => {
    let output: ThrowableResult;
    try {
      output = await fn();
    } catch (error) {
      if (onError !== undefined) return await onError(error);
      // As BCMS's UI does: the error is logged and shown, and it is what the call resolves to.
      console.error(error);
      const message = (error as { message?: unknown } | null)?.message;
      parts.notification.error(typeof message === 'string' && message !== '' ? message : String(error));
      return error as OnErrorResult;
    }
    return onSuccess === undefined ? (undefined as OnSuccessResult) : await onSuccess(output);
  };

  const modal: BcmsModal = {
    custom: {},
    // The modal's own component (in the plugin's UI) then puts its show and hide in place.
    register({ name }) {
      if (typeof name !== 'string' || name === '') throw new TypeError('modal.register takes { name }');
      if (modal.custom[name] === undefined) modal.custom[name] = { show: () => undefined, hide: () => undefined };
    },
  };

  const store: BcmsVueStore = {
    getters: {
      get user() {
        return users();
      },
      get user_items() {
        return users();
      },
      user_findOne: (query) => users().find(query),
      user_find: (query) => users().filter(query),
    },
  };

  const sdk: BcmsSdk = {
    send: parts.send,
    isLoggedIn,
    getAccessToken: parts.getAccessToken,
    signOut: parts.signOut,
    user: {
      get: async () => remember([await call<BcmsUser>('/extensions/user')])[0] as BcmsUser,
      getAll: async () => remember((await call<{ items: BcmsUser[] }>('/extensions/users')).items),
    },
    socket: parts.socket,
    plugin: {
      getAll: async () => (await call<{ plugins: BcmsSdkPlugin[] }>('/extensions/plugins')).plugins,
    },
    function: {
      getAll: async () => (await call<{ functions: BcmsSdkFunction[] }>('/extensions/functions')).functions,
      call: async <Result>(name: string, body?: unknown) => (await call<{ result: Result }>(`/function/${id(name)}`, 'POST', body ?? {})).result,
    },
    template: {
      get: (templateId: string) => call<BcmsTemplate>(`${templates}/${id(templateId)}`),
      getAll: async () => (await call<{ templates: BcmsTemplate[] }>(templates)).templates,
      getMany: async (ids: string[]) => (ids.length === 0 ? [] : (await call<{ templates: BcmsTemplate[] }>(`${templates}/many?ids=${ids.map(id).join(',')}`)).templates),
      count: async () => (await call<{ count: number }>(`${templates}/count`)).count,
      create: (data: BcmsTemplateCreateData) => call<BcmsTemplate>(templates, 'POST', data),
      update: (data: BcmsTemplateUpdateData) => call<BcmsTemplate>(templates, 'PUT', data),
      deleteById: (templateId: string) => call<true>(`${templates}/${id(templateId)}`, 'DELETE'),
    },
    entry: {
      getAllByTemplateId: async ({ templateId }) => (await call<{ entries: BcmsEntry[] }>(entries(templateId))).entries,
      getAllLite: async ({ templateId }) => (await call<{ entries: BcmsEntryLite[] }>(`${entries(templateId)}/lite`)).entries,
      get: ({ templateId, entryId }) => call<BcmsEntry>(`${entries(templateId)}/${id(entryId)}`),
      count: async ({ templateId }) => (await call<{ count: number }>(`${entries(templateId)}/count`)).count,
      // The template is in the URL; the body is the rest, as the route takes it.
      create: ({ templateId, ...data }: BcmsEntryCreateData) => call<BcmsEntry>(entries(templateId), 'POST', data),
      update: ({ templateId, ...data }: BcmsEntryUpdateData) => call<BcmsEntry>(entries(templateId), 'PUT', data),
      deleteById: ({ templateId, entryId }) => call<true>(`${entries(templateId)}/${id(entryId)}`, 'DELETE'),
    },
    util: { throwable },
  };

  return { sdk, util: { throwable }, notification: parts.notification, confirm: parts.confirm, origin, modal, vue: { store }, users };
}

// ---------------------------------------------------------------------------------------------
// Where this script runs

/** The `window.bcms` of a same-origin parent page made by this script (a page framed by the shell, not sandboxed). */
function parentBcms(): BcmsGlobal | undefined {
  if (window.parent === window) return undefined;
  try {
    const candidate = (window.parent as unknown as { bcms?: BcmsGlobal & { [OURS]?: true } }).bcms;
    return candidate?.[OURS] === true && candidate.origin === origin ? candidate : undefined;
  } catch {
    return undefined; // a parent of another origin
  }
}

function startPage(): BcmsGlobal {
  const bcms = createBcms({ send, getAccessToken, signOut, users: () => [], socket, notification, confirm });
  // Its plugins' frames ask it for what their window.bcms does.
  serveFrames({
    state: () => ({ token: getAccessToken(), users: bcms.users(), connected: streaming }),
    send,
    refuse: refusedToFrames,
    signOut,
    confirm,
    notification,
    subscribe: (event, callback) => socket.subscribe(event, callback),
    connect: () => socket.connect(),
    pluginUrl: `${origin}${base}/plugin/`,
  });
  // A sign-in or sign-out in another tab: the frames learn of it.
  window.addEventListener('storage', (event) => {
    if (event.key === TOKEN_KEY) broadcastState();
  });
  // The toasts' live region is in the page from the start, so the first toast is announced.
  if (document.body !== null) notificationHost();
  else document.addEventListener('DOMContentLoaded', () => notificationHost(), { once: true });
  return bcms;
}

function startFrame(): BcmsGlobal {
  // The real parent, kept before `parent` is given `bcms` below.
  const page = window.parent;
  const bcms = createBcms(connectToPage(page));
  exposeOnParent(page, bcms);
  return bcms;
}

/** A frame of an opaque origin: a plugin UI in its sandbox. */
const sandboxedFrame = window.parent !== window && self.origin === 'null';
const bcms = sandboxedFrame ? startFrame() : (parentBcms() ?? startPage());
Object.defineProperty(bcms, OURS, { value: true });
(window as unknown as { bcms: BcmsGlobal }).bcms = bcms;

// `window.bcms`, served at `<base>/api/extensions/sdk.js` to the admin shell and, injected first
// into each plugin UI's index.html, to every plugin UI. Its names and argument shapes are BCMS's
// (`@becomes/cms-sdk` 3.4.3 and the BCMS UI's `window.bcms`), so a BCMS plugin UI runs as it is.
//
// In a plugin's frame whose parent is the shell, `window.bcms` IS the shell's object (as a BCMS UI
// makes it with `window.bcms = window.parent.bcms`): notifications and the confirm dialog render in
// the shell's page, and a sign-out there reaches the shell directly. A UI opened on its own gets an
// object of its own, rendering in its own page. The token is kept in localStorage (one origin).
import type {
  BcmsEntry,
  BcmsEntryCreateData,
  BcmsEntryLite,
  BcmsEntryUpdateData,
  BcmsGlobal,
  BcmsJwt,
  BcmsNotification,
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

function rawToken(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}

/** One part of a JWT: base64url (RFC 7515 §2) of UTF-8 JSON. */
function decodePart(part: string): unknown {
  const base64 = part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '=');
  const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

/** The kept token decoded, a fresh copy each time (as BCMS's SDK gives it), or null. Not verified: the service does that. */
function getAccessToken(): BcmsJwt | null {
  const raw = rawToken();
  const parts = raw?.split('.');
  if (parts?.length !== 3) return null;
  try {
    const header = decodePart(parts[0] as string);
    const payload = decodePart(parts[1] as string);
    if (header === null || typeof header !== 'object' || payload === null || typeof payload !== 'object') return null;
    return { header, payload, signature: parts[2] } as BcmsJwt;
  } catch {
    return null;
  }
}

async function isLoggedIn(): Promise<boolean> {
  const token = getAccessToken();
  if (token === null) return false;
  const { exp } = token.payload;
  return typeof exp !== 'number' || exp * 1000 > Date.now();
}

function signOut(): void {
  localStorage.removeItem(TOKEN_KEY);
  // The `storage` event reaches other documents only: this one is told directly.
  window.dispatchEvent(new CustomEvent('bcms:signed-out'));
  // A UI with an object of its own inside a same-origin page tells that page, with an event of its realm.
  if (window.parent !== window) {
    try {
      window.parent.dispatchEvent(new (window.parent as unknown as typeof globalThis).CustomEvent('bcms:signed-out'));
    } catch {
      // A parent of another origin: it is not the shell, and has nothing to be told.
    }
  }
}

// ---------------------------------------------------------------------------------------------
// send, and the SDK's calls

async function send<T>(config: BcmsSdkSendConfig): Promise<T> {
  if (config === null || typeof config !== 'object' || typeof config.url !== 'string') {
    throw new TypeError('send takes { url, method?, data?, headers? }');
  }
  // A path is the service's API, as in BCMS (`/plugin/x/todo` is `<base>/api/plugin/x/todo`); a full URL is left as it is.
  const relative = config.url.startsWith('/') && !config.url.startsWith('//');
  const url = new URL(relative ? `${base}/api${config.url}` : config.url, location.href);
  const headers: Record<string, string> = { Accept: 'application/json' };
  let authorized = false;
  for (const [name, value] of Object.entries(config.headers ?? {})) {
    if (name.toLowerCase() !== 'authorization') headers[name] = value;
    else if (value !== '') headers[name] = value; // the caller's own credentials
    else if (config.doNotAuth !== true && url.origin === origin) {
      // BCMS's convention: an empty Authorization asks for the token; it goes to this origin only.
      const token = rawToken();
      if (token === null) {
        signOut();
        throw sdkError(401, 'Not logged in.');
      }
      headers.Authorization = `Bearer ${token}`;
      authorized = true;
    }
  }
  if (config.data !== undefined && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-type')) headers['Content-Type'] = 'application/json';
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
  if (!response.ok) {
    const body = (answer !== null && typeof answer === 'object' ? answer : {}) as { message?: unknown; code?: unknown; error?: { code?: string; message?: string } };
    const message = body.error?.message ?? (typeof body.message === 'string' ? body.message : `${response.status} ${response.statusText}`.trim());
    const code = body.error?.code ?? (typeof body.code === 'string' ? body.code : undefined);
    throw sdkError(response.status, message, code);
  }
  return answer as T;
}

/** A call of the SDK's own: always with the token. */
function call<T>(path: string, method = 'GET', data?: unknown): Promise<T> {
  return send<T>({ url: path, method, data, headers: { Authorization: '' } });
}

const id = encodeURIComponent;
const templates = '/extensions/templates';
const entries = (templateId: string): string => `${templates}/${id(templateId)}/entries`;

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
    notification.error(typeof message === 'string' && message !== '' ? message : String(error));
    return error as OnErrorResult;
  }
  return onSuccess === undefined ? (undefined as OnSuccessResult) : await onSuccess(output);
};

// ---------------------------------------------------------------------------------------------
// Users, the socket, modals and the store

/** The users the shell knows: who `user.get()` and `user.getAll()` answered, for the store's getters. */
let knownUsers: BcmsUser[] = [];
const remember = (users: BcmsUser[]): BcmsUser[] => {
  knownUsers = [...users, ...knownUsers.filter((known) => !users.some((user) => user._id === known._id))];
  return users;
};

/** BCMS's lower-case names for its events, as DESIGN.md gives them. */
const EVENT_ALIASES: Record<string, string> = { entry: 'ENTRY', template: 'TEMPLATE' };
const subscribers = new Map<string, Set<BcmsSocketCallback>>();
let stream: AbortController | undefined;
let streaming = false;
const RECONNECT_MS = 2000;

/** Reads the Server-Sent Events of `/api/extensions/events` (fetch, so that the token goes in a header, never in the URL). */
async function openStream(): Promise<void> {
  if (stream !== undefined) return;
  const token = rawToken();
  if (token === null) throw sdkError(401, 'Not logged in.');
  const controller = new AbortController();
  stream = controller;
  let response: Response;
  try {
    response = await fetch(`${base}/api/extensions/events`, { headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' }, signal: controller.signal });
  } catch (error) {
    stream = undefined;
    throw sdkError(-1, (error as Error).message, '-1');
  }
  if (!response.ok || response.body === null) {
    stream = undefined;
    if (response.status === 401) signOut();
    throw sdkError(response.status, `The service's events were refused (${response.status}).`);
  }
  streaming = true;
  void readEvents(response.body).finally(() => {
    if (stream !== controller) return;
    stream = undefined;
    streaming = false;
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
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
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
  for (const callback of [...(subscribers.get(name) ?? []), ...(subscribers.get('ANY') ?? [])]) {
    try {
      const result = callback(value) as { catch?: (handler: (error: unknown) => void) => unknown } | undefined;
      result?.catch?.((error) => console.error(`socket ${name}:`, error));
    } catch (error) {
      console.error(`socket ${name}:`, error);
    }
  }
}

const socket: BcmsSocket = {
  subscribe(event, callback) {
    const name = EVENT_ALIASES[event] ?? String(event);
    let set = subscribers.get(name);
    if (set === undefined) subscribers.set(name, (set = new Set()));
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
  },
  connected: () => streaming,
  id: () => null,
  emit: () => undefined,
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
      return knownUsers;
    },
    get user_items() {
      return knownUsers;
    },
    user_findOne: (query) => knownUsers.find(query),
    user_find: (query) => knownUsers.filter(query),
  },
};

const sdk: BcmsSdk = {
  send,
  isLoggedIn,
  getAccessToken,
  signOut,
  user: {
    get: async () => remember([await call<BcmsUser>('/extensions/user')])[0] as BcmsUser,
    getAll: async () => remember((await call<{ items: BcmsUser[] }>('/extensions/users')).items),
  },
  socket,
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

// ---------------------------------------------------------------------------------------------
// Notifications and the confirm dialog: plain DOM in this script's own page (the shell's, for frames)

// The confirm dialog's rules reach its own parts only: toasts live inside it while it is open.
const STYLE = `
.bcms-notifications { position: fixed; right: 1rem; bottom: 1rem; z-index: 2147483000; display: grid; gap: 0.5rem; width: min(24rem, calc(100vw - 2rem)); margin: 0; padding: 0; list-style: none; font: 0.95rem/1.4 system-ui, sans-serif; }
.bcms-notification { display: flex; align-items: center; gap: 0.75rem; padding: 0.75rem 0.75rem 0.75rem 1rem; border-radius: 0.5rem; border-left: 0.35rem solid; background: #fff; color: #1d2330; box-shadow: 0 4px 16px #0003; }
.bcms-notification p { margin: 0; flex: 1; overflow-wrap: anywhere; }
.bcms-notification-success { border-color: #1e7d43; }
.bcms-notification-info { border-color: #3357d6; }
.bcms-notification-warning { border-color: #a35a00; }
.bcms-notification-error { border-color: #b00020; }
.bcms-notification button { flex: none; padding: 0 0.4rem; border: 0; border-radius: 0.3rem; background: transparent; color: #5b6475; font: inherit; font-size: 1.2rem; line-height: 1.4; cursor: pointer; }
.bcms-notification button:hover { background: #eef1f6; color: #1d2330; }
.bcms-confirm { max-width: min(28rem, calc(100vw - 2rem)); padding: 1.25rem 1.5rem; border: 0; border-radius: 0.75rem; color: #1d2330; box-shadow: 0 8px 32px #0004; font: 1rem/1.45 system-ui, sans-serif; }
.bcms-confirm::backdrop { background: #1d233066; }
.bcms-confirm > h2 { margin: 0 0 0.5rem; font-size: 1.15rem; }
.bcms-confirm > p { margin: 0 0 1.25rem; white-space: pre-wrap; }
.bcms-confirm-buttons { display: flex; justify-content: flex-end; gap: 0.5rem; }
.bcms-confirm-buttons button { padding: 0.5rem 1rem; border: 1px solid #3357d6; border-radius: 0.4rem; background: #fff; color: #3357d6; font: inherit; cursor: pointer; }
.bcms-confirm-buttons button[value="ok"] { background: #3357d6; color: #fff; }
.bcms-notification :focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
/* The dialog's focus is always shown, however it was opened (a mouse click gives no :focus-visible). */
.bcms-confirm-buttons button:focus { outline: 3px solid #0b57d0; outline-offset: 2px; }
`;

/** The page's stylesheet for notifications and dialogs, added once. */
function ensureStyle(): void {
  if (document.getElementById('bcms-extensions-style') !== null) return;
  const style = document.createElement('style');
  style.id = 'bcms-extensions-style';
  style.textContent = STYLE;
  document.head.append(style);
}

let notificationList: HTMLElement | null = null;

/** The list that holds the toasts, made at once so that it is in the page before the first one comes. */
function notificationHost(): HTMLElement {
  if (notificationList?.isConnected) return notificationList;
  ensureStyle();
  // A plain container, not a landmark: an empty region in every page would be noise; the toasts carry the roles.
  notificationList = document.createElement('div');
  notificationList.className = 'bcms-notifications';
  document.body.append(notificationList);
  return notificationList;
}

/** How long a toast stays: errors and warnings longer, as there is more to read and act on. */
const NOTIFICATION_MS = { success: 5000, info: 5000, warning: 8000, error: 8000 } as const;

function notify(kind: keyof typeof NOTIFICATION_MS, text: string): void {
  const host = notificationHost();
  const toast = document.createElement('div');
  toast.className = `bcms-notification bcms-notification-${kind}`;
  // status: announced when the reader is free; alert: announced at once.
  toast.setAttribute('role', kind === 'success' || kind === 'info' ? 'status' : 'alert');
  const message = document.createElement('p');
  const dismiss = document.createElement('button');
  dismiss.type = 'button';
  dismiss.textContent = '×';
  dismiss.setAttribute('aria-label', 'Dismiss notification');
  toast.append(message, dismiss);
  host.append(toast);
  // The text arrives after the region is in the page: screen readers announce a change to a live
  // region, and some miss a region that appears with its text already in it. A timer, not an
  // animation frame: those wait while the tab is hidden, and the toast would go by empty.
  setTimeout(() => (message.textContent = String(text)), 50);
  // It goes by itself; not while the pointer or the focus is on it (time to read it: WCAG 2.2.1).
  let left = NOTIFICATION_MS[kind];
  let started = Date.now();
  let timer = setTimeout(remove, left);
  function remove(): void {
    clearTimeout(timer);
    // The focus on its button would be lost with it: it goes back to the page.
    if (toast.contains(document.activeElement)) (document.activeElement as HTMLElement).blur();
    toast.remove();
  }
  const pause = (): void => {
    clearTimeout(timer);
    left -= Date.now() - started;
  };
  const resume = (): void => {
    if (toast.matches(':hover') || toast.contains(document.activeElement)) return;
    started = Date.now();
    timer = setTimeout(remove, Math.max(left, 1500));
  };
  toast.addEventListener('mouseenter', pause);
  toast.addEventListener('focusin', pause);
  toast.addEventListener('mouseleave', resume);
  toast.addEventListener('focusout', () => setTimeout(resume));
  dismiss.addEventListener('click', remove);
}

const notification: BcmsNotification = {
  success: (text) => notify('success', text),
  info: (text) => notify('info', text),
  warning: (text) => notify('warning', text),
  error: (text) => notify('error', text),
};

/** The focused element, looked for inside same-origin frames too (the shell's focus is on a plugin's frame). */
function deepActiveElement(): HTMLElement | null {
  let active: Element | null = document.activeElement;
  while (active !== null && active.tagName === 'IFRAME') {
    let inner: Element | null | undefined;
    try {
      inner = (active as HTMLIFrameElement).contentDocument?.activeElement;
    } catch {
      inner = undefined; // another origin
    }
    if (inner === null || inner === undefined || inner.tagName === 'BODY') break;
    active = inner;
  }
  return active as HTMLElement | null;
}

let dialogCount = 0;

/** BCMS's `confirm(title, text)`: a modal dialog (role alertdialog) with Cancel and OK; Escape cancels; the focus comes back. */
function confirm(title: string, text: string): Promise<boolean> {
  ensureStyle();
  const returnTo = deepActiveElement();
  const n = ++dialogCount;
  const dialog = document.createElement('dialog');
  dialog.className = 'bcms-confirm';
  dialog.setAttribute('role', 'alertdialog');
  dialog.setAttribute('aria-labelledby', `bcms-confirm-title-${n}`);
  dialog.setAttribute('aria-describedby', `bcms-confirm-text-${n}`);
  const heading = document.createElement('h2');
  heading.id = `bcms-confirm-title-${n}`;
  heading.textContent = String(title);
  const body = document.createElement('p');
  body.id = `bcms-confirm-text-${n}`;
  body.textContent = String(text);
  const buttons = document.createElement('div');
  buttons.className = 'bcms-confirm-buttons';
  const button = (value: string, label: string): HTMLButtonElement => {
    const element = document.createElement('button');
    element.type = 'button';
    element.value = value;
    element.textContent = label;
    element.addEventListener('click', () => dialog.close(value));
    return element;
  };
  const cancel = button('cancel', 'Cancel');
  buttons.append(cancel, button('ok', 'OK'));
  dialog.append(heading, body, buttons);
  document.body.append(dialog);
  // A modal dialog makes the rest of the page inert, toasts included (neither announced nor
  // dismissable): while it is open, they live inside it.
  const toasts = notificationHost();
  const toastsHome = toasts.parentElement ?? document.body;
  return new Promise((resolve) => {
    // Escape closes a modal dialog with an empty returnValue: that is a Cancel.
    dialog.addEventListener('close', () => {
      if (toasts.parentElement === dialog) toastsHome.append(toasts);
      dialog.remove();
      if (returnTo?.isConnected) returnTo.focus();
      resolve(dialog.returnValue === 'ok');
    });
    dialog.showModal();
    dialog.append(toasts);
    // The least destructive choice has the focus first (WAI-ARIA APG, alert dialog).
    cancel.focus();
  });
}

// ---------------------------------------------------------------------------------------------
// window.bcms

/** The shell's `window.bcms`, when this page is a plugin's frame inside it. */
function shellBcms(): BcmsGlobal | undefined {
  if (window.parent === window) return undefined;
  try {
    const candidate = (window.parent as unknown as { bcms?: BcmsGlobal & { [OURS]?: true } }).bcms;
    return candidate?.[OURS] === true && candidate.origin === origin ? candidate : undefined;
  } catch {
    return undefined; // a parent of another origin
  }
}

const own: BcmsGlobal & { [OURS]: true } = { sdk, util: { throwable }, notification, confirm, origin, modal, vue: { store }, [OURS]: true };
(window as unknown as { bcms: BcmsGlobal }).bcms = shellBcms() ?? own;
// The toasts' live region is in the page from the start, so the first toast is announced.
if ((window as unknown as { bcms: BcmsGlobal }).bcms === own) {
  if (document.body !== null) notificationHost();
  else document.addEventListener('DOMContentLoaded', () => notificationHost(), { once: true });
}

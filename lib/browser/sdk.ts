// `window.bcms.sdk`, served at `<base>/api/extensions/sdk.js` to the admin shell and, injected
// first into each plugin UI's index.html, to every plugin UI. Same origin as the shell, so the
// token kept in localStorage is shared, and a sign-out in a plugin's frame reaches the shell
// through the `storage` event.
import type { BcmsSdk, BcmsSdkError, BcmsSdkFunction, BcmsSdkPlugin, BcmsEntry, BcmsTemplate } from '../sdk/types';

const TOKEN_KEY = 'bcms.accessToken';
/** Where the service is: this script's own URL, less `/api/extensions/sdk.js` (the router may be mounted under a prefix). */
const base = new URL(import.meta.url).pathname.replace(/\/api\/extensions\/sdk\.js$/, '');

function sdkError(status: number, message: string, code?: string): BcmsSdkError {
  return Object.assign(new Error(message), { name: 'BcmsSdkError', status, code }) as BcmsSdkError;
}

function getAccessToken(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}

function signOut(): void {
  localStorage.removeItem(TOKEN_KEY);
  // The `storage` event reaches other documents only: this one (the shell itself) is told directly.
  window.dispatchEvent(new CustomEvent('bcms:signed-out'));
  // A plugin's frame tells the shell around it (same origin), with an event of the shell's own realm.
  if (window.parent !== window) {
    try {
      window.parent.dispatchEvent(new (window.parent as unknown as typeof globalThis).CustomEvent('bcms:signed-out'));
    } catch {
      // A parent of another origin: it is not the shell, and has nothing to be told.
    }
  }
}

async function send<T>(config: { url: string; method?: string; data?: unknown }): Promise<T> {
  // A path is the service's (with the router's mount prefix); the token goes to this origin only.
  const url = new URL(config.url.startsWith('/') && !config.url.startsWith('//') ? base + config.url : config.url, location.href);
  const token = getAccessToken();
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (token !== null && url.origin === location.origin) headers.Authorization = `Bearer ${token}`;
  if (config.data !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url, {
    method: config.method ?? (config.data === undefined ? 'GET' : 'POST'),
    headers,
    body: config.data === undefined ? undefined : JSON.stringify(config.data),
  });
  let answer: unknown;
  try {
    answer = await response.json();
  } catch {
    answer = undefined;
  }
  if (response.status === 401) signOut();
  if (!response.ok) {
    const { message, error } = (answer ?? {}) as { message?: string; error?: { code?: string; message?: string } };
    throw sdkError(response.status, error?.message ?? message ?? `${response.status} ${response.statusText}`, error?.code);
  }
  return answer as T;
}

const sdk: BcmsSdk = {
  send,
  isLoggedIn: () => getAccessToken() !== null,
  getAccessToken,
  signOut,
  plugin: {
    getAll: async () => (await send<{ plugins: BcmsSdkPlugin[] }>({ url: '/api/extensions/plugins' })).plugins,
  },
  function: {
    getAll: async () => (await send<{ functions: BcmsSdkFunction[] }>({ url: '/api/extensions/functions' })).functions,
    call: async <Result>(name: string, body?: unknown) =>
      (await send<{ result: Result }>({ url: `/api/function/${encodeURIComponent(name)}`, method: 'POST', data: body ?? {} })).result,
  },
  template: {
    getAll: async () => (await send<{ templates: BcmsTemplate[] }>({ url: '/api/extensions/templates' })).templates,
    get: (id: string) => send<BcmsTemplate>({ url: `/api/extensions/templates/${encodeURIComponent(id)}` }),
  },
  entry: {
    getAllByTemplateId: async (templateId: string) =>
      (await send<{ entries: BcmsEntry[] }>({ url: `/api/extensions/templates/${encodeURIComponent(templateId)}/entries` })).entries,
    get: (templateId: string, entryId: string) =>
      send<BcmsEntry>({ url: `/api/extensions/templates/${encodeURIComponent(templateId)}/entries/${encodeURIComponent(entryId)}` }),
  },
};

(window as unknown as { bcms: { sdk: BcmsSdk } }).bcms = { sdk };

// The admin shell, served at `<admin.path>` (default /bcms): sign-in, then a navigation whose
// "Plugins" section lists every plugin with a UI; choosing one opens its UI in a frame, and the URL
// (`<admin.path>/plugins/<name>`) says which, so reload and back work. Plain DOM: the shell must
// not impose a framework on plugin UIs, which bring their own (Vue 3).
import type { BcmsGlobal, BcmsSdkPlugin } from '../sdk/types';

interface ShellConfig {
  title: string;
  /** The host's sign-in route: POST { email, password } answers { accessToken }. */
  loginUrl: string;
  /** Where the shell is served, e.g. /bcms (the router's mount prefix included). */
  shellPath: string;
}

const config = JSON.parse((document.getElementById('bcms-shell-config') as HTMLElement).textContent as string) as ShellConfig;
const sdk = (window as unknown as { bcms: BcmsGlobal }).bcms.sdk;
const root = document.getElementById('bcms-shell') as HTMLElement;
let plugins: BcmsSdkPlugin[] = [];

/** An element with attributes and children; text children are text, never HTML. */
function h(tag: string, attributes: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

/** The plugin the URL names, if any. */
function openPluginName(): string | null {
  const rest = location.pathname.slice(config.shellPath.length);
  const match = /^\/plugins\/([^/]+)\/?$/.exec(rest);
  if (!match) return null;
  try {
    return decodeURIComponent(match[1] as string);
  } catch {
    return match[1] as string; // a malformed escape names no plugin, and says so
  }
}

function renderSignIn(notice?: string): void {
  // A 401 in a plugin's frame arrives twice (its event and the storage event): one sign-in, one alert.
  if (notice !== undefined && root.querySelector('.bcms-signin') !== null) return;
  document.title = `Sign in · ${config.title}`;
  const email = h('input', { id: 'bcms-email', name: 'email', type: 'email', autocomplete: 'username', required: '' });
  const password = h('input', { id: 'bcms-password', name: 'password', type: 'password', autocomplete: 'current-password', required: '' });
  const status = h('p', { role: 'alert', class: 'bcms-error' }, notice ?? '');
  const form = h(
    'form',
    { 'aria-labelledby': 'bcms-signin-title' },
    h('h1', { id: 'bcms-signin-title' }, `Sign in to ${config.title}`),
    h('label', { for: 'bcms-email' }, 'Email'),
    email,
    h('label', { for: 'bcms-password' }, 'Password'),
    password,
    h('button', { type: 'submit' }, 'Sign in'),
    status,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    status.textContent = '';
    void signIn((email as HTMLInputElement).value, (password as HTMLInputElement).value).catch((error: Error) => {
      status.textContent = error.message;
      (password as HTMLInputElement).focus();
    });
  });
  root.replaceChildren(h('main', { class: 'bcms-signin' }, form));
  (email as HTMLInputElement).focus();
}

async function signIn(email: string, password: string): Promise<void> {
  const response = await fetch(config.loginUrl, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email, password }) });
  const answer = (await response.json().catch(() => ({}))) as { accessToken?: string; message?: string };
  if (!response.ok || typeof answer.accessToken !== 'string') throw new Error(answer.message ?? `Sign-in failed (${response.status}).`);
  localStorage.setItem('bcms.accessToken', answer.accessToken);
  await renderApp();
}

async function renderApp(): Promise<void> {
  root.replaceChildren(h('main', { 'aria-busy': 'true' }, h('p', { role: 'status' }, 'Loading plugins…')));
  try {
    plugins = (await sdk.plugin.getAll()).filter((plugin) => plugin.uiUrl !== null);
  } catch (error) {
    if (!(await sdk.isLoggedIn())) return; // a 401: the sign-out listener shows the sign-in
    root.replaceChildren(h('main', {}, h('p', { role: 'alert', class: 'bcms-error' }, `The plugins could not be listed: ${(error as Error).message}`)));
    return;
  }
  const signOutButton = h('button', { type: 'button', class: 'bcms-signout' }, 'Sign out');
  signOutButton.addEventListener('click', () => sdk.signOut());
  const list = h('ul', { 'aria-labelledby': 'bcms-plugins-heading' });
  for (const plugin of plugins) {
    const link = h('a', { href: `${config.shellPath}/plugins/${encodeURIComponent(plugin.name)}`, 'data-plugin': plugin.name }, plugin.label);
    link.addEventListener('click', (event) => {
      // Ctrl/Cmd/Shift-click and middle clicks keep their meaning: a new tab or window.
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      history.pushState(null, '', link.getAttribute('href'));
      showPlugin();
    });
    list.append(h('li', {}, link));
  }
  const nav = h(
    'nav',
    { 'aria-label': `${config.title} navigation` },
    h('h2', { id: 'bcms-plugins-heading', tabindex: '-1' }, 'Plugins'),
    plugins.length > 0 ? list : h('p', {}, 'No plugin has a UI yet.'),
  );
  root.replaceChildren(
    h('header', {}, h('span', { class: 'bcms-title' }, config.title), signOutButton),
    h('div', { class: 'bcms-layout' }, nav, h('main', { id: 'bcms-main' })),
  );
  showPlugin();
  // After signing in, the keyboard starts at the navigation, not at the top of the page.
  ((nav.querySelector('a[aria-current="page"]') ?? nav.querySelector('a') ?? nav.querySelector('h2')) as HTMLElement).focus();
}

/** Opens the plugin the URL names in the main area (or says to choose one), and marks its link. */
function showPlugin(): void {
  const main = document.getElementById('bcms-main');
  if (main === null) return;
  const name = openPluginName();
  const plugin = plugins.find((candidate) => candidate.name === name);
  for (const link of document.querySelectorAll('nav a[data-plugin]')) {
    if (link.getAttribute('data-plugin') === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (plugin === undefined) {
    document.title = config.title;
    main.replaceChildren(h('h1', {}, name === null ? 'Choose a plugin' : `No plugin "${name}" has a UI`), h('p', {}, 'The Plugins section lists every plugin with a UI.'));
    return;
  }
  document.title = `${plugin.label} · ${config.title}`;
  const current = main.querySelector('iframe');
  if (current?.getAttribute('data-plugin') === plugin.name) return;
  main.replaceChildren(h('iframe', { src: plugin.uiUrl as string, title: `${plugin.label} plugin`, 'data-plugin': plugin.name }));
}

window.addEventListener('bcms:signed-out', () => renderSignIn('You were signed out. Sign in again.'));
window.addEventListener('storage', (event) => {
  if (event.key === 'bcms.accessToken' && event.newValue === null) renderSignIn('You were signed out. Sign in again.');
});
window.addEventListener('popstate', () => showPlugin());

void sdk.isLoggedIn().then((signedIn) => (signedIn ? renderApp() : renderSignIn()));

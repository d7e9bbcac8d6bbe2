// The admin shell, served at `<admin.path>` (default /bcms): sign-in, then a top bar with the
// signed-in user and "Sign out", and a navigation whose "Plugins" section lists every plugin with a
// UI; choosing one opens its UI in a frame, and the URL (`<admin.path>/plugins/<name>`) says which,
// so reload and back work. Its "API" link opens `<admin.path>/api`: the service's OpenAPI document,
// rendered by Swagger UI (api.ts), loaded only then; its "Events" and "Jobs" links open each event
// handler's recent deliveries and each job's recent runs (activity.ts). On a narrow screen the stylesheet folds the navigation (and the user)
// into a menu that the top bar's "Menu" button opens. Plain DOM: the shell must not impose a
// framework on plugin UIs, which bring their own (Vue 3).
import type { BcmsGlobal, BcmsSdkError, BcmsSdkPlugin, BcmsUser } from '../sdk/types';
import { FRAME_SANDBOX, frameName, type FrameRouteDetail } from './frame-bridge.js';

interface ShellConfig {
  title: string;
  /** The app's sign-in route (`auth.signInPath`, or `admin.loginUrl`): POST { email, password }. */
  signInPath: string;
  /** The field of its answer that holds the token (`auth.tokenField`; a dotted path reads a nested one). */
  tokenField: string;
  /** The service knows the app's users (`auth.fromRequest`): the app's session (its cookie) may be all that signs the user in. */
  appUsers: boolean;
  /** Where the shell is served, e.g. /bcms (the router's mount prefix included). */
  shellPath: string;
  /** Whether the service serves its OpenAPI document (the `openapi` option is not 'off'): the API view. */
  api: boolean;
}

/** A message above the sign-in form: news (`info`), or a `warning` that the session ended on its own. */
interface Notice {
  text: string;
  tone: 'info' | 'warning';
}

/** The user chose to sign out: nothing went wrong, so it reads as information. */
const SIGNED_OUT_BY_CHOICE: Notice = { text: 'You signed out.', tone: 'info' };
/** The token expired or was refused (or another tab signed out): the user did not ask for it. */
const SESSION_ENDED: Notice = { text: 'You were signed out. Sign in again.', tone: 'warning' };
/** Signed out of the shell while the app's own session (which the shell cannot end) stays. */
const SIGNED_OUT_OF_SHELL: Notice = { text: "You signed out. The app's own session stays open until you sign out of the app.", tone: 'info' };

/** Where the SDK keeps the token (sdk.ts). */
const TOKEN_KEY = 'bcms.accessToken';
/**
 * Set in this tab when its user signed out while the app's session stays (`appUsers`): a reload
 * shows the sign-in, rather than the session signing them in again behind their back.
 */
const SIGNED_OUT_KEY = 'bcms.signedOut';

const config = JSON.parse((document.getElementById('bcms-shell-config') as HTMLElement).textContent as string) as ShellConfig;
const sdk = (window as unknown as { bcms: BcmsGlobal }).bcms.sdk;
const root = document.getElementById('bcms-shell') as HTMLElement;
let plugins: BcmsSdkPlugin[] = [];
/** While the shell's own "Sign out" runs, what the sign-in then says: the SDK's `bcms:signed-out` event is dispatched synchronously inside it. */
let signingOut: Notice | undefined;
/** While the app's first answers are awaited: their 401 is said by renderApp, not by the sign-out listener. */
let loading = false;

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

/** The API view's address: `<admin.path>/api` (a plugin named "api" is at `<admin.path>/plugins/api`). */
function apiHref(): string {
  return `${config.shellPath}/api`;
}

/** The Developers section's views beside the plugins: each at `<admin.path>/<view>`. */
type View = 'api' | 'events' | 'jobs';
const VIEW_LABELS: Readonly<Record<View, string>> = { api: 'API', events: 'Events', jobs: 'Jobs' };

/** The view the URL names, if any (not the API view on a service that does not serve its document). */
function openView(): View | null {
  for (const view of Object.keys(VIEW_LABELS) as View[]) {
    if (view === 'api' && !config.api) continue;
    const href = `${config.shellPath}/${view}`;
    if (location.pathname === href || location.pathname === `${href}/`) return view;
  }
  return null;
}

function pluginHref(plugin: BcmsSdkPlugin): string {
  return `${config.shellPath}/plugins/${encodeURIComponent(plugin.name)}`;
}

/** At the shell's own address (no plugin, nor anything else, named below it). */
function atShellRoot(): boolean {
  return location.pathname === config.shellPath || location.pathname === `${config.shellPath}/`;
}

/** Shown on screen (the stylesheet hides the folded navigation with display: none). */
function isShown(element: Element): boolean {
  return element.getClientRects().length > 0;
}

/** The sign-in form, with a notice above it; `replace`: even over a sign-in already shown (with another notice). */
function renderSignIn(notice?: Notice, replace = false): void {
  // A 401 in a plugin's frame arrives twice (its event and the storage event): one sign-in, one alert.
  if (notice !== undefined && !replace && root.querySelector('.bcms-signin') !== null) return;
  document.title = `Sign in · ${config.title}`;
  const email = h('input', { id: 'bcms-email', name: 'email', type: 'email', autocomplete: 'username', required: '' });
  const password = h('input', { id: 'bcms-password', name: 'password', type: 'password', autocomplete: 'current-password', required: '' });
  const status = h('p', { role: 'alert', class: 'bcms-error' });
  const form = h(
    'form',
    { 'aria-labelledby': 'bcms-signin-title' },
    h('h1', { id: 'bcms-signin-title' }, `Sign in to ${config.title}`),
    ...(notice === undefined ? [] : [noticeElement(notice)]),
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

/** Information is a polite status; a warning is an alert, announced at once. */
function noticeElement(notice: Notice): HTMLElement {
  return h('p', { role: notice.tone === 'info' ? 'status' : 'alert', class: `bcms-notice bcms-notice-${notice.tone}` }, notice.text);
}

async function signIn(email: string, password: string): Promise<void> {
  const response = await fetch(config.signInPath, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email, password }) });
  const answer = (await response.json().catch(() => undefined)) as unknown;
  const said = (answer as { message?: unknown } | null | undefined)?.message;
  const message = typeof said === 'string' ? said : undefined;
  if (response.status === 404 && message === undefined) {
    // No sign-in route there: the shell has no users of its own, it posts to the app's route.
    throw new Error(`Sign-in failed: nothing answers at ${config.signInPath} (404). The auth option's signInPath (admin.loginUrl before it) must name your app's sign-in route.`);
  }
  if (!response.ok) throw new Error(message ?? `Sign-in failed (${response.status}).`);
  forgetSignOut();
  const token = fieldOf(answer, config.tokenField);
  if (typeof token === 'string' && token !== '') {
    localStorage.setItem(TOKEN_KEY, token);
    await renderApp((error) => ({ text: `Signed in, but the service refused the token that ${config.signInPath} answered: ${error.message}`, tone: 'warning' }));
    return;
  }
  const missing = `The sign-in at ${config.signInPath} answered ${response.status} without a token in its field "${config.tokenField}" (${fieldsOf(answer)}).`;
  if (!config.appUsers) throw new Error(`${missing} Set the auth option's tokenField to the field that holds the token.`);
  // The app may sign in by its session alone: its answer set a cookie that auth.fromRequest reads.
  await renderApp((error) => ({
    text: `${missing} Nor does the service know the app's session (${error.message}): set the auth option's tokenField to the field that holds the token, or have auth.fromRequest read the session.`,
    tone: 'warning',
  }));
}

/** The value at a dotted path of the sign-in answer (`accessToken`, `data.token`). */
function fieldOf(answer: unknown, path: string): unknown {
  let value = answer;
  for (const name of path.split('.')) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[name] : undefined;
  return value;
}

/** What the sign-in answer holds, for a message that says where the token was looked for. */
function fieldsOf(answer: unknown): string {
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) return 'its answer is not a JSON object';
  const names = Object.keys(answer);
  return names.length === 0 ? 'its answer is an empty object' : `its answer has: ${names.join(', ')}`;
}

/** The signed-out mark of this tab (SIGNED_OUT_KEY). */
function signedOutHere(): boolean {
  return sessionStorage.getItem(SIGNED_OUT_KEY) !== null;
}

function forgetSignOut(): void {
  sessionStorage.removeItem(SIGNED_OUT_KEY);
}

/**
 * Lists the plugins and asks who is signed in, then shows the app. A 401 shows the sign-in (with
 * `refused`'s notice right after a sign-in); any other refusal (a user without a role that holds
 * READ, say) shows the top bar, with "Sign out", and says why.
 */
async function renderApp(refused?: (error: BcmsSdkError) => Notice): Promise<void> {
  root.replaceChildren(h('main', { 'aria-busy': 'true' }, h('p', { role: 'status' }, 'Loading plugins…')));
  const hadToken = localStorage.getItem(TOKEN_KEY) !== null;
  let listed: PromiseSettledResult<BcmsSdkPlugin[]>;
  let named: PromiseSettledResult<BcmsUser>;
  loading = true;
  try {
    // Who is signed in only labels the top bar: a failure there must not keep the plugins away.
    [listed, named] = await Promise.allSettled([sdk.plugin.getAll(), sdk.user.get()]);
  } finally {
    loading = false;
  }
  const user = named.status === 'fulfilled' ? named.value : null;
  if (listed.status === 'rejected') {
    const error = listed.reason as BcmsSdkError;
    if (error.status === 401) {
      // No user the service knows (the SDK has forgotten a refused token): a token that just came from the sign-in says why.
      renderSignIn(refused?.(error) ?? (hadToken ? SESSION_ENDED : undefined), true);
      return;
    }
    showFrame(user, null).append(...refusal(error, user));
    // The way out first: Sign out (or, folded away, the button that opens the menu that holds it).
    focusOrMenu(root.querySelector('.bcms-signout') as HTMLElement);
    return;
  }
  plugins = listed.value.filter((plugin) => plugin.uiUrl !== null);
  const nav = navigation();
  showFrame(user, nav);
  showPlugin();
  // After signing in, the keyboard starts at the navigation (or, folded away, at the button that opens it).
  focusOrMenu((nav.querySelector('a[aria-current="page"]') ?? nav.querySelector('a') ?? nav.querySelector('h2')) as HTMLElement);
}

/** Focuses `element`, or the menu's button when the folded menu hides it. */
function focusOrMenu(element: HTMLElement): void {
  (isShown(element) ? element : (root.querySelector('.bcms-menu-button') as HTMLElement)).focus();
}

/**
 * The app's frame: the top bar, the menu (the user, "Sign out" and the navigation, when there is
 * one) and the main area, which it returns. One grid: on a wide screen the menu's parts sit in
 * its cells (the user at the top right, the navigation at the left); on a narrow one the menu is
 * a panel over the plugin. The order is also the Tab order.
 */
function showFrame(user: BcmsUser | null, nav: HTMLElement | null): HTMLElement {
  const menuButton = h(
    'button',
    { type: 'button', class: 'bcms-menu-button', 'aria-expanded': 'false', 'aria-controls': 'bcms-menu' },
    h('span', { class: 'bcms-menu-icon', 'aria-hidden': 'true' }),
    'Menu',
  );
  menuButton.addEventListener('click', () => setMenuOpen(menuButton.getAttribute('aria-expanded') !== 'true'));
  const main = h('main', { id: 'bcms-main' });
  const app = h(
    'div',
    { class: 'bcms-app', 'data-menu': 'closed' },
    h('header', { class: 'bcms-topbar' }, menuButton, h('span', { class: 'bcms-title' }, config.title)),
    h('div', { id: 'bcms-menu', class: 'bcms-menu' }, account(user), ...(nav === null ? [] : [nav])),
    main,
  );
  app.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && app.getAttribute('data-menu') === 'open') setMenuOpen(false);
  });
  root.replaceChildren(app);
  return main;
}

/** Why the plugins could not be listed for a signed-in user: a 403 says what the user lacks, and how to get past it. */
function refusal(error: BcmsSdkError, user: BcmsUser | null): HTMLElement[] {
  document.title = config.title;
  if (error.status !== 403) return [h('h1', {}, 'The plugins could not be listed'), h('p', { role: 'alert', class: 'bcms-error' }, `The plugins could not be listed: ${error.message}`)];
  const who = user === null ? 'You are signed in' : `You are signed in as ${userLabel(user) || user._id}`;
  const token = sdk.getAccessToken();
  const roles = (token?.payload as { rls?: unknown } | undefined)?.rls;
  // Why the roles fall short: the app's users come from auth.fromRequest; a BCMS token carries its own.
  const lack = config.appUsers
    ? "the app's auth.fromRequest gave this user none"
    : !Array.isArray(roles)
      ? 'this token has none: it carries no rls claim, where BCMS tokens list their roles'
      : "none of this token's roles holds READ";
  return [
    h('h1', {}, `This account cannot use ${config.title}`),
    h(
      'p',
      { role: 'alert', class: 'bcms-error' },
      `${who}, but the service refused to list the plugins (${error.message}). It lists them for a user with one of BCMS's roles (ADMIN, USER, …) that holds the READ permission, and ${lack}. Sign out, then sign in as a user who has one.`,
    ),
  ];
}

/** The signed-in user (when the user route named them) and the "Sign out" button. */
function account(user: BcmsUser | null): HTMLElement {
  const signOutButton = h('button', { type: 'button', class: 'bcms-signout' }, 'Sign out');
  signOutButton.addEventListener('click', () => {
    // With the app's users, its session (a cookie) may still name the user: this tab shows the sign-in until they sign in again.
    const bySession = config.appUsers && localStorage.getItem(TOKEN_KEY) === null;
    if (config.appUsers) sessionStorage.setItem(SIGNED_OUT_KEY, '1');
    signingOut = bySession ? SIGNED_OUT_OF_SHELL : SIGNED_OUT_BY_CHOICE;
    try {
      sdk.signOut();
    } finally {
      signingOut = undefined;
    }
  });
  const name = user === null ? '' : userLabel(user);
  const who = name === '' ? [] : [h('p', { class: 'bcms-user', title: user?.email || name }, h('span', { class: 'bcms-visually-hidden' }, 'Signed in as '), name)];
  // A landmark of its own: the user's name is then within one, as a screen reader's region list reads the page.
  return h('section', { class: 'bcms-account', 'aria-label': 'Account' }, ...who, signOutButton);
}

/** How the shell names a user: their name (BCMS's `personal`), else their email, else their user name. */
function userLabel(user: BcmsUser): string {
  const personal = user.customPool?.personal ?? {};
  const name = [personal.firstName, personal.lastName].filter((part) => typeof part === 'string' && part.trim() !== '').join(' ');
  return name || user.email || user.username || '';
}

function navigation(): HTMLElement {
  const list = h('ul', { 'aria-labelledby': 'bcms-plugins-heading' });
  for (const plugin of plugins) list.append(h('li', {}, shellLink(pluginHref(plugin), plugin.label, { 'data-plugin': plugin.name })));
  return h(
    'nav',
    { 'aria-label': `${config.title} navigation` },
    h('h2', { id: 'bcms-plugins-heading', tabindex: '-1' }, 'Plugins'),
    plugins.length > 0 ? list : h('p', {}, 'No plugin has a UI yet.'),
    // After the plugins: the keyboard reaches the plugins first, as before there was an API view.
    h('h2', { id: 'bcms-developers-heading' }, 'Developers'),
    h(
      'ul',
      { 'aria-labelledby': 'bcms-developers-heading' },
      ...(config.api ? [h('li', {}, shellLink(apiHref(), 'API', { 'data-view': 'api' }))] : []),
      ...(['events', 'jobs'] as const).map((view) => h('li', {}, shellLink(`${config.shellPath}/${view}`, VIEW_LABELS[view], { 'data-view': view }))),
    ),
  );
}

/** A link of the navigation: a plain click opens its view in place (an entry in the history), other clicks keep their meaning. */
function shellLink(href: string, label: string, attributes: Record<string, string>): HTMLAnchorElement {
  const link = h('a', { href, ...attributes }, label) as HTMLAnchorElement;
  link.addEventListener('click', (event) => {
    // Ctrl/Cmd/Shift-click and middle clicks keep their meaning: a new tab or window.
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    // The view already open adds no history entry: Back would seem to do nothing.
    if (location.pathname !== link.pathname) history.pushState(null, '', link.pathname);
    setMenuOpen(false);
    showPlugin();
  });
  return link;
}

/** Opens or closes the narrow screen's menu (on a wide one the stylesheet shows it always). */
function setMenuOpen(open: boolean): void {
  const app = root.querySelector('.bcms-app');
  const button = root.querySelector('.bcms-menu-button') as HTMLElement | null;
  if (app === null || button === null) return;
  const menu = root.querySelector('.bcms-menu') as HTMLElement;
  // A focused link that is about to be hidden would leave the keyboard nowhere: it goes back to the button.
  const focusWasInside = menu.contains(document.activeElement);
  app.setAttribute('data-menu', open ? 'open' : 'closed');
  button.setAttribute('aria-expanded', String(open));
  if (!open && focusWasInside && !isShown(document.activeElement as Element)) button.focus();
}

/** The plugin to show: the one the URL names; at the shell's root with a single plugin, that one, as there is nothing to choose. */
function pluginToShow(): string | null {
  const only = plugins.length === 1 ? plugins[0] : undefined;
  if (only === undefined || !atShellRoot()) return openPluginName();
  // Replaced, not pushed: Back then leaves the shell instead of landing here to be sent on again.
  history.replaceState(null, '', pluginHref(only));
  return only.name;
}

/** Opens what the URL names in the main area (the API view, a plugin, or says to choose one), and marks its link. */
function showPlugin(): void {
  const main = document.getElementById('bcms-main');
  if (main === null) return;
  const view = openView();
  for (const link of document.querySelectorAll('nav a[data-view]')) {
    if (link.getAttribute('data-view') === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  main.classList.toggle('bcms-api-view', view === 'api');
  main.classList.toggle('bcms-activity-view', view === 'events' || view === 'jobs');
  if (view !== null) {
    for (const link of document.querySelectorAll('nav a[data-plugin]')) link.removeAttribute('aria-current');
    if (view === 'api') showApi(main);
    else showActivity(main, view);
    return;
  }
  const name = pluginToShow();
  const plugin = plugins.find((candidate) => candidate.name === name);
  for (const link of document.querySelectorAll('nav a[data-plugin]')) {
    if (link.getAttribute('data-plugin') === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (plugin === undefined) {
    document.title = config.title;
    main.replaceChildren(...placeholder(name));
    return;
  }
  document.title = `${plugin.label} · ${config.title}`;
  const current = main.querySelector('iframe');
  if (current?.getAttribute('data-plugin') === plugin.name) return;
  // Sandboxed, never of the shell's origin: the plugin's code reaches the token only through the
  // SDK's bridge, which makes its requests for it (frame-bridge.ts). Its name carries the claims it starts with.
  // The plugin's own route, kept after the shell's URL (#/job/1): a reload opens it there again.
  main.replaceChildren(h('iframe', { src: (plugin.uiUrl as string) + location.hash, title: `${plugin.label} plugin`, 'data-plugin': plugin.name, sandbox: FRAME_SANDBOX, name: frameName() }));
}

/** The API view in the main area: the document, rendered by api.ts (imported on first use). */
function showApi(main: HTMLElement): void {
  document.title = `API · ${config.title}`;
  if (main.querySelector('.bcms-api') !== null) return;
  const container = h('div', { class: 'bcms-api' });
  main.replaceChildren(container);
  // Imported when the view first opens: Swagger UI is loaded by it, never by the shell's other views.
  void import('./api.js')
    .then((module) => module.renderApi(container))
    .catch((error: Error) => {
      // renderApi says what failed in the view; an import that failed says it here.
      if (container.querySelector('[role="alert"]') === null) container.replaceChildren(h('p', { role: 'alert', class: 'bcms-error' }, `The API view could not be loaded: ${error.message}`));
    });
}

/** The Events or Jobs view in the main area, read afresh each time it opens (activity.ts, imported on first use). */
function showActivity(main: HTMLElement, view: 'events' | 'jobs'): void {
  document.title = `${VIEW_LABELS[view]} · ${config.title}`;
  const container = h('div', { class: 'bcms-activity', 'data-view': view });
  main.replaceChildren(container);
  void import('./activity.js')
    .then((module) => module.renderActivity(container, view))
    .catch((error: Error) => {
      if (container.querySelector('[role="alert"]') === null)
        container.replaceChildren(h('p', { role: 'alert', class: 'bcms-error' }, `The ${VIEW_LABELS[view]} view could not be loaded: ${error.message}`));
    });
}

/** The main area with no plugin open: what to do next. */
function placeholder(name: string | null): HTMLElement[] {
  if (name !== null) return [h('h1', {}, `No plugin "${name}" has a UI`), h('p', {}, 'The Plugins section lists every plugin with a UI.')];
  if (plugins.length === 0) return [h('h1', {}, 'No plugin has a UI yet'), h('p', {}, 'A plugin with a built UI (its ui: { dir } option) shows here.')];
  return [h('h1', {}, 'Choose a plugin'), h('p', {}, 'The Plugins section lists every plugin with a UI.')];
}

window.addEventListener('bcms:signed-out', () => {
  if (!loading) renderSignIn(signingOut ?? SESSION_ENDED);
});
window.addEventListener('storage', (event) => {
  if (event.key === 'bcms.accessToken' && event.newValue === null) renderSignIn(SESSION_ENDED);
});
window.addEventListener('popstate', () => showPlugin());
// The open plugin moved within itself: the shell's URL keeps its route, without a history entry of its own.
window.addEventListener('bcms:frame-route', (event) => {
  const { frame, hash } = (event as CustomEvent<FrameRouteDetail>).detail;
  if (frame.isConnected && frame === document.querySelector('#bcms-main iframe') && location.hash !== hash) {
    history.replaceState(history.state, '', location.pathname + location.search + hash);
  }
});

/** A kept token that has not expired shows the app; with the app's users, so may its session (unless this tab signed out); else the sign-in. */
async function start(): Promise<void> {
  // Before the SDK learnt any session: a kept token only. An expired one is as none (a session may still sign the user in).
  if (sdk.getAccessToken() !== null && !(await sdk.isLoggedIn())) localStorage.removeItem(TOKEN_KEY);
  if (sdk.getAccessToken() !== null || (config.appUsers && !signedOutHere())) return renderApp();
  renderSignIn(config.appUsers ? SIGNED_OUT_OF_SHELL : undefined);
}

void start();

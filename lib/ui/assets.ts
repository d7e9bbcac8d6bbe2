import fs from 'node:fs';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import type { Request } from 'express';
import etag from 'etag';
import fresh from 'fresh';
import { contentType } from 'mime-types';
import send from 'send';
import { BcmsHttpError } from '../http/errors';
import type { BcmsPlugin } from '../plugin/types';

/** The compiled browser code (the SDK and the shell): dist/browser under the package root, from dist/ui or lib/ui alike. */
const BROWSER_DIR = path.resolve(__dirname, '..', '..', 'dist', 'browser', 'browser');
export const SDK_PATH = '/api/extensions/sdk.js';
export const SHELL_SCRIPT_PATH = '/api/extensions/shell.js';
const SHELL_STYLE_PATH = '/api/extensions/shell.css';
const BROWSER_PREFIX = '/api/extensions/';
/**
 * The browser files served under BROWSER_PREFIX: the SDK, the shell, the modules they import and
 * their stylesheets; for the shell's API view, its module and Swagger UI's files (copied from
 * swagger-ui-dist by the build: scripts/vendor-swagger-ui.cjs).
 */
const BROWSER_FILES = new Set(['sdk.js', 'shell.js', 'dialogs.js', 'frame-bridge.js', 'shell.css', 'dialogs.css', 'api.js', 'api.css', 'activity.js', 'swagger-ui-bundle.js', 'swagger-ui.css']);
const PLUGIN_UI_PREFIX = '/plugin/';

const HTML = 'text/html; charset=utf-8';
/**
 * Every file of a plugin's UI is sent sandboxed, with the frame's own flags (frame-bridge.ts): a
 * document of it, opened in the shell's frame or on its own, gets an opaque origin and never the
 * shell's storage or cookies. Its scripts, styles and fonts, and the SDK's modules, are then
 * requested from that opaque origin in CORS mode: the `Access-Control-Allow-Origin: *` that every
 * answer of the router carries (http/exchange.ts) lets them load. They hold no secret.
 */
const PLUGIN_UI_HEADERS = { 'Content-Security-Policy': 'sandbox allow-scripts allow-forms allow-popups allow-downloads' };
/** A built UI's files never change under one name inside Vite's assets/ folder (named by content hash). */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The Content-Type of a file name, by mime-types (as `send` and Express pick it). */
function typeOf(name: string): string {
  return contentType(path.extname(name)) || 'application/octet-stream';
}

/** The admin shell's settings, resolved (the `admin` option). */
export interface AdminSettings {
  path: string;
  /** The app's sign-in route: `auth.signInPath`, or its older name `admin.loginUrl`. */
  loginUrl: string;
  title: string;
  /** The field of the sign-in answer that holds the token (`auth.tokenField`). */
  tokenField?: string;
  /** `auth.fromRequest` is given: the shell asks who the user is before it shows a sign-in (a session cookie may be all it has). */
  appUsers?: boolean;
  /** Whether the shell offers its API view: the `openapi` option is not `'off'`. */
  api?: boolean;
}

/** A plugin's readable name: `ui.label`, or its name with dashes as spaces ("content-stats" → "Content stats"). */
export function pluginLabel(plugin: BcmsPlugin): string {
  if (typeof plugin.ui?.label === 'string' && plugin.ui.label.trim() !== '') return plugin.ui.label;
  const words = plugin.name.replace(/[-_.~]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Checks each plugin's `ui` while the router is built: a UI that was never built is a mistake to see at once. */
export function checkPluginUis(plugins: readonly BcmsPlugin[]): Map<string, string> {
  const dirs = new Map<string, string>();
  for (const plugin of plugins) {
    if (plugin.ui === undefined) continue;
    if (plugin.ui === null || typeof plugin.ui !== 'object' || typeof plugin.ui.dir !== 'string' || plugin.ui.dir === '') {
      throw new TypeError(`plugin "${plugin.name}": ui must be { dir, label? }, dir being its built UI (with an index.html)`);
    }
    const dir = path.resolve(plugin.ui.dir);
    if (!fs.existsSync(path.join(dir, 'index.html'))) {
      throw new Error(`plugin "${plugin.name}": ui.dir ${dir} has no index.html: build the UI first (vite build)`);
    }
    // Its real path: a symbolic link inside must not lead a request out of it.
    dirs.set(plugin.name, fs.realpathSync(dir));
  }
  return dirs;
}

/** What a UI path names: a browser file of the package (script or stylesheet), the shell page, or a file of a plugin's UI. */
export type UiTarget =
  | { kind: 'browser'; file: string }
  | { kind: 'shell' }
  | { kind: 'plugin-file'; plugin: string; dir: string; file: string }
  /** A file of a deployed plugin's UI, kept in memory. */
  | { kind: 'deployed-file'; plugin: string; files: ReadonlyMap<string, Buffer>; file: string }
  /** `/plugin/<name>` without its slash: its relative asset URLs would miss. */
  | { kind: 'redirect'; to: string };

/**
 * The non-API paths the router serves: its browser scripts, the admin shell (`admin.path` and
 * below, for the shell's own URLs) and each plugin's UI under `/plugin/<name>/`.
 */
export class UiRoutes {
  private deployed: ReadonlyMap<string, ReadonlyMap<string, Buffer>> = new Map();
  /** `admin.path` and the prefix of the shell's own URLs: `match` runs for every request. */
  private readonly shellPath: string | undefined;
  private readonly shellPrefix: string | undefined;

  constructor(
    private readonly dirs: ReadonlyMap<string, string>,
    private readonly admin: AdminSettings | null,
  ) {
    this.shellPath = admin?.path;
    this.shellPrefix = admin === null ? undefined : `${admin.path}/`;
  }

  /** The UIs of deployed plugins (replaced whole on each deployment change). */
  setDeployed(uis: ReadonlyMap<string, ReadonlyMap<string, Buffer>>): void {
    this.deployed = uis;
  }

  hasUi(name: string): boolean {
    return this.dirs.has(name) || this.deployed.has(name);
  }

  match(pathname: string): UiTarget | undefined {
    if (pathname.startsWith(BROWSER_PREFIX)) {
      const file = pathname.slice(BROWSER_PREFIX.length);
      return BROWSER_FILES.has(file) ? { kind: 'browser', file } : undefined;
    }
    if (this.shellPrefix !== undefined && (pathname === this.shellPath || pathname.startsWith(this.shellPrefix))) return { kind: 'shell' };
    if (!pathname.startsWith(PLUGIN_UI_PREFIX)) return undefined;
    const slash = pathname.indexOf('/', PLUGIN_UI_PREFIX.length);
    const name = pathname.slice(PLUGIN_UI_PREFIX.length, slash === -1 ? undefined : slash);
    const dir = this.dirs.get(name);
    const files = dir === undefined ? this.deployed.get(name) : undefined;
    if (dir === undefined && files === undefined) return undefined;
    if (slash === -1) return { kind: 'redirect', to: `${pathname}/` };
    const file = pathname.slice(slash + 1);
    return dir !== undefined ? { kind: 'plugin-file', plugin: name, dir, file } : { kind: 'deployed-file', plugin: name, files: files as ReadonlyMap<string, Buffer>, file };
  }

  /** Answers a UI request: GET or HEAD only. `base` is the router's mount path (req.baseUrl). */
  async serve(req: Request, res: ServerResponse, target: UiTarget, base: string): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here; use GET.`, { Allow: 'GET, HEAD' });
    }
    if (target.kind === 'redirect') {
      const query = req.url.indexOf('?');
      res.writeHead(308, { Location: base + target.to + (query === -1 ? '' : req.url.slice(query)), 'Content-Length': 0 });
      res.end();
      return;
    }
    if (target.kind === 'shell') return sendBytes(req, res, HTML, shellPage(this.admin as AdminSettings, base), 'no-cache', shellSecurityHeaders(this.admin as AdminSettings));
    if (target.kind === 'browser') return sendFile(req, res, path.join(BROWSER_DIR, target.file), 'no-cache', {});
    // A plugin's page opened on its own, at the top of a tab: the shell opens it, in its frame.
    if (this.admin !== null && isIndex(target.file) && req.headers['sec-fetch-dest'] === 'document') {
      res.writeHead(302, { Location: `${base}${this.admin.path}/plugins/${encodeURIComponent(target.plugin)}`, 'Content-Length': 0 });
      res.end();
      return;
    }
    if (target.kind === 'deployed-file') {
      let name: string;
      try {
        name = decodeURIComponent(target.file === '' ? 'index.html' : target.file);
      } catch {
        throw new BcmsHttpError('NOT_FOUND');
      }
      const bytes = target.files.get(name);
      if (bytes === undefined) throw new BcmsHttpError('NOT_FOUND');
      if (name === 'index.html') return sendBytes(req, res, HTML, withSdk(bytes.toString('utf8'), base), 'no-cache', PLUGIN_UI_HEADERS);
      return sendBytes(req, res, typeOf(name), bytes, name.startsWith('assets/') ? IMMUTABLE : 'no-cache', PLUGIN_UI_HEADERS);
    }
    const file = await resolveInside(target.dir, target.file === '' ? 'index.html' : target.file);
    if (file === undefined) throw new BcmsHttpError('NOT_FOUND');
    if (path.basename(file) === 'index.html' && path.dirname(file) === target.dir) {
      let html: string;
      try {
        html = await fs.promises.readFile(file, 'utf8');
      } catch {
        throw new BcmsHttpError('NOT_FOUND');
      }
      return sendBytes(req, res, HTML, withSdk(html, base), 'no-cache', PLUGIN_UI_HEADERS);
    }
    return sendFile(req, res, file, path.relative(target.dir, file).startsWith(`assets${path.sep}`) ? IMMUTABLE : 'no-cache', PLUGIN_UI_HEADERS);
  }
}

/** The UI's own page, however its name is written (`''`, `index.html`, `index%2ehtml`). */
function isIndex(file: string): boolean {
  try {
    return file === '' || decodeURIComponent(file) === 'index.html';
  } catch {
    return false;
  }
}

/**
 * A file under `dir` (a real path), or undefined for one that leaves it: `..`, an absolute path, a
 * NUL, a symbolic link that points out, or a dotfile (never part of a built UI).
 */
async function resolveInside(dir: string, relative: string): Promise<string | undefined> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(relative);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0')) return undefined;
  const within = (file: string): boolean => {
    const inside = path.relative(dir, file);
    const parts = inside.split(path.sep);
    return inside !== '' && !path.isAbsolute(inside) && parts[0] !== '..' && !parts.some((part) => part.startsWith('.'));
  };
  const file = path.resolve(dir, decoded);
  if (!within(file)) return undefined;
  try {
    const real = await fs.promises.realpath(file);
    return within(real) ? real : undefined;
  } catch {
    return undefined; // not there
  }
}

/** For an HTML attribute: the mount path comes from the URL when the mount has parameters. */
function attribute(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The plugin UI's index.html with the SDK loaded first: module scripts run in document order. */
function withSdk(html: string, base: string): string {
  const tag = `<script type="module" src="${attribute(base + SDK_PATH)}"></script>`;
  const head = /<head(?=[\s>])[^>]*>/i.exec(html);
  return head ? html.slice(0, head.index + head[0].length) + tag + html.slice(head.index + head[0].length) : tag + html;
}

/**
 * A page or file held in memory (the shell, an index.html with the SDK in it, a deployed UI's
 * file), with an ETag: a browser that has it already gets 304.
 */
function sendBytes(req: Request, res: ServerResponse, type: string, body: string | Buffer, caching: string, extra: Record<string, string> = {}): void {
  const tag = etag(body);
  const headers = { ETag: tag, 'Cache-Control': caching, 'X-Content-Type-Options': 'nosniff', ...extra };
  if (fresh(req.headers, { etag: tag })) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  res.writeHead(200, { ...headers, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/**
 * A file on disk (a real path already checked to be inside its UI), answered by `send`: its
 * Content-Type, ETag and Last-Modified, 304 for a fresh copy, Range requests, HEAD.
 */
function sendFile(req: Request, res: ServerResponse, file: string, caching: string, extra: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    // send takes a URL path and decodes it; the file was checked already, dotfiles included (its
    // own dotfile rule would refuse a package installed under a folder such as ~/.cache).
    const stream = send(req, file.split(path.sep).map(encodeURIComponent).join('/'), { dotfiles: 'allow', index: false, cacheControl: false });
    stream.on('headers', (response: ServerResponse) => {
      response.setHeader('Cache-Control', caching);
      response.setHeader('X-Content-Type-Options', 'nosniff');
      for (const [name, value] of Object.entries(extra)) response.setHeader(name, value);
    });
    stream.on('directory', () => reject(new BcmsHttpError('NOT_FOUND')));
    stream.on('error', (error: { status?: number; headers?: Record<string, string> }) => reject(fileError(error)));
    res.once('close', () => resolve());
    stream.pipe(res);
  });
}

/** send's refusals as the router's errors (416 keeps its Content-Range header); anything else is a 500. */
function fileError(error: { status?: number; headers?: Record<string, string> }): unknown {
  if (error.status === 404) return new BcmsHttpError('NOT_FOUND');
  if (error.status === 412) return new BcmsHttpError('PRECONDITION_FAILED');
  if (error.status === 416) return new BcmsHttpError('RANGE_NOT_SATISFIABLE', undefined, error.headers);
  return error;
}

/**
 * The shell's Content-Security-Policy: scripts, styles, frames and requests of its own origin only
 * (the plugin UIs it opens are on it; the host's sign-in route's origin too when it is another), no
 * inline script or style, no framing by another site (the sign-in page included), no <base>, forms
 * only to here.
 */
function shellSecurityHeaders(admin: AdminSettings): Record<string, string> {
  const signIn = /^https?:\/\//i.test(admin.loginUrl) ? ` ${new URL(admin.loginUrl).origin}` : '';
  return {
    'Content-Security-Policy': `default-src 'self'; img-src 'self' data:; connect-src 'self'${signIn}; frame-ancestors 'self'; base-uri 'none'; form-action 'self'; object-src 'none'`,
    'Referrer-Policy': 'same-origin',
  };
}

/** The admin shell: its settings as JSON, the SDK, then the shell script; an empty icon, so no favicon request (a host may have none: a 404 in every console). */
function shellPage(admin: AdminSettings, base: string): string {
  const config = JSON.stringify({
    title: admin.title,
    signInPath: admin.loginUrl,
    tokenField: admin.tokenField ?? 'accessToken',
    appUsers: admin.appUsers === true,
    shellPath: base + admin.path,
    api: admin.api !== false,
  }).replace(/</g, '\\u003c');
  const title = attribute(admin.title);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${title}</title>
<link rel="stylesheet" href="${attribute(base + SHELL_STYLE_PATH)}">
<script type="application/json" id="bcms-shell-config">${config}</script>
<script type="module" src="${attribute(base + SDK_PATH)}"></script>
<script type="module" src="${attribute(base + SHELL_SCRIPT_PATH)}"></script>
</head>
<body>
<div id="bcms-shell"></div>
</body>
</html>
`;
}

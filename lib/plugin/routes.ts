import { isUrlSafe } from '../names';
import { JWT_GUARD_RULE } from './guard';
import { methodsOf } from './mount';
import type { BcmsControllerMethod, BcmsPlugin, HttpVerb } from './types';

const VERBS: readonly HttpVerb[] = ['get', 'post', 'put', 'patch', 'delete'];

export interface PluginRoute {
  plugin: string;
  /** The method's key in its controller (the context's `name`). */
  name: string;
  /** `<controller name>.<method key>`, for logs and errors. */
  label: string;
  /** Its own names of the path's parameters, in order: `/:description` and `/:id` are one path, each with its names. */
  paramNames: readonly string[];
  method: BcmsControllerMethod<unknown, unknown>;
}

/** The routes of one path: by verb (upper case), with the `Allow` value they make. */
export interface PluginPath {
  pattern: string;
  /** Segments of a path with `:params`; `null` for a static path. */
  segments: readonly string[] | null;
  verbs: Map<string, PluginRoute>;
  allow: string;
}

/** One path that a request path matches, with the values of its parameters, in order (`null` for a static path). */
export interface PluginMatch {
  path: PluginPath;
  values: readonly string[] | null;
}

/**
 * Every plugin endpoint of a registry, looked up by the router itself: a Map for static paths and
 * a short list for paths with parameters. Built once; a registry that cannot work throws here.
 */
export class PluginRouteTable {
  private readonly staticPaths = new Map<string, PluginPath>();
  private readonly paramPaths: PluginPath[] = [];
  /** For each static path, every path it matches (itself first): computed once, as they never change. */
  private readonly staticMatches = new Map<string, readonly PluginMatch[]>();
  /** The names of the plugins it serves. */
  readonly pluginNames: ReadonlySet<string>;

  /**
   * `prefix`: where each plugin's paths start, before its name (the package's own routes use `/api`).
   * A controller whose `setup` has not run yet is left out (see `plugin/mount.ts`): the router
   * builds its table again once every setup ran.
   */
  /** Every path, static ones first, each with its routes by verb (for the OpenAPI document). */
  paths(): PluginPath[] {
    return [...this.staticPaths.values(), ...this.paramPaths];
  }

  /** The routes whose pre-request handler is the JWT guard, as `plugin Controller.method` (for the warning when no secret can verify tokens). */
  jwtGuarded(): string[] {
    return this.paths().flatMap((path) =>
      [...path.verbs.values()]
        .filter((route) => (route.method.preRequestHandler as { [JWT_GUARD_RULE]?: unknown } | undefined)?.[JWT_GUARD_RULE] !== undefined)
        .map((route) => `${route.plugin} ${route.label}`),
    );
  }

  constructor(plugins: readonly BcmsPlugin[], prefix = '/api/plugin') {
    const names = new Set<string>();
    this.pluginNames = names;
    // Two paths that differ only in parameter names (`/:id` and `/:key`) are one path.
    const byShape = new Map<string, PluginPath>();
    if (!Array.isArray(plugins)) throw new TypeError('registry.plugins must be an array of plugins (createBcmsPlugin)');
    plugins.forEach((plugin, index) => {
      const where = `registry.plugins[${index}]`;
      if (plugin === null || typeof plugin !== 'object') throw new TypeError(`${where} is not a plugin (use createBcmsPlugin)`);
      if (!isUrlSafe(plugin.name)) {
        throw new Error(`${where}: plugin name ${JSON.stringify(plugin.name)} is not URL-safe (letters, digits, "-", "_", ".", "~", starting with a letter or digit)`);
      }
      if (names.has(plugin.name)) throw new Error(`${where}: duplicate plugin name "${plugin.name}"`);
      names.add(plugin.name);
      const controllers = plugin.controllers ?? [];
      if (!Array.isArray(controllers)) throw new TypeError(`plugin "${plugin.name}": controllers must be an array`);
      for (const controller of controllers) {
        const owner = `plugin "${plugin.name}", controller "${controller?.name}"`;
        if (controller === null || typeof controller !== 'object') throw new TypeError(`plugin "${plugin.name}": a controller is not an object (use createController)`);
        const controllerPath = checkPath(controller.path, owner, false);
        const methods = methodsOf(controller, owner);
        if (methods === undefined) continue; // its setup runs before the router is ready
        for (const [key, method] of Object.entries(methods) as [string, BcmsControllerMethod<unknown, unknown> | null][]) {
          const label = `${controller.name}.${key}`;
          const at = `plugin "${plugin.name}", method "${label}"`;
          if (method === null || typeof method !== 'object') throw new TypeError(`${at} is not a method (use createControllerMethod)`);
          const methodPath = checkPath(method.path, at, true);
          if (!VERBS.includes(method.type)) throw new Error(`${at}: type ${JSON.stringify(method.type)} is not one of ${VERBS.join(', ')}`);
          if (typeof method.handler !== 'function') throw new TypeError(`${at}: handler must be a function`);
          if (method.preRequestHandler !== undefined && typeof method.preRequestHandler !== 'function') {
            throw new TypeError(`${at}: preRequestHandler must be a function`);
          }
          const pattern = joinPath(`${prefix}/${plugin.name}`, controllerPath, methodPath);
          const shape = pattern.replace(/\/:[^/]+/g, '/:');
          let entry = byShape.get(shape);
          if (entry === undefined) {
            const dynamic = pattern.includes('/:');
            entry = { pattern, segments: dynamic ? pattern.split('/') : null, verbs: new Map(), allow: '' };
            byShape.set(shape, entry);
            if (dynamic) this.paramPaths.push(entry);
            else this.staticPaths.set(pattern, entry);
          }
          const verb = method.type.toUpperCase();
          const taken = entry.verbs.get(verb);
          if (taken !== undefined) {
            throw new Error(`${at}: ${verb} ${pattern} is already served by method "${taken.label}" of plugin "${taken.plugin}"`);
          }
          const paramNames = pattern.split('/').flatMap((segment) => (segment.startsWith(':') ? [segment.slice(1)] : []));
          entry.verbs.set(verb, { plugin: plugin.name, name: key, label, paramNames, method });
          entry.allow = [...entry.verbs.keys(), 'OPTIONS'].join(', ');
        }
      }
    });
    for (const [pattern, entry] of this.staticPaths) {
      this.staticMatches.set(pattern, Object.freeze(this.matchParams(pattern, [{ path: entry, values: null }])));
    }
  }

  /**
   * Every path a request path (no query, no trailing `/`) matches, static first, then paths with
   * parameters in the order they were declared, as Express would try them; `undefined` for none.
   * The caller picks the first one that serves the request's verb: `GET /items/new` reaches
   * `GET /items/:id` even when `POST /items/new` exists.
   */
  match(path: string): readonly PluginMatch[] | undefined {
    const known = this.staticMatches.get(path);
    if (known !== undefined) return known;
    const found = this.matchParams(path, []);
    return found.length === 0 ? undefined : found;
  }

  private matchParams(path: string, found: PluginMatch[]): PluginMatch[] {
    if (this.paramPaths.length === 0) return found;
    const parts = path.split('/');
    for (const candidate of this.paramPaths) {
      const values = matchSegments(candidate.segments as readonly string[], parts);
      if (values !== undefined) found.push({ path: candidate, values });
    }
    return found;
  }
}

/** The values a request path gives a path's parameters, in order; `undefined` when it does not match. */
function matchSegments(segments: readonly string[], parts: readonly string[]): string[] | undefined {
  if (segments.length !== parts.length) return undefined;
  const values: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as string;
    const part = parts[i] as string;
    if (segment.startsWith(':')) {
      if (part === '') return undefined;
      values.push(decodeURIComponent(part));
    } else if (segment !== part) {
      return undefined;
    }
  }
  return values;
}

/** `request.params` for a route: its own parameter names, the matched path's values. */
export function paramsOf(route: PluginRoute, values: readonly string[]): Record<string, string> {
  const params: Record<string, string> = {};
  route.paramNames.forEach((name, i) => {
    params[name] = values[i] as string;
  });
  return params;
}

const SEGMENT = /^(?::[A-Za-z_][A-Za-z0-9_]*|[A-Za-z0-9._~!$&'()*+,;=@-]+)$/;

/**
 * A path as BCMS takes it: a leading `/` added when it is missing, `//` made `/`; a method may have
 * none (its controller's own path). Returns it so; throws for one no URL can match.
 */
function checkPath(path: unknown, owner: string, optional: boolean): string {
  if (path === undefined && optional) return '';
  if (typeof path !== 'string') throw new Error(`${owner}: path ${JSON.stringify(path)} must be a string`);
  const normal = `/${path}`.replace(/\/{2,}/g, '/');
  const segments = normal.split('/').slice(1);
  segments.forEach((segment, i) => {
    const last = i === segments.length - 1;
    if (segment === '' && last) return; // a trailing "/" (or the path "/") adds nothing
    if (!SEGMENT.test(segment)) {
      throw new Error(`${owner}: path ${JSON.stringify(path)} has an invalid segment ${JSON.stringify(segment)} (URL-safe text or ":param")`);
    }
  });
  return normal;
}

/** Joins with no extra segment between the parts, as the spec says, and drops a trailing `/`. */
function joinPath(...parts: string[]): string {
  return parts.map((part) => (part.endsWith('/') ? part.slice(0, -1) : part)).join('');
}

/** Says that plugins' `middleware` is not mounted: BCMS mounts it, this package leaves it to the host app. */
export function warnAboutMiddleware(plugins: readonly BcmsPlugin[], logger: { warn(object: object, message: string): void }): void {
  for (const plugin of plugins) {
    if (Array.isArray(plugin.middleware) && plugin.middleware.length > 0) {
      logger.warn({ plugin: plugin.name }, 'bcms-extensions: plugin middleware is not mounted (mount middleware on the host app): this plugin declares some');
    }
  }
}

/** Says, once the registry is up, that JWT-guarded routes answer 401 to every token: no `jwt.secret` verifies them. */
export function warnWithoutSecret(guarded: readonly string[], secret: unknown, logger: { warn(object: object, message: string): void }): void {
  if (guarded.length === 0 || (secret !== undefined && secret !== null && secret !== '')) return;
  logger.warn(
    { routes: guarded },
    'bcms-extensions: these routes are guarded by a JWT check, but no jwt.secret is set, so every request to them is refused 401: set the jwt option to the key your tokens are signed with',
  );
}

import type { Request, Response } from 'express';
import { EVENT_LIST_PATHS } from '../events/routes';
import { FUNCTION_PREFIX } from '../function/serve';
import type { PluginMatch, PluginRouteTable } from '../plugin/routes';
import type { LayerRoute } from '../layer';
import type { UiTarget } from '../ui/assets';
import type { Exchange, Work, Writer } from './exchange';
import { sandboxPluginAnswer } from './plugin-headers';

const API_PREFIX = '/api/';
const PLUGIN_PREFIX = '/api/plugin/';
/** The package's own routes (keys, the SDK's data, its scripts): never a plugin's or a function's path. */
const EXTENSIONS_PREFIX = '/api/extensions/';

/** Takes a request the router owns and answers it (returns true), or leaves it to the host (false). */
export type Dispatch = (req: Request, res: Response) => boolean;

/**
 * The router's front door: decides by the path alone which part answers a request, and hands it
 * to the exchange with that part. Paths no part owns fall through to the host's routes and 404.
 */
export function createDispatch(parts: {
  exchange: Exchange;
  /** Pages and files: the admin shell, the SDK and shell scripts, plugin UIs. */
  ui: { match(path: string): UiTarget | undefined; serve(req: Request, res: Response, target: UiTarget, base: string): Work };
  deploymentsPath: string;
  serveDeployments: (req: Request, res: Response, path: string) => Work;
  serveFunction: (req: Request, res: Response, path: string) => Work;
  /** The paths layers answer (lib/layer.ts), tried before the plugin tables. */
  layerRoutes: ReadonlyMap<string, LayerRoute>;
  /** The plugin endpoints live now (replaced whole when a deployment changes). */
  plugins: () => PluginRouteTable;
  /** The package's own endpoints under /api/extensions/. */
  ownRoutes: PluginRouteTable;
  servePlugin: (req: Request, res: Response, matches: readonly PluginMatch[] | undefined) => Work;
  /** Writes what a plugin handler's promise resolved to. */
  writePluginAnswer: Writer;
  /** Writes what a function's promise resolved to, in its envelope. */
  writeFunctionResult: Writer;
  /** False with `cors: false`: an `OPTIONS` request goes on to the app (its own cors() answers preflights). */
  preflights?: boolean;
  /** Paths of the package's own that answer errors in the envelope `{ success: false, error }` (the OpenAPI document's). */
  enveloped?: ReadonlySet<string>;
}): Dispatch {
  const { exchange, ui, deploymentsPath, serveDeployments, serveFunction, layerRoutes, plugins, ownRoutes, servePlugin, writePluginAnswer, writeFunctionResult } = parts;
  const preflights = parts.preflights !== false;
  const enveloped = parts.enveloped ?? new Set<string>();
  const serveUi = (req: Request, res: Response, target: UiTarget): Work => ui.serve(req, res, target, req.baseUrl);
  const serveLayer = (req: Request, res: Response, route: LayerRoute): Work => route.serve(req, res);

  return function dispatch(req, res) {
    if (!preflights && req.method === 'OPTIONS') return false;
    const url = req.url;
    const query = url.indexOf('?');
    let path = query === -1 ? url : url.slice(0, query);
    const target = ui.match(path);
    if (target !== undefined) {
      exchange(req, res, 'plugin', path, serveUi, target);
      return true;
    }
    if (!url.startsWith(API_PREFIX)) return false;
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    if (path.startsWith(FUNCTION_PREFIX) || path === '/api/function') {
      exchange(req, res, 'function', path, serveFunction, path, writeFunctionResult);
      return true;
    }
    // The event and job lists are authorised as the deployments list is, by the same part.
    if (path.startsWith(deploymentsPath) || EVENT_LIST_PATHS.has(path)) {
      exchange(req, res, 'plugin', path, serveDeployments, path);
      return true;
    }
    const layerRoute = layerRoutes.get(path);
    if (layerRoute !== undefined) {
      exchange(req, res, layerRoute.family, path, serveLayer, layerRoute);
      return true;
    }
    const table = path.startsWith(PLUGIN_PREFIX) ? plugins() : path.startsWith(EXTENSIONS_PREFIX) ? ownRoutes : undefined;
    if (table === undefined) return false;
    let matches: readonly PluginMatch[] | undefined;
    try {
      matches = table.match(path);
      if (matches === undefined) return false; // nothing serves it: the host's route or its 404
    } catch {
      // A parameter with a malformed percent-encoding: the path is ours, the URL is not valid.
    }
    // A plugin's answer is its author's content on the service's origin: sandboxed, errors too.
    if (table !== ownRoutes) sandboxPluginAnswer(res);
    exchange(req, res, table === ownRoutes && enveloped.has(path) ? 'function' : 'plugin', path, servePlugin, matches, writePluginAnswer);
    return true;
  };
}

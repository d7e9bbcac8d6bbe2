import type { EventEmitter } from 'node:events';
import etag from 'etag';
import type { Registry } from 'prom-client';
import fresh from 'fresh';
import { bcmsContentRepoOf } from '../db/content';
import type { ContentStore } from '../db/store';
import type { LiveExtensions } from '../deploy/live';
import { createSdkController, reader } from '../extensions/content';
import { createKeysController } from '../extensions/keys';
import { createBcmsPlugin, createController, createControllerMethod } from '../plugin/create';
import { PluginRouteTable } from '../plugin/routes';
import type { BcmsFunction } from '../function/types';
import type { BcmsController } from '../plugin/types';
import { ownManifest } from '../manifest';
import { metricsController } from '../metrics-route';
import { buildOpenApiDocument, type OpenApiSources } from './document';
import { appVersion, type OpenApiInfo } from './info';

/** The document's path: its errors answer the envelope `{ success: false, error }`, as it says of the package's own routes. */
export const OPENAPI_PATH = '/api/extensions/openapi.json';

/** The functions before the router's start loaded them: one table, so that the document made meanwhile is kept. */
const NO_FUNCTIONS: ReadonlyMap<string, BcmsFunction> = new Map();

/** The document as served: its text and ETag, made again only when what it describes changed. */
interface Served {
  plugins: unknown;
  functions: unknown;
  document: Record<string, unknown>;
  /** Its text and ETag for each mount path it was asked under (`servers` says where the paths are). */
  texts: Map<string, { text: string; etag: string }>;
}

/**
 * The package's own routes under `/api/extensions/` (API keys, the SDK's, the OpenAPI document),
 * and the document itself, for `router.openapi()`.
 */
export function createOwnRoutes(options: {
  store: ContentStore;
  keys: { deployOverHttp: boolean };
  live: LiveExtensions;
  hasUi: (name: string) => boolean;
  events: EventEmitter;
  title: string;
  /** Who may read the document over HTTP (the `openapi` option); `'off'`: it is not served. */
  openapi: 'public' | 'token' | 'off';
  /** `openapi.info`: what the app gave of the document's title, version, description and license. */
  info?: OpenApiInfo;
  /** More controllers of the package's own (the health route). */
  controllers?: BcmsController[];
  /** The `rateLimit` option is set: function calls may be answered 429. */
  rateLimited?: boolean;
  /** The `metrics` option is on: its registry, and the scraper's token if one was given. */
  metrics?: { registry: Registry; token: string | undefined };
}): {
  table: PluginRouteTable;
  document: () => Record<string, unknown>;
} {
  const { store, live, info = {} } = options;
  const functions = () => live.functions ?? NO_FUNCTIONS;
  const sdk = createSdkController({ plugins: () => live.allPlugins, hasUi: options.hasUi, functions, content: bcmsContentRepoOf(store), events: options.events });
  // The app's version when it gave none, read once: the document describes the app's API.
  const described = { title: info.title ?? options.title, version: info.version ?? appVersion(ownManifest().version), description: info.description, license: info.license };
  const sources = (): OpenApiSources => ({ plugins: live.plugins, functions: functions(), ownRoutes: table, ...described, rateLimited: options.rateLimited === true });
  let served: Served | undefined;
  /** A deployment change replaces the live tables whole: the same tables, the same document. */
  const current = (): Served => {
    const now = sources();
    if (served === undefined || served.plugins !== now.plugins || served.functions !== now.functions) {
      // Frozen: router.openapi() hands it out, and it is reused until the next change.
      served = { plugins: now.plugins, functions: now.functions, document: deepFreeze(buildOpenApiDocument(now)), texts: new Map() };
    }
    return served;
  };
  /** The text served under `base`, the router's mount path: `servers` holds it, so that the paths resolve there. */
  const textFor = (base: string): { text: string; etag: string } => {
    const { document, texts } = current();
    let made = texts.get(base);
    if (made === undefined) {
      const text = JSON.stringify({ ...document, servers: [{ url: base === '' ? '/' : base }] });
      made = { text, etag: etag(text) };
      if (texts.size < 16) texts.set(base, made);
    }
    return made;
  };
  const controllers = [createKeysController(store, options.keys), sdk, ...(options.controllers ?? [])];
  if (options.openapi !== 'off') controllers.push(openApiController(textFor, options.openapi === 'token'));
  if (options.metrics !== undefined) controllers.push(metricsController(options.metrics.registry, options.metrics.token));
  const table = new PluginRouteTable([createBcmsPlugin({ name: 'extensions', controllers })], '/api');
  return { table, document: () => current().document };
}

/**
 * `GET /api/extensions/openapi.json`: public by default, as the endpoints' paths are, or for a
 * token of any role that holds READ (the shell's users); an ETag, and 304 for a copy that is current.
 */
function openApiController(textFor: (base: string) => { text: string; etag: string }, needsToken: boolean): BcmsController {
  return createController({
    name: 'OpenAPI',
    path: '/openapi.json',
    methods: () => ({
      document: createControllerMethod({
        type: 'get',
        ...(needsToken ? { preRequestHandler: reader } : {}), // the SDK's reads' guard: the shell's users
        doc: { summary: 'This document: OpenAPI 3.1 of every endpoint and function served now.' },
        handler: async ({ request, response }) => {
          const { text, etag: tag } = textFor(request.baseUrl);
          response.setHeader('ETag', tag);
          response.setHeader('Cache-Control', 'no-cache');
          if (fresh(request.headers, { etag: tag })) return void response.status(304).end();
          response.setHeader('Content-Type', 'application/json; charset=utf-8');
          response.end(text);
        },
      }),
    }),
  });
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

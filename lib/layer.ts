/**
 * How a layer adds to the core without the core knowing it: the BCMS layer (lib/bcms/) is one.
 * The core never imports a layer. The package's entry points add them (lib/index.ts for the
 * service, lib/cli/bin.ts for the CLI); each router binds the layers added before it was built,
 * and each isolate loads their `isolateModule` before extension code.
 */
import type { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import type { ContentStore } from './db/store';
import type { BcmsFunction } from './function/types';
import type { Work } from './http/exchange';
import type { Family } from './http/respond';
import type { Logger } from './logger';
import type { ResolvedOptions } from './options';
import type { KeySignatureScheme } from './security/caller';
import type { AccessTokenVerifier } from './security/jwt';
import type { SignatureSettings } from './security/signature';

/** What a router lends a layer. */
export interface RouterServices {
  settings: ResolvedOptions;
  store: ContentStore;
  logger: Logger;
  verifyAccessToken: AccessTokenVerifier;
  /** The memory of accepted signatures, the clock skew and the keys' rate limit: a layer's signature scheme shares them. */
  signatures: SignatureSettings;
  /** The router's `events`: what isolates and the SDK's content routes emit, by name. */
  events: EventEmitter;
  /** The functions live now (the app's own and the deployed). */
  functions(): ReadonlyMap<string, BcmsFunction>;
  /** A body, read as a function's body is (type and size checked). */
  readBody(req: Request): Promise<Buffer>;
}

/** A path a layer answers, with the error bodies of plugins (`{ "message" }`) or of functions. */
export interface LayerRoute {
  path: string;
  family: Family;
  serve(req: Request, res: Response): Work;
}

/** What a layer adds to one router. */
export interface BoundLayer {
  routes?: readonly LayerRoute[];
  /** API-key signatures it accepts, tried after HTTP Signatures, for private functions and plugin key guards. */
  keySchemes?: readonly KeySignatureScheme[];
  close?(): Promise<void>;
}

/** What an isolate lends a layer: its store (over the service's database), its logger, and the way to the router's `events`. */
export interface IsolateServices {
  store: ContentStore;
  logger: Logger;
  emit(name: string, data: unknown): void;
}

export interface Layer {
  name: string;
  /** Runs once per router, after its database and verifiers exist and before the registry's code runs. */
  bindRouter(services: RouterServices): BoundLayer;
  /** A compiled module whose `bindIsolate(services: IsolateServices)` each isolate runs before extension code. */
  isolateModule?: string;
  /**
   * The events its code in an isolate may emit on the router's `events`, each with the check that
   * makes an event from untrusted code safe to hand on (`undefined`: dropped). Others are dropped.
   */
  isolateEvents?: Readonly<Record<string, (data: unknown) => unknown>>;
}

const added: Layer[] = [];

/** Adds a layer to every router built from now on. */
export function addLayer(layer: Layer): void {
  if (!added.some((known) => known.name === layer.name)) added.push(layer);
}

/** The paths the core routes to a layer: under /api/, and never a function's or a deployment's. */
const LAYER_PATH = /^\/api\/(?!function(?:\/|$)|extensions\/deployments(?:\/|$))[A-Za-z0-9._~/-]+$/;

export function addedLayers(): readonly Layer[] {
  return added;
}

/** Binds every added layer to a router: their routes and key schemes, and one close. */
export function bindLayers(services: RouterServices): { routes: ReadonlyMap<string, LayerRoute>; keySchemes: KeySignatureScheme[]; close(): Promise<void> } {
  const bound = added.map((layer) => layer.bindRouter(services));
  const routes = new Map<string, LayerRoute>();
  for (const route of bound.flatMap((layer) => layer.routes ?? [])) {
    if (!LAYER_PATH.test(route.path) || routes.has(route.path)) throw new Error(`a layer's route ${JSON.stringify(route.path)} is taken or cannot be routed`);
    routes.set(route.path, route);
  }
  const keySchemes = bound.flatMap((layer) => layer.keySchemes ?? []);
  return { routes, keySchemes, close: async () => void (await Promise.all(bound.map((layer) => layer.close?.()))) };
}

import type { ServerResponse } from 'node:http';
import path from 'node:path';
import type { Request } from 'express';
import type { ContentStore } from '../db/store';
import { decodeText, parseJsonText, readRawBody } from '../http/body';
import { BcmsHttpError } from '../http/errors';
import { writeJson } from '../http/respond';
import { createEventListRoutes, EVENT_LIST_PATHS } from '../events/routes';
import type { Logger } from '../logger';
import { type Metrics, NO_METRICS } from '../metrics';
import { isUrlSafe } from '../names';
import { sha256Hex } from '../security/digest';
import type { AccessTokenVerifier } from '../security/jwt';
import { signedBodyOf } from '../security/caller';
import type { VerifySignedRequest } from '../security/signature';
import { ExtensionLoadError } from '../isolate/host';
import type { RouterSandbox } from '../isolate/sandbox';
import type { DeployedExtensions, RunningExtension } from './deployed';
import { DEPLOYMENT_KINDS, type DeploymentKind, extensionLabel } from './load';
import {
  activateDeployment,
  activeVersion,
  listDeployments,
  previousDeployment,
  recordDeployment,
  recordLoadError,
  undeployDeployment,
  withdrawDeployment,
  type ActiveDeployment,
  type Deployment,
} from './store';
import { assertTrusted, type BundleSignature, type TrustedKeys } from './signing';

export const DEPLOYMENTS_PATH = '/api/extensions/deployments';
/** A bundle with its UI is larger than a function call's body. */
export const DEPLOY_BODY_LIMIT = 20 * 1024 * 1024;

/** What `bcms-ext bundle` writes and `bcms-ext deploy` sends. */
export interface DeployBundle {
  manifest: { kind: DeploymentKind; name: string; version: string; sha256: string; project?: string };
  /** The back end (a plugin), the function, the event or the job, as one CommonJS file with `bcms-extensions` left external. */
  code: string;
  /** A plugin's built UI: path → base64 bytes, with an index.html. */
  ui?: Record<string, string>;
  /** The author's signature of it (lib/deploy/signing.ts), when `bundle` or `deploy` had BCMS_SIGNING_KEY_FILE. */
  signature?: BundleSignature;
}

/** Checks an uploaded bundle's shape; throws BUNDLE_INVALID saying what is wrong. */
export function checkBundle(body: unknown): DeployBundle {
  const invalid = (message: string) => new BcmsHttpError('BUNDLE_INVALID', message);
  if (body === null || typeof body !== 'object') throw invalid('The body must be a bundle: { manifest, code, ui? }.');
  const { manifest, code, ui, signature } = body as Partial<DeployBundle>;
  if (manifest === null || typeof manifest !== 'object') throw invalid('The bundle has no manifest { kind, name, version, sha256 }.');
  const { kind, name, version, sha256, project } = manifest;
  if (!DEPLOYMENT_KINDS.includes(kind as DeploymentKind)) throw invalid('manifest.kind must be "plugin", "function", "event" or "job".');
  if (!isUrlSafe(name)) throw invalid(`manifest.name ${JSON.stringify(name)} is not URL-safe (letters, digits, "-", "_", ".", "~").`);
  if (typeof version !== 'string' || version === '' || version.length > 100) throw invalid('manifest.version must be a version string, such as "1.0.0".');
  if (project !== undefined && (typeof project !== 'string' || project.length > 200)) throw invalid('manifest.project must be a string.');
  if (typeof code !== 'string' || code === '') throw invalid('The bundle has no code.');
  if (typeof sha256 !== 'string' || sha256Hex(code) !== sha256) {
    throw invalid('manifest.sha256 is not the SHA-256 of the code: the bundle was changed or cut short.');
  }
  if (ui !== undefined) {
    if (kind !== 'plugin') throw invalid('Only a plugin has a UI.');
    if (ui === null || typeof ui !== 'object' || typeof ui['index.html'] !== 'string') throw invalid('ui must map file paths to base64 contents, with an index.html.');
    for (const [file, content] of Object.entries(ui)) {
      const normal = path.posix.normalize(file);
      if (normal !== file || file.startsWith('/') || file.startsWith('..') || file.split('/').some((part) => part.startsWith('.')) || typeof content !== 'string') {
        throw invalid(`ui file ${JSON.stringify(file)} is not a plain relative path with base64 contents.`);
      }
    }
  }
  if (signature !== undefined && !isSignatureShaped(signature)) throw invalid('signature must be { algorithm, keyId, value }, as bcms-ext bundle writes it.');
  return {
    manifest: { kind, name, version, sha256, ...(project === undefined ? {} : { project }) },
    code,
    ...(ui === undefined ? {} : { ui }),
    ...(signature === undefined ? {} : { signature }),
  };
}

function isSignatureShaped(value: unknown): value is BundleSignature {
  const { algorithm, keyId, value: signed } = (value ?? {}) as Partial<BundleSignature>;
  return (algorithm === 'ed25519' || algorithm === 'rsa-sha256') && typeof keyId === 'string' && keyId.length <= 64 && typeof signed === 'string' && signed.length <= 2048;
}

/** Why a bundle was refused at load: 422 BUNDLE_LOAD_FAILED or BUNDLE_LOAD_TIMEOUT, with its first error line. */
export function loadRefusal(error: unknown, what = 'The bundle'): BcmsHttpError {
  const code = error instanceof ExtensionLoadError ? error.code : 'BUNDLE_LOAD_FAILED';
  const message = ((error as Error)?.message ?? String(error)).split('\n')[0];
  return new BcmsHttpError(code, `${what} did not load: ${message}`);
}

/**
 * `/api/extensions/deployments`: POST a bundle (deploy), GET the list; POST
 * `/<kind>/<name>/rollback`; DELETE `/<kind>/<name>` (undeploy). Every call is signed with an API
 * key that holds the deploy permission. Beside them, what deployed (and registry) events and jobs
 * did: `GET /api/extensions/event-deliveries` and `GET /api/extensions/jobs` (lib/events/routes.ts),
 * for a deploy key or an ADMIN token.
 */
export function createDeployRoutes(deps: {
  verify: VerifySignedRequest;
  /** The router's JWT verifier: the event and job lists also take an ADMIN token (the shell's). */
  verifyAccessToken: AccessTokenVerifier;
  store: ContentStore;
  deployed: DeployedExtensions;
  /**
   * Loads a version apart, within the load limit, before it may go live; resolves to what the next
   * load may take up as it is (its isolates), or undefined. Rejects with why it does not load.
   */
  check: (deployment: Pick<ActiveDeployment, 'kind' | 'name' | 'version' | 'code'>) => Promise<RunningExtension | undefined>;
  /** Names of the app's own (registry) plugins and functions: a deployment may not take them. */
  taken: (kind: DeploymentKind, name: string) => boolean;
  logger: Logger;
  /** A deployment's body still arriving this long after its reading began is answered 408 REQUEST_TIMEOUT. */
  bodyTimeoutMs?: number;
  /** `deploy.trustedKeys`: who may author code; undefined, anyone holding a deploy key. */
  trusted?: TrustedKeys;
  /** What isolates run in, as the list shows it, and why deployments are refused here (production without a sandbox: 503 SANDBOX_UNAVAILABLE). */
  sandbox?: Pick<RouterSandbox, 'listed' | 'refused'>;
  /** Deploys, rollbacks and undeploys counted by outcome (the `metrics` option). */
  metrics?: Metrics;
}): (req: Request, res: ServerResponse, pathname: string) => Promise<void> {
  const { verify, store, deployed, check, taken, logger, trusted, bodyTimeoutMs, sandbox, metrics = NO_METRICS } = deps;
  const knex = store.database.knex;
  const serveEventLists = createEventListRoutes({ verify, verifyAccessToken: deps.verifyAccessToken, store, logger, ...(bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs }) });

  /** Takes up a version that is now active, with what its check loaded. */
  async function goLive(id: string, checked: RunningExtension | undefined): Promise<void> {
    if (checked !== undefined) deployed.adopt(id, checked);
    try {
      await deployed.reload();
    } finally {
      deployed.discard(id);
    }
  }

  /** What a request does to what is live: counted with its outcome, `ok` or the code it was answered. */
  return function serveCounted(req, res, pathname) {
    const action = req.method === 'POST' ? (pathname === DEPLOYMENTS_PATH ? 'deploy' : pathname.endsWith('/rollback') ? 'rollback' : undefined) : req.method === 'DELETE' ? 'undeploy' : undefined;
    if (action === undefined || (pathname !== DEPLOYMENTS_PATH && !pathname.startsWith(`${DEPLOYMENTS_PATH}/`))) return serveDeployments(req, res, pathname);
    return serveDeployments(req, res, pathname).then(
      () => metrics.deploy(action, 'ok'),
      (error: unknown) => {
        metrics.deploy(action, error instanceof BcmsHttpError ? error.code : 'INTERNAL_ERROR');
        throw error;
      },
    );
  };

  async function serveDeployments(req: Request, res: ServerResponse, pathname: string): Promise<void> {
    if (EVENT_LIST_PATHS.has(pathname)) return serveEventLists(req, res, pathname);
    const item = /^\/api\/extensions\/deployments\/(plugin|function|event|job)\/([^/]+)(\/rollback)?$/.exec(pathname);
    const isList = pathname === DEPLOYMENTS_PATH;
    if (!isList && item === null) throw new BcmsHttpError('NOT_FOUND');
    const allow = isList ? 'GET, POST' : item?.[3] === undefined ? 'DELETE' : 'POST';
    if (!allow.split(', ').includes(req.method as string)) throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here.`, { Allow: allow });
    // A host parser that ran first (express.json({ verify: keepRawBody })) kept the bytes: they are what was signed.
    const { auth, body } = await verify(req as Request, { deploy: true }, () => signedBodyOf(req, () => readRawBody(req, DEPLOY_BODY_LIMIT, bodyTimeoutMs), logger));

    if (isList && req.method === 'GET') {
      // Each active version with how it fares on this instance (the one that answers).
      const health = deployed.health();
      const deployments = (await store.run(() => listDeployments(knex))).map((deployment) => {
        const here = deployment.active ? health.get(deployment.id) : undefined;
        return here === undefined ? deployment : { ...deployment, ...here };
      });
      writeJson(res, 200, JSON.stringify({ deployments, ...(sandbox === undefined ? {} : { sandbox: sandbox.listed }) }));
      return;
    }
    // Listing and undeploying still work; nothing new may go live.
    const goesLive = req.method === 'POST';
    if (goesLive && sandbox?.refused !== undefined) throw new BcmsHttpError('SANDBOX_UNAVAILABLE');
    if (item !== null) {
      const [, kind, encoded, rollback] = item as unknown as [string, DeploymentKind, string, string | undefined];
      let name: string;
      try {
        name = decodeURIComponent(encoded);
      } catch {
        name = '';
      }
      if (!isUrlSafe(name)) throw new BcmsHttpError('NOT_FOUND', `No ${kind} is named ${JSON.stringify(encoded)}.`);
      if (rollback === undefined) {
        const gone = await store.run(() => undeployDeployment(knex, kind, name));
        if (gone === null) throw new BcmsHttpError('NOT_FOUND', `No ${kind} named "${name}" is deployed.`);
        await deployed.reload();
        logger.info({ extension: extensionLabel(kind, gone.name, gone.version), kind, version: gone.version, by: auth.key.name }, 'bcms-extensions: undeployed');
        writeJson(res, 200, JSON.stringify({ undeployed: gone }));
        return;
      }
      const previous = await store.run(() => previousDeployment(knex, kind, name));
      if (previous === undefined) throw new BcmsHttpError('NOT_FOUND', `No earlier version of ${kind} "${name}" to go back to.`);
      const what = `Version ${previous.version} of ${kind} "${previous.name}"`;
      // Before its code runs anywhere, even in the check (and before its load error, which would be this).
      assertTrusted(previous, previous.signature, trusted, what);
      if (previous.loadError !== null) throw new BcmsHttpError('BUNDLE_LOAD_FAILED', `${what} failed to load (${previous.loadError}): it is not made live again.`);
      let checked: RunningExtension | undefined;
      try {
        checked = await check(previous);
      } catch (error) {
        const refusal = loadRefusal(error, what);
        await store.run(() => recordLoadError(knex, previous.id, refusal.message)).catch(() => {});
        throw refusal;
      }
      const back = await store.run(() => activateDeployment(knex, previous.id));
      if (back === null) {
        void checked?.close?.();
        throw new BcmsHttpError('NOT_FOUND', `No earlier version of ${kind} "${name}" to go back to.`);
      }
      await goLive(back.id, checked);
      logger.info({ extension: extensionLabel(kind, back.name, back.version), kind, version: back.version, by: auth.key.name }, 'bcms-extensions: rolled back');
      writeJson(res, 200, JSON.stringify({ deployment: back }));
      return;
    }

    const bundle = checkBundle(parseJsonText(decodeText(body, req.headers['content-type'])));
    const { kind, name, version, sha256, project } = bundle.manifest;
    // Who wrote it, before its code runs anywhere, even in the check.
    assertTrusted({ ...bundle.manifest, code: bundle.code, ui: bundle.ui }, bundle.signature, trusted);
    if (taken(kind, name)) throw new BcmsHttpError('NAME_TAKEN', `The app itself has ${kind === 'event' ? 'an' : 'a'} ${kind} named "${name}": deploy under another name.`);
    // The same code and UI as the live version (npm run dev saving without a change): nothing to store.
    const live = await store.run(() => activeVersion(knex, kind, name));
    // (And the same signature: a version signed now, of code deployed unsigned before, is stored.)
    if (live !== undefined && live.sha256 === sha256 && sameFiles(live.ui, bundle.ui) && live.signature?.value === bundle.signature?.value) {
      writeJson(res, 200, JSON.stringify({ unchanged: true }));
      return;
    }
    // Loaded in an isolate, within the load limit, before anything is stored: a bundle that throws or spins never goes live.
    let checked: RunningExtension | undefined;
    try {
      checked = await check({ kind, name, version, code: bundle.code });
    } catch (error) {
      throw loadRefusal(error);
    }
    let deployment: Deployment;
    try {
      deployment = await store.run(() =>
        recordDeployment(knex, {
          kind,
          name,
          project: project ?? null,
          version,
          sha256,
          code: bundle.code,
          ui: bundle.ui ?? null,
          signature: bundle.signature ?? null,
          deployedBy: `${auth.key.name} (${auth.key.id})`,
        }),
      );
    } catch (error) {
      void checked?.close?.();
      throw error;
    }
    // This instance takes it up before answering; the others on their notification.
    await goLive(deployment.id, checked);
    const failure = deployed.failures.get(deployment.id);
    // Not live and not failed: a later deploy of the same name (on any instance) went live between
    // storing this one and loading it. It is history now, as it would be a moment later anyway.
    if (!deployed.isLive(deployment.id) && failure !== undefined) {
      // It loaded in the check, not here (a setup that waits too long, say): take it back.
      await store.run(() => withdrawDeployment(knex, deployment.id, live?.id));
      await deployed.reload();
      throw new BcmsHttpError('BUNDLE_LOAD_FAILED', `The bundle did not load in the service: ${failure.split('\n')[0]}`);
    }
    logger.info({ extension: extensionLabel(kind, name, version), kind, version, by: auth.key.name }, 'bcms-extensions: deployed');
    writeJson(res, 201, JSON.stringify({ deployment }));
  }
}

/**
 * Whether two UIs are the same files (path → base64). Compared path by path: Postgres gives a jsonb
 * object's keys back in its own order, so the stored UI never serialises as it was sent.
 */
function sameFiles(a: Record<string, string> | null | undefined, b: Record<string, string> | null | undefined): boolean {
  if (a == null || b == null) return a == null && b == null;
  const paths = Object.keys(a);
  return paths.length === Object.keys(b).length && paths.every((file) => Object.hasOwn(b, file) && a[file] === b[file]);
}

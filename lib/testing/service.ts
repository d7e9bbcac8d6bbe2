import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express, { type Express } from 'express';
import pino from 'pino';
import { signRequest } from '../client';
import { pgliteInstallCommand } from '../db/connection';
import type { DeploymentKind } from '../deploy/load';
import { DEPLOYMENTS_PATH } from '../deploy/routes';
import { bcmsExtensions, type BcmsExtensionsOptions, type BcmsExtensionsRouter, type BcmsRegistry } from '../index';
import { isUrlSafe } from '../names';
import { createApiKey } from '../security/api-keys';
import { createSeed, type TestSeed } from './seed';
import { createTokenSigner, describe, type TestTokenOptions } from './token';
import { answerMisfit } from './answers';

/**
 * `createTestService`'s options: the router's own (`bcmsExtensions`'s second argument), with the
 * kit's defaults where the caller gives none: a PGlite database in memory (never `DATABASE_URL`),
 * a random `jwt.secret`, `files.dir` in a temporary folder, deployments on, and a logger that
 * writes errors only, to stderr.
 */
export type TestServiceOptions = BcmsExtensionsOptions;

/** What a call through the service answered. */
export interface TestAnswer<Body = unknown> {
  status: number;
  /** The JSON body, parsed (the text when it is not JSON). */
  body: Body;
  headers: Headers;
}

/** A deployed bundle, as the service took it. */
export interface TestDeployment {
  kind: DeploymentKind;
  name: string;
  version: string;
  /** The service runs this code already: nothing was stored. */
  unchanged: boolean;
}

/** A service for tests: the router on its own database, mounted on an Express app that also listens on a local port. */
export interface TestService {
  /** An Express app with the router mounted: give it to supertest (`request(service.app)`). */
  readonly app: Express;
  /** Where the app listens (`http://127.0.0.1:PORT`), for fetch or any HTTP client. */
  readonly url: string;
  /** The router: `router.db` (its Knex), `router.repo`, `router.events`. */
  readonly router: BcmsExtensionsRouter;
  /**
   * A JWT the service accepts, in BCMS's payload shape. A role name alone holds every permission.
   *
   * @example
   * service.token({ roles: ['ADMIN'] });
   * service.token({ roles: [{ name: 'USER', permissions: ['READ'] }], userId: 'ada' });
   */
  token(options: TestTokenOptions): string;
  /**
   * `POST /api/function/<name>` with `body` as JSON, signed with an API key that lists the
   * function (made on the service's database at the first call); resolves to the answer, whatever
   * its status.
   */
  signedCall<Result = unknown>(name: string, body?: unknown): Promise<TestAnswer<{ success: true; result: Result } | { success: false; error: { code: string; message: string } }>>;
  /**
   * Deploys what `bcms-ext bundle` wrote, as `bcms-ext deploy` sends it: a bundle file, or a folder
   * (every `.json` in it, as `bcms-bundle/`). Resolves once the service runs it; rejects with the
   * service's reason (`BUNDLE_LOAD_FAILED: ...`) when it does not take it.
   */
  deploy(file: string): Promise<TestDeployment[]>;
  /**
   * Throws when `body`, an answer of `method path` with `status` (200 by default), does not fit
   * what the service's OpenAPI document says of it: the method's `responseSchema` (a function's, in
   * its `{ success, result }` envelope). `signedCall` checks its answers so already.
   *
   * @example
   * const res = await request(service.app).get('/api/plugin/todos/todo/all');
   * service.checkAnswer('GET', '/api/plugin/todos/todo/all', res.body);
   */
  checkAnswer(method: string, path: string, body: unknown, status?: number): void;
  /** Templates and entries on the service's database. */
  readonly seed: TestSeed;
  /** Stops listening, ends isolates, closes the database, removes the temporary folder. */
  close(): Promise<void>;
}

const KIT_KEY_PREFIX = 'bcms-extensions/testing';

/**
 * Starts a service for tests: the router with `registry` on a database of its own (PGlite in
 * memory unless `options.database` names another), mounted on an Express app that listens on a
 * local port. Works under any test runner (Jest, `node:test`, Vitest); call `close()` after the
 * tests, or the process keeps running.
 *
 * @example
 * import { createTestService } from 'bcms-extensions/testing';
 * const service = await createTestService({ plugins: [myPlugin] });
 * const res = await fetch(`${service.url}/api/plugin/my-plugin/hello`, { headers: { Authorization: `Bearer ${service.token({ roles: ['ADMIN'] })}` } });
 * await service.close();
 */
export async function createTestService(registry: BcmsRegistry = {}, options: TestServiceOptions = {}): Promise<TestService> {
  if (registry === null || typeof registry !== 'object' || Array.isArray(registry)) {
    throw new TypeError(`createTestService(registry, options?): registry must be { plugins?, functions? }; got ${describe(registry)}`);
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`createTestService(registry, options?): options must be the router's options object; got ${describe(options)}`);
  }
  const jwtOptions = options.jwt ?? {};
  if (jwtOptions === null || typeof jwtOptions !== 'object') throw new TypeError('createTestService: option jwt must be an object');
  const filesDir = options.files === undefined ? fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-test-service-')) : undefined;
  const settings: BcmsExtensionsOptions = {
    ...options,
    // In memory, never DATABASE_URL: a test must not write into whatever database the shell points at.
    database: options.database ?? { pglite: 'memory://' },
    jwt: { ...jwtOptions, secret: jwtOptions.secret ?? randomBytes(32).toString('base64url') },
    deployments: options.deployments ?? 'on',
    files: options.files ?? { dir: filesDir },
    logger: options.logger ?? pino({ name: 'bcms-extensions', level: 'error' }, pino.destination({ fd: 2, sync: true })),
  };

  let router: BcmsExtensionsRouter;
  try {
    router = bcmsExtensions(registry, settings);
  } catch (error) {
    removeFolder(filesDir);
    throw explained(error);
  }
  let server: http.Server | undefined;
  try {
    await router.ready;
    const app = express();
    app.use(router);
    server = http.createServer(app);
    await new Promise<void>((resolve, reject) => {
      (server as http.Server).once('error', reject).listen(0, '127.0.0.1', () => resolve());
    });
    return serviceOf(app, server, router, settings, filesDir);
  } catch (error) {
    server?.close();
    await router.close().catch(() => {});
    removeFolder(filesDir);
    throw error;
  }
}

function serviceOf(app: Express, server: http.Server, router: BcmsExtensionsRouter, settings: BcmsExtensionsOptions, filesDir: string | undefined): TestService {
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const token = createTokenSigner(settings.jwt ?? {});
  const callKeys = new Map<string, Promise<{ keyId: string; secret: string }>>();
  let deployKey: Promise<{ keyId: string; secret: string }> | undefined;
  let closing: Promise<void> | undefined;

  const open = (what: string): void => {
    if (closing !== undefined) throw new Error(`${what}: this test service is closed`);
  };
  const hmacKey = async (input: { name: string; functions: string[]; deploy?: boolean }) => {
    const { id, secret } = await createApiKey(router.db, input);
    return { keyId: id, secret: secret as string };
  };

  /** A request signed as `bcms-ext` and the Node client sign them, over real HTTP. */
  async function signedFetch(method: 'POST', route: string, key: { keyId: string; secret: string }, body: string): Promise<TestAnswer> {
    const headers = signRequest({ ...key, method, url: route, body });
    const response = await fetch(url + route, { method, body, headers: { ...headers, 'Content-Type': 'application/json' } });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: the text as it is
    }
    return { status: response.status, body: parsed, headers: response.headers };
  }

  async function deployOne(file: string): Promise<TestDeployment> {
    let body: string;
    let bundle: { manifest?: { kind?: unknown; name?: unknown; version?: unknown } };
    try {
      body = fs.readFileSync(file, 'utf8');
      bundle = JSON.parse(body) as typeof bundle;
    } catch (error) {
      throw new Error(`deploy(): cannot read the bundle ${file}: ${(error as Error).message}. Give a file that bcms-ext bundle wrote (bcms-bundle/*.json)`);
    }
    if (bundle === null || typeof bundle !== 'object' || bundle.manifest === null || typeof bundle.manifest !== 'object') {
      throw new Error(`deploy(): ${file} is not a bundle (no manifest): give a file that bcms-ext bundle wrote (bcms-bundle/*.json)`);
    }
    // The kit's own deploy key, made on the service's database, as `bcms-ext keys create --deploy` would make one.
    deployKey ??= hmacKey({ name: `${KIT_KEY_PREFIX} deploy`, functions: [], deploy: true });
    const answer = await signedFetch('POST', DEPLOYMENTS_PATH, await deployKey, body);
    if (answer.status !== 200 && answer.status !== 201) {
      const reply = answer.body as { message?: string; error?: { code?: string; message?: string } };
      const reason = reply?.error ? `${reply.error.code}: ${reply.error.message}` : (reply?.message ?? String(answer.body));
      throw new Error(`deploy(): the service refused ${path.basename(file)} (${answer.status} ${reason})`);
    }
    const { kind, name, version } = bundle.manifest as TestDeployment;
    return { kind, name, version, unchanged: (answer.body as { unchanged?: boolean }).unchanged === true };
  }

  return {
    app,
    url,
    router,
    seed: createSeed(() => {
      open('seed');
      return router.repo;
    }),
    token(options) {
      open('token()');
      return token(options);
    },

    async signedCall(name, body = {}) {
      open('signedCall()');
      if (!isUrlSafe(name)) throw new TypeError(`signedCall(name, body): name must be a function's name (letters, digits, "-", "_", ".", "~"); got ${describe(name)}`);
      let text: string | undefined;
      try {
        text = JSON.stringify(body);
      } catch (error) {
        throw new TypeError(`signedCall(${JSON.stringify(name)}, body): body cannot be sent as JSON (${(error as Error).message})`);
      }
      if (text === undefined) throw new TypeError(`signedCall(${JSON.stringify(name)}, body): body cannot be sent as JSON (${describe(body)})`);
      let key = callKeys.get(name);
      if (key === undefined) {
        key = hmacKey({ name: `${KIT_KEY_PREFIX} ${name}`, functions: [name] });
        key.catch(() => callKeys.delete(name));
        callKeys.set(name, key);
      }
      const answer = await signedFetch('POST', `/api/function/${name}`, await key, text);
      // What it returned is checked against its responseSchema: a test learns of a result that does not fit.
      const misfit = answer.status < 300 ? answerMisfit(router.openapi(), 'POST', `/api/function/${name}`, answer.status, answer.body) : undefined;
      if (misfit !== undefined) throw new Error(`signedCall(${JSON.stringify(name)}): ${misfit}`);
      return answer as never;
    },

    checkAnswer(method, route, body, status = 200) {
      open('checkAnswer()');
      if (typeof method !== 'string' || typeof route !== 'string' || !route.startsWith('/'))
        throw new TypeError(`checkAnswer(method, path, body, status?): method and path such as 'GET', '/api/plugin/x/y'; got ${describe(method)}, ${describe(route)}`);
      let misfit: string | undefined;
      try {
        misfit = answerMisfit(router.openapi(), method, route, status, body);
      } catch (error) {
        throw new Error(`checkAnswer: ${(error as Error).message}`);
      }
      if (misfit !== undefined) throw new Error(`checkAnswer: ${misfit}`);
    },

    async deploy(file) {
      open('deploy()');
      if (typeof file !== 'string' || file === '') throw new TypeError(`deploy(file): file must be the path of a bundle (bcms-bundle/<kind>-<name>.json) or of its folder; got ${describe(file)}`);
      const target = path.resolve(file);
      if (!fs.existsSync(target)) throw new Error(`deploy(): ${target} does not exist: run bcms-ext bundle first (npm run bundle), which writes bcms-bundle/`);
      let files = [target];
      if (fs.statSync(target).isDirectory()) {
        files = fs
          .readdirSync(target)
          .filter((name) => name.endsWith('.json'))
          .sort()
          .map((name) => path.join(target, name));
        if (files.length === 0) throw new Error(`deploy(): no bundle in ${target}: run bcms-ext bundle first (npm run bundle)`);
      }
      const deployed: TestDeployment[] = [];
      for (const one of files) deployed.push(await deployOne(one));
      return deployed;
    },

    close() {
      closing ??= (async () => {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        try {
          await router.close();
        } finally {
          removeFolder(filesDir);
        }
      })();
      return closing;
    },
  };
}

function removeFolder(dir: string | undefined): void {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
}

/** The router's "install PGlite" error, said for tests: a dev dependency, or a database of the test's own. */
function explained(error: unknown): unknown {
  const message = (error as Error)?.message ?? '';
  if (!message.startsWith('the embedded database needs ')) return error;
  const missing = /needs (\S+),/.exec(message)?.[1] ?? 'PGlite';
  return new Error(
    `createTestService: the in-memory database needs ${missing}, which is not installed. Install it with ` +
      `\`${pgliteInstallCommand().replace(/^npm install /, 'npm install --save-dev ')}\`, or give the test service a database (options.database: a Postgres URL or a Knex instance)`,
    { cause: error },
  );
}

'use strict';
// The Express app each scenario measures. Loaded by server.js only, inside the server's process.

const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const express = require('express');
const knexFactory = require('knex');
const {
  bcmsExtensions,
  createApiKey,
  createBcmsFunction,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createJwtProtectionPreRequestHandler,
  JWTPermissionName,
  JWTRoleName,
} = require('..');
const { signRequest } = require('../dist/client');
const { JWT_SECRET, SPIN_TIMEOUT_MS } = require('./scenarios');

/** The `bench` plugin: GET /api/plugin/bench/hello/world answers `{ message: 'Hello' }`. */
function benchPlugin(preRequestHandler) {
  return createBcmsPlugin({
    name: 'bench',
    controllers: [
      createController({
        name: 'Hello',
        path: '/hello',
        methods: () => ({
          world: createControllerMethod({
            path: '/world',
            type: 'get',
            preRequestHandler,
            handler: async () => ({ message: 'Hello' }),
          }),
        }),
      }),
    ],
  });
}

const echoFunction = createBcmsFunction(async () => ({
  config: { name: 'echo', public: true },
  handler: async ({ request }) => request.body,
}));

const echoPrivateFunction = createBcmsFunction(async () => ({
  config: { name: 'echo-private', public: false },
  handler: async ({ request }) => request.body,
}));

async function withExtensions(registry, options = {}) {
  const app = express();
  // The package's default logger: a pino line per request to stdout, which run.js points at /dev/null.
  const router = bcmsExtensions(registry, options);
  app.use(router);
  // Listen only once function factories have run, so no measured request waits for them.
  await router.ready;
  app.locals.router = router;
  return app;
}

/** DATABASE_URL, in a schema of the bench's own (bcms_bench_keys), so no other data is touched. */
async function benchKeysDatabase() {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('function-post-signed needs the Postgres server of DATABASE_URL');
  const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  await admin.raw('create schema if not exists bcms_bench_keys');
  await admin.destroy();
  const scoped = new URL(url);
  scoped.searchParams.set('options', '-c search_path=bcms_bench_keys');
  return scoped.toString();
}

/** The `bench` plugin behind the JWT guard (ADMIN or USER holding READ). */
function guardedPluginApp() {
  return withExtensions(
    {
      plugins: [benchPlugin(createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ))],
    },
    { jwt: { secret: JWT_SECRET } },
  );
}

/** The private echo function, with a key of its own that the runner signs every request with. */
async function signedFunctionApp(keyName, keyOptions = {}) {
  const app = await withExtensions({ functions: [echoPrivateFunction] }, { database: await benchKeysDatabase() });
  const knex = app.locals.router.db;
  await knex('bcms_api_keys').where({ name: keyName }).delete(); // an earlier run's key, and its signatures
  const { id, secret } = await createApiKey(knex, { name: keyName, functions: ['echo-private'], ...keyOptions });
  // server.js hands the key to the runner, which signs every request with it.
  app.locals.benchKey = { keyId: id, secret };
  return app;
}

/**
 * An `app.use` doing only what #12's constraints ask of every answer, and nothing else: an `async`
 * handler, `Access-Control-Allow-Origin` and `X-Request-Id` (a request id of the router's kind), and
 * the default logger's request line. No routing, no handler context, no error handling. `without`
 * drops one of the three, to see what each costs against the ceiling.
 */
function constrainedCeiling(without) {
  return async () => {
    const { createDefaultLogger, REQUEST_LINE } = require('../dist/logger');
    const { createRequestIds } = require('../dist/http/request-id');
    const { writeJson } = require('../dist/http/respond');
    const writeLine = createDefaultLogger()[REQUEST_LINE];
    const nextRequestId = createRequestIds();
    const handler = async () => ({ message: 'Hello' });
    // The router's own JSON writer: the same content headers and write as its answers.
    const write = (req, res, requestId, started, value) => {
      writeJson(res, 200, JSON.stringify(value));
      if (without !== 'log') writeLine(requestId, undefined, req.method, req.url, 200, Math.round((performance.now() - started) * 1000) / 1000);
    };
    const app = express();
    app.use((req, res) => {
      const requestId = nextRequestId();
      const started = performance.now();
      if (without !== 'headers') {
        res.setHeader('Access-Control-Allow-Origin', '*');
        res.setHeader('X-Request-Id', requestId);
      }
      if (without === 'async') write(req, res, requestId, started, { message: 'Hello' });
      else void handler().then((value) => write(req, res, requestId, started, value));
    });
    return app;
  };
}

/** The extensions the deployed rows deploy: bench/extensions/<file>.js, whose text is the bundle's code. */
const EXTENSIONS = path.join(__dirname, 'extensions');

/** A bundle as `bcms-ext bundle` writes one: `{ manifest: { kind, name, version, sha256 }, code }`. */
function bundleOf(kind, name, file) {
  const code = fs.readFileSync(path.join(EXTENSIONS, file), 'utf8');
  return { manifest: { kind, name, version: '1.0.0', sha256: createHash('sha256').update(code).digest('hex') }, code };
}

/**
 * The database of a server that deploys: deploy keys and deployments are rows. With DATABASE_URL,
 * a schema of the bench's own (bcms_bench_deploy), emptied at every start so that no earlier run's
 * deployment is loaded; else an embedded PGlite in a directory of its own, `.bcms/bench-<scenario>`
 * (kept between runs, as `.bcms/data` is): not `.bcms/data` itself, which the plugin-get server
 * beside it holds (a data directory has one owner). On disk rather than in memory, as a service
 * has it: in memory, the server's RSS was 330 MB rather than 245, and each isolate started is a
 * fork of the server's process, which takes longer the larger it is. Nothing of it is read or
 * written while the server is loaded (no handler here queries).
 */
async function deployDatabase(scenario) {
  const url = process.env.DATABASE_URL;
  if (!url) return { pglite: path.join(__dirname, '..', '.bcms', `bench-${scenario}`) };
  const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  await admin.raw('drop schema if exists bcms_bench_deploy cascade');
  await admin.raw('create schema bcms_bench_deploy');
  await admin.destroy();
  const scoped = new URL(url);
  scoped.searchParams.set('options', '-c search_path=bcms_bench_deploy');
  return scoped.toString();
}

/**
 * A router with `registry`, that deploys `bundles` to itself once it listens, over HTTP as
 * `bcms-ext deploy` does (POST /api/extensions/deployments, signed with a deploy key it creates):
 * the server reports its port only once every bundle is live, so the runner's check and load reach
 * the isolates. `isolate` is left at its default ('deployed'): the bundles run in isolates, the
 * registry in the server's process. A start on an earlier run's data first loads what that run
 * deployed; deploying the same code again then changes nothing (200 `unchanged`).
 */
async function deployingApp(scenario, registry, bundles, options = {}) {
  const app = await withExtensions(registry, { database: await deployDatabase(scenario), ...options });
  const knex = app.locals.router.db;
  await knex('bcms_api_keys').where({ name: 'bench-deployer' }).delete(); // an earlier run's key
  const { id, secret } = await createApiKey(knex, { name: 'bench-deployer', functions: [], deploy: true });
  app.locals.afterListen = async (origin) => {
    for (const bundle of bundles) {
      const body = JSON.stringify(bundle);
      const url = '/api/extensions/deployments';
      const headers = { ...signRequest({ keyId: id, secret, method: 'POST', url, body }), 'content-type': 'application/json' };
      const response = await fetch(origin + url, { method: 'POST', headers, body });
      // 200 { unchanged: true }: an earlier run deployed this very code, and this start loaded it.
      if (response.status !== 201 && response.status !== 200) throw new Error(`deploying ${bundle.manifest.kind} ${bundle.manifest.name} answered ${response.status} ${await response.text()}`);
    }
  };
  return app;
}

const builders = {
  'express-use-ceiling': async () => {
    const app = express();
    const body = JSON.stringify({ message: 'Hello' });
    app.use((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
    return app;
  },
  'baseline-get': async () => {
    const app = express();
    app.get('/hello', (_req, res) => res.json({ message: 'Hello' }));
    return app;
  },
  'baseline-get-again': () => builders['baseline-get'](),
  'express-use-constrained': constrainedCeiling(),
  'constrained-without-log': constrainedCeiling('log'),
  'constrained-without-headers': constrainedCeiling('headers'),
  'constrained-without-async': constrainedCeiling('async'),
  'plugin-get': () => withExtensions({ plugins: [benchPlugin()] }),
  'plugin-get-guarded': guardedPluginApp,
  // The same server; only the requests differ (a different token each, see scenarios.js).
  'plugin-get-guarded-cold': guardedPluginApp,
  'baseline-post': async () => {
    const app = express();
    app.post('/echo', express.json(), (req, res) => res.json({ success: true, result: req.body }));
    return app;
  },
  'function-post': () => withExtensions({ functions: [echoFunction] }),
  'function-post-signed': () => signedFunctionApp('bench'),
  'function-post-bcms-client': () => signedFunctionApp('bench-bcms-client', { bcmsClient: true }),
  // The same plugin and function as plugin-get and function-post, deployed: they run in isolates.
  'plugin-get-deployed': () => deployingApp('plugin-get-deployed', {}, [bundleOf('plugin', 'bench', 'hello-plugin.js')]),
  'function-post-deployed': () => deployingApp('function-post-deployed', {}, [bundleOf('function', 'echo', 'echo-function.js')]),
  // About 5 ms of CPU a call: in the server's process, and deployed (the very same file).
  'function-cpu': () => withExtensions({ functions: [require('./extensions/cpu-function').default] }),
  'function-cpu-deployed': () => deployingApp('function-cpu-deployed', {}, [bundleOf('function', 'cpu', 'cpu-function.js')]),
  // plugin-get's registry plugin, beside a deployed function that never returns (the runner keeps
  // calling it while this server is loaded): each call ends at functionTimeoutMs with a 504, and
  // its isolate is killed and replaced.
  'plugin-get-while-spinning': () =>
    deployingApp('plugin-get-while-spinning', { plugins: [benchPlugin()] }, [bundleOf('function', 'spin', 'spin-function.js')], { functionTimeoutMs: SPIN_TIMEOUT_MS }),
};

/**
 * flood.js's server: plugin-get's open GET, beside a POST behind the JWT guard that flood.js's
 * clients send 1 MB bodies of nested arrays without a token. bodyLimit 2mb: the guard, not the
 * size, must be what turns them away (the reviewer's case, under the old 1mb default).
 */
function floodApp() {
  const guarded = createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.WRITE);
  const plugin = createBcmsPlugin({
    name: 'bench',
    controllers: [
      createController({
        name: 'Hello',
        path: '/hello',
        methods: () => ({
          world: createControllerMethod({ path: '/world', type: 'get', handler: async () => ({ message: 'Hello' }) }),
          inbox: createControllerMethod({ path: '/inbox', type: 'post', preRequestHandler: guarded, handler: async ({ request }) => ({ got: Array.isArray(request.body) }) }),
        }),
      }),
    ],
  });
  return withExtensions({ plugins: [plugin] }, { jwt: { secret: JWT_SECRET }, bodyLimit: '2mb', database: { pglite: 'memory://' } });
}
builders.flood = floodApp;

/** Resolves to the Express app of a scenario, or throws for an unknown name. */
function buildApp(name) {
  const build = builders[name];
  if (build === undefined) throw new Error(`unknown scenario "${name}" (known: ${Object.keys(builders).join(', ')})`);
  return build();
}

module.exports = { buildApp };

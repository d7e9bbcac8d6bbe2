'use strict';
// The OpenAPI document's cost (issue 26): GET /api/extensions/openapi.json for 100 plugins of 10
// endpoints each (half behind the JWT guard, every one with a BCMS doc object and a zod answer
// schema), plus 100 functions with body schemas. Timed: the document made afresh (no method
// described yet) and written as JSON, as the first request after a deployment change makes it;
// then the request that finds it made (served from its cache). Target: under 100 ms to make.
// `npm run build`, then `node bench/openapi.js`.

const { performance } = require('node:perf_hooks');
const { z } = require('zod');
const { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } = require('../dist');
const { buildOpenApiDocument } = require('../dist/openapi/document');
const { PluginRouteTable } = require('../dist/plugin/routes');
const { loadFunctions } = require('../dist/function/load');

const PLUGINS = 100;
const ENDPOINTS = 10;
const RUNS = 7;
const TARGET_MS = 100;

/** A registry of its own each run: nothing described before it is timed. */
async function registry() {
  const guard = createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ);
  const plugins = Array.from({ length: PLUGINS }, (_, p) => {
    // A schema of each plugin's own, which its endpoints share (as a plugin's item type is shared).
    const answer = z.object({ items: z.array(z.object({ id: z.string(), label: z.string().min(1), count: z.number().int() })) });
    return createBcmsPlugin({
      name: `plugin-${p}`,
      controllers: [
        createController({
          name: 'Items',
          path: '/items',
          methods: () =>
            Object.fromEntries(
              Array.from({ length: ENDPOINTS }, (_, e) => [
                `m${e}`,
                createControllerMethod({
                  path: e % 2 === 0 ? `/e${e}` : `/e${e}/:id`,
                  type: e % 3 === 0 ? 'post' : 'get',
                  doc: { summary: `Endpoint ${e} of plugin ${p}.`, params: [{ type: 'query', name: 'limit' }] },
                  ...(e % 2 === 0 ? { preRequestHandler: guard } : {}),
                  responseSchema: answer,
                  handler: async () => ({ items: [] }),
                }),
              ]),
            ),
        }),
      ],
    });
  });
  const functions = await loadFunctions(
    Array.from({ length: PLUGINS }, (_, f) => createBcmsFunction(async () => ({ config: { name: `fn-${f}`, public: f % 2 === 0, bodySchema: z.object({ n: z.number() }) }, handler: async () => 1 }))),
  );
  return { plugins: new PluginRouteTable(plugins), functions, ownRoutes: new PluginRouteTable([], '/api') };
}

async function main() {
  const made = [];
  let cached;
  let size = 0;
  for (let run = 0; run < RUNS; run++) {
    const sources = { ...(await registry()), title: 'bench', version: '1' };
    const started = performance.now();
    const text = JSON.stringify(buildOpenApiDocument(sources));
    made.push(performance.now() - started);
    size = text.length;
    // The same tables again: every method already described, as a second build would find them.
    const again = performance.now();
    JSON.stringify(buildOpenApiDocument(sources));
    cached = performance.now() - again;
  }
  const median = [...made].sort((a, b) => a - b)[Math.floor(RUNS / 2)];
  console.log(
    JSON.stringify(
      {
        rows: [
          {
            scenario: `OpenAPI document, ${PLUGINS} plugins × ${ENDPOINTS} endpoints and ${PLUGINS} functions, made afresh: median ms of ${RUNS}`,
            ms: Number(median.toFixed(1)),
            target: `< ${TARGET_MS}`,
            met: median < TARGET_MS,
            bytes: size,
          },
          { scenario: 'the same, its methods described already (a rebuild after a deployment change)', ms: Number(cached.toFixed(1)) },
        ],
      },
      null,
      2,
    ),
  );
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

'use strict';
// A service on embedded PGlite in a process of its own, for tests that kill it or start a second
// one on the same directory: `node embedded-server.js DIR`. Built package (dist/), as a host runs
// it. It serves one public function, `add`, which stores a template named by the body's `name` and
// answers only once the write has returned; prints `listening <port>` when ready, or
// `failed <message>` and exits 1 when the router cannot start.
const express = require('express');
const { bcmsExtensions, createBcmsFunction } = require('../..');

const add = createBcmsFunction(async () => ({
  config: { name: 'add', public: true },
  handler: async ({ repo, request }) => (await repo.template.add({ name: request.body.name })).name,
}));

const quiet = { info() {}, warn() {}, error() {}, debug() {}, fatal() {}, trace() {}, child: () => quiet };

let router;
try {
  router = bcmsExtensions({ functions: [add] }, { database: { pglite: process.argv[2] }, logger: quiet });
} catch (error) {
  process.stdout.write(`failed ${error.message}\n`);
  process.exit(1);
}
router.ready.then(
  () => {
    const server = express()
      .use(router)
      .listen(0, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
  },
  (error) => {
    process.stdout.write(`failed ${error.message}\n`);
    process.exit(1);
  },
);

'use strict';
// One scenario's server: `node bench/server.js <scenario>`. It runs in its own process so that
// autocannon, in the runner's process, does not share its event loop or its CPU time.
// Forked by run.js, it reports its port over IPC; run by hand (to profile it), it prints it.

const http = require('node:http');
const { buildApp } = require('./apps');

async function main() {
  const name = process.argv[2];
  const app = await buildApp(name);
  const server = http.createServer(app);
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  // A server that deploys to itself (apps.js) does it now, over HTTP, before it reports its port.
  if (app.locals.afterListen) await app.locals.afterListen(`http://127.0.0.1:${port}`);
  if (process.send) process.send({ port, key: app.locals.benchKey });
  else console.log(`${name} listening on http://127.0.0.1:${port}`);

  // Exit through process.exit so that `node --cpu-prof` writes its profile; a disconnect means the
  // runner is gone, and a server left behind would skew the next run.
  const stop = () => {
    server.closeAllConnections();
    server.close();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.once('disconnect', stop);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

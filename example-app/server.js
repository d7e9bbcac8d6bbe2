'use strict';
// `npm start`: the example CMS on http://localhost:8080 (PORT), on embedded PGlite in
// example-app/.data unless DATABASE_URL names a Postgres server.
const http = require('node:http');
const path = require('node:path');
const pino = require('pino');
const { createExampleApp } = require('./app');

const PORT = Number(process.env.PORT || 8080);
const DATA_DIR = process.env.EXAMPLE_DATA_DIR || path.join(__dirname, '.data');
const ADMIN_EMAIL = process.env.ADMIN_EMAIL || 'admin@example.com';

function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

function banner({ url, seconds, database, users }) {
  const admin = users.find((user) => user.email === ADMIN_EMAIL);
  const lines = [
    '',
    `Example CMS with bcms-extensions: ${url}  (started in ${seconds.toFixed(1)} s, database ${database})`,
    `Admin shell, with the plugin UI under Plugins: ${url}/bcms  (sign in as ${ADMIN_EMAIL})`,
    '',
    'Demo users:',
    ...users.map((user) => {
      const kept = user.email === ADMIN_EMAIL ? '(password as set at first start, or ADMIN_PASSWORD)' : '(password as set at first start)';
      return `  ${user.email.padEnd(22)} ${user.password ? `password: ${user.password}   (generated; shown this once)` : kept}`;
    }),
    '',
    'Try it:',
    ...(admin?.password ? [`  export ADMIN_PASSWORD='${admin.password}'`] : []),
    `  curl -s ${url}/api/plugin/content-stats/stats/counts`,
    `  curl -s -X POST ${url}/api/function/get-all-blogs-titles`,
    `  TOKEN=$(curl -s ${url}/api/auth/login -H 'Content-Type: application/json' -d "{\\"email\\":\\"${ADMIN_EMAIL}\\",\\"password\\":\\"$ADMIN_PASSWORD\\"}" | node -p 'const r = JSON.parse(require("fs").readFileSync(0, "utf8")); r.accessToken ?? (console.error(r.message), process.exit(1))')`,
    `  curl -s -X POST ${url}/api/function/submit-form -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"name":"Ada","email":"ada@example.com","message":"Hello"}'`,
    `  export BCMS_URL=${url} BCMS_TOKEN=$TOKEN`,
    `  eval "$(npx --no bcms-ext keys create --name 'contact page' --functions submit-form --env)"`,
    `  npx --no bcms-ext call submit-form --data '{"name":"Grace","email":"grace@example.com","message":"Signed"}'`,
    `  curl -s ${url}/api/plugin/content-stats/stats/submissions -H "Authorization: Bearer $TOKEN"`,
    '',
    'Stop with Ctrl+C.',
    '',
  ];
  process.stdout.write(lines.join('\n'));
}

async function main() {
  const started = process.hrtime.bigint();
  const database = process.env.DATABASE_URL || { pglite: DATA_DIR };
  const logger = pino({ name: 'example-cms', level: process.env.LOG_LEVEL || 'info' });
  // The port first: a port in use must not cost a first start its seeding, and with it the
  // generated passwords it prints once. Requests that come before the app is ready wait for it.
  let example;
  let appReady;
  const app = new Promise((resolve) => (appReady = resolve));
  const server = http.createServer((req, res) => app.then((handler) => handler(req, res)));
  server.on('error', async (error) => {
    await example?.close().catch(() => {});
    if (error.code === 'EADDRINUSE') fail(`Port ${PORT} is in use: start on another one, for example PORT=${PORT + 1} npm start`);
    fail(`The example CMS could not listen on port ${PORT}: ${error.message}`);
  });
  await new Promise((resolve) => server.listen(PORT, resolve));
  try {
    example = await createExampleApp({ database, adminEmail: ADMIN_EMAIL, adminPassword: process.env.ADMIN_PASSWORD || undefined, logger });
  } catch (error) {
    // An error that already says what to do (a data directory in use) is printed as it is.
    const hint = /is in use by|Stop that one|Install it with/.test(error.message) ? '' : ` Is the database at ${typeof database === 'string' ? 'DATABASE_URL' : DATA_DIR} reachable and writable?`;
    fail(`The example CMS could not start: ${error.message}.${hint}`);
  }
  appReady(example.app);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  // SIGINT / SIGTERM: stop taking connections, let requests in flight finish, close the database
  // (PGlite writes its data out), exit 0. A request still running after 10 s is cut.
  let stopping = false;
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`\n${signal}: stopping...\n`);
    const force = setTimeout(() => server.closeAllConnections(), 10_000);
    force.unref();
    server.close(async () => {
      await example.close();
      process.stdout.write('Stopped.\n');
      process.exit(0);
    });
    server.closeIdleConnections();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  // Only now, with the handlers in place: whoever reads the banner may stop it at once (a test
  // that sent SIGTERM on reading it, under load, found the process killed before they were).
  banner({ url: `http://localhost:${PORT}`, seconds, database: typeof database === 'string' ? 'DATABASE_URL' : `PGlite in ${DATA_DIR}`, users: example.users });
}

main();

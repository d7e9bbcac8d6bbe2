'use strict';
// An existing Express app as people write them, with the package mounted in one line: its own
// sign-in (a cookie session, `req.user`), its own `cors()` with credentials, its own JSON parser in
// front of everything (keeping the raw body, as docs/signed-calls.md says), its own routes and
// error handler, and an error reporter (Sentry and the like). Written into a new app by
// test/host-apps.test.ts and run on Express 4 and on Express 5 with the packed tarball installed.

const crypto = require('node:crypto');
const fs = require('node:fs');
const express = require('express');
const cors = require('cors');
const {
  bcmsExtensions,
  keepRawBody,
  createApiKey,
  createBcmsPlugin,
  createController,
  createControllerMethod,
  createBcmsFunction,
  createJwtProtectionPreRequestHandler,
  JWTRoleName,
  JWTPermissionName,
} = require('bcms-extensions');

// The app's users and sessions: nothing BCMS-shaped about them.
const users = new Map([
  ['ada@example.com', { id: 'u-ada', name: 'Ada', password: 'ada-password', role: 'admin' }],
  ['bob@example.com', { id: 'u-bob', name: 'Bob', password: 'bob-password', role: 'reader' }],
]);
const sessions = new Map();
// What the app's error reporter was told: the app's own errors and the router's 5xx alike.
const reported = [];
const report = (source, error, req) => reported.push({ source, message: error.message, path: req.originalUrl });

const stats = createBcmsPlugin({
  name: 'stats',
  controllers: [
    createController({
      name: 'Stats',
      path: '/stats',
      methods: () => ({
        open: createControllerMethod({ path: '/open', type: 'get', handler: async () => ({ open: true }) }),
        echo: createControllerMethod({ path: '/echo', type: 'post', handler: async ({ request }) => ({ echoed: request.body }) }),
        me: createControllerMethod({
          path: '/me',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
          handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId }),
        }),
        broken: createControllerMethod({
          path: '/broken',
          type: 'get',
          handler: async () => {
            throw new Error('the stats table is gone');
          },
        }),
      }),
    }),
  ],
});
const greet = createBcmsFunction(async () => ({ config: { name: 'greet', public: true }, handler: async ({ request }) => ({ greeting: `Hello, ${request.body.name}!` }) }));
const secret = createBcmsFunction(async () => ({ config: { name: 'secret' }, handler: async ({ request }) => ({ signedFor: request.body.who }) }));

const router = bcmsExtensions(
  { plugins: [stats], functions: [greet, secret] },
  {
    // The app's users, as BCMS's roles: its admins hold BCMS's ADMIN role.
    auth: {
      fromRequest: (req) =>
        req.user === undefined
          ? null
          : {
              userId: req.user.id,
              roles: [{ name: req.user.role === 'admin' ? 'ADMIN' : 'USER', permissions: req.user.role === 'admin' ? ['READ', 'WRITE', 'DELETE', 'EXECUTE'] : ['READ'] }],
            },
      signInPath: '/auth/login',
    },
    cors: false, // the app's own policy, below
    onError: (error, req) => report('bcms-extensions', error, req),
    openapi: { info: { title: 'Host app', version: '2.3.4', license: { name: 'MIT', identifier: 'MIT' } } },
    logger: quietLogger(),
  },
);

const app = express();
app.use(cors({ origin: process.env.ALLOWED_ORIGIN, credentials: true }));
app.use(express.json({ verify: keepRawBody }));
app.use((req, _res, next) => {
  const sid = /(?:^|;\s*)sid=([0-9a-f]+)/.exec(req.headers.cookie ?? '')?.[1];
  req.user = sid === undefined ? undefined : sessions.get(sid);
  next();
});
app.post('/auth/login', (req, res) => {
  const user = users.get(req.body?.email);
  if (user === undefined || user.password !== req.body.password) return res.status(401).json({ error: 'wrong email or password' });
  const sid = crypto.randomBytes(16).toString('hex');
  sessions.set(sid, user);
  res.cookie('sid', sid, { httpOnly: true, sameSite: 'lax', path: '/' }).json({ name: user.name });
});
app.use(router);
app.get('/api/own', (req, res) => res.json({ own: true, user: req.user?.name ?? null }));
app.get('/api/own/broken', () => {
  throw new Error('the app broke');
});
app.get('/debug/reported', (_req, res) => res.json(reported));
app.use((_req, res) => res.status(404).json({ app: 'not found' }));
app.use((error, req, res, _next) => {
  report('app', error, req);
  res.status(500).json({ app: 'internal error' });
});

router.ready.then(
  async () => {
    // Keys for the test: a caller of `secret`, and a deployer.
    const caller = await createApiKey(router.db, { name: 'caller', functions: ['secret'] });
    const deployer = await createApiKey(router.db, { name: 'deployer', functions: [], deploy: true });
    fs.writeFileSync('keys.json', JSON.stringify({ caller, deployer }));
    const server = app.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
    process.on('SIGTERM', () => server.close(() => router.close().then(() => process.exit(0))));
  },
  (error) => {
    process.stderr.write(`failed: ${error.message}\n`);
    process.exit(1);
  },
);

function quietLogger() {
  const say = (level) => (fields, message) => process.stderr.write(`${level}: ${message ?? fields}\n`);
  const logger = { info() {}, debug() {}, trace() {}, warn: say('warn'), error: say('error'), fatal: say('fatal'), child: () => logger };
  return logger;
}

'use strict';
// The package as a user gets it: `npm pack`ed, installed from the tarball into a new app, and that
// app started in a process of its own. Used by test/installed.test.ts and by `npm run bench`'s
// installed-package rows (bench/startup.js). CommonJS, so both can require it.

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' } });

/**
 * `npm pack` of the built package into `dir`; the tarball's path. Without its prepack script (a
 * full build, which would empty dist/ under the tests running beside it): `npm test` built it.
 */
function pack(dir) {
  const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', dir], root));
  return path.join(dir, packed.filename);
}

/** The exact versions this package is tested with, as `name@version` for `npm install`. */
const tested = (...names) => names.map((name) => `${name}@${manifest.devDependencies[name]}`);

/** The ranges this package accepts (its peer dependencies), as `name@range`: npm installs the newest of each, as a user's `npm install` does. */
const ranges = (...names) => names.map((name) => `${name}@${manifest.peerDependencies[name]}`);

/**
 * A new app in `dir` with the tarball and Express installed, and `extra` packages (the embedded
 * database's, for one). From npm's cache where it can: every package is one this repository's
 * lock file installed.
 */
function installApp(dir, tarball, extra = []) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'installed-app', version: '1.0.0', private: true }, null, 2));
  fs.writeFileSync(path.join(dir, 'server.js'), SERVER);
  npm(['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, ...tested('express'), ...extra], dir);
}

// The user's app: the router mounted with one public function that reads the database, listening
// at once (as apps do; requests wait for the router's `ready`).
const SERVER = `'use strict';
const express = require('express');
const { bcmsExtensions, createBcmsFunction } = require('bcms-extensions');
const count = createBcmsFunction(async () => ({
  config: { name: 'count', public: true },
  handler: async ({ repo }) => (await repo.template.findAll()).length,
}));
// Everything but debug on stderr, each line as its level and message (a missing template says so there).
const say = (level) => (fields, message) => process.stderr.write(level + ': ' + (message ?? fields) + '\\n');
const logger = { info: say('info'), debug() {}, trace() {}, warn: say('warn'), error: say('error'), fatal: say('fatal'), child: () => logger };
const router = bcmsExtensions({ functions: [count] }, { logger });
router.ready.catch((error) => { process.stderr.write('failed: ' + error.message + '\\n'); process.exit(1); });
const server = express().use(router).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => router.close().then(() => process.exit(0))));
`;

function post(port, pathname) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: pathname, method: 'POST' }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Starts the app (`env` added to this process's, less DATABASE_URL unless given) and waits for its
 * first answer to `POST /api/function/count`, timed from the spawn. Resolves with that time, the
 * answer, what the app wrote on stderr, and `stop()`; rejects with its stderr if it exits first.
 */
async function startApp(dir, port, env = {}) {
  const childEnv = { ...process.env, NODE_OPTIONS: '', PORT: String(port), ...env };
  if (!('DATABASE_URL' in env)) delete childEnv.DATABASE_URL;
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, ['server.js'], { cwd: dir, env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  for (;;) {
    if (child.exitCode !== null) {
      await exited;
      throw new Error(`the installed app exited with ${child.exitCode}: ${stderr.trim()}`);
    }
    try {
      const answer = await post(port, '/api/function/count');
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const stop = async () => {
        child.kill('SIGTERM');
        return exited;
      };
      return { seconds, answer, stderr: () => stderr, stop, pid: child.pid };
    } catch (error) {
      if (error.code !== 'ECONNREFUSED') throw error;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

/** Every file under `dir` with its size and modification time: what a start must leave as it is. */
function snapshot(dir) {
  const files = {};
  const walk = (relative) => {
    for (const entry of fs.readdirSync(path.join(dir, relative), { withFileTypes: true })) {
      const child = path.join(relative, entry.name);
      if (entry.isDirectory()) walk(child);
      else {
        const stat = fs.statSync(path.join(dir, child));
        files[child] = `${stat.size} ${stat.mtimeMs}`;
      }
    }
  };
  walk('');
  return files;
}

module.exports = { pack, installApp, startApp, snapshot, tested, ranges };

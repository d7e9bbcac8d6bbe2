// npm run lint:package: the tarball as npm would publish it (npm pack of the built dist/), checked
// by publint (package.json against the files it ships) and by arethetypeswrong (every subpath's
// types resolve, under Node 16+ from CommonJS and ESM and under bundlers). The `ui` subpaths are ES
// modules only, on purpose (a plugin UI's bundler takes them; Node imports them): a require of them
// resolving to ESM is not counted. Node 10's resolution (no `exports`) is not supported.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const bin = (name) => path.join(root, 'node_modules', '.bin', name);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-lint-package-'));
try {
  const [{ filename }] = JSON.parse(execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }));
  const tarball = path.join(dir, filename);
  execFileSync(bin('publint'), ['--strict', tarball], { stdio: 'inherit' });
  execFileSync(bin('attw'), [tarball, '--profile', 'node16', '--ignore-rules', 'cjs-resolves-to-esm'], { stdio: 'inherit' });
} catch (error) {
  process.exitCode = typeof error.status === 'number' ? error.status : 1;
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}

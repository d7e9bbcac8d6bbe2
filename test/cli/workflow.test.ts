import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { BIN, ROOT, get, output, request, run, service, useWorkflowService, waitFor, writeEnv } from '../support/workflow';

// The whole workflow as a user runs it: bcms-ext create, npm install (from the registry), npm run
// bundle, npm run deploy, npm run dev, against the example app as `npm start` runs it.
useWorkflowService();

/** The folders the tests made (a project with its node_modules is some 160 MB), removed after them. */
const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

function project(kind: 'plugin' | 'functions', name: string): string {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-workflow-'));
  made.push(parent);
  const created = run(process.execPath, [BIN, 'create', kind, name], parent);
  expect(created.status).toBe(0);
  const dir = path.join(parent, name);
  writeEnv(dir);
  const installed = run('npm', ['install', '--no-audit', '--no-fund'], dir);
  if (installed.status !== 0) throw new Error(`npm install failed:\n${output(installed)}`);
  return dir;
}

/**
 * The README's deploy walkthrough, run by bash line by line as a reader types it, in an app that
 * depends on this package (its node_modules links it, as npm links a `file:` dependency): the
 * plugin named `name` instead of hello-stats, and the service's URL for http://localhost:8080 (the
 * environment's BCMS_URL, which the commands prefer to .env's). Resolves to the project's folder
 * what the walkthrough's last line, its curl, printed, and all it printed.
 */
function readmeWalkthrough(name: string): { dir: string; printed: string; all: string } {
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');
  const block = /<!-- deploy-walkthrough:start -->\s*```sh\n([\s\S]*?)```\s*<!-- deploy-walkthrough:end -->/.exec(readme)?.[1];
  if (block === undefined) throw new Error('README.md has no deploy-walkthrough block');
  const app = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-walkthrough-'));
  made.push(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'an-app', private: true, dependencies: { 'bcms-extensions': `file:${ROOT}` } }));
  fs.mkdirSync(path.join(app, 'node_modules', '.bin'), { recursive: true });
  fs.symlinkSync(ROOT, path.join(app, 'node_modules', 'bcms-extensions'));
  fs.symlinkSync(path.join('..', 'bcms-extensions', 'dist', 'cli', 'bin.js'), path.join(app, 'node_modules', '.bin', 'bcms-ext'));
  const script = `set -e\n${block.replaceAll('hello-stats', name).replaceAll('http://localhost:8080', service.base)}`;
  const walked = run('bash', ['-c', script], app, { BCMS_URL: service.base, TOKEN: service.token });
  if (walked.status !== 0) throw new Error(`the README's walkthrough failed:\n${output(walked)}`);
  // The later commands, run without that environment, find the service through .env, as at 8080.
  const env = path.join(app, name, '.env');
  fs.writeFileSync(env, fs.readFileSync(env, 'utf8').replace(/^BCMS_URL=.*$/m, `BCMS_URL=${service.base}`));
  return { dir: path.join(app, name), printed: walked.stdout.trim().split('\n').at(-1)!, all: output(walked) };
}

test("a plugin project: the README's walkthrough (create, install, key, bundle, deploy), then rename, a type error, a broken bundle, npm run dev", async () => {
  const { dir, printed, all } = readmeWalkthrough('workflow-plugin');
  expect(JSON.parse(printed)).toEqual({ message: 'Hello from workflow-plugin!' });
  expect(fs.existsSync(path.join(dir, 'ui', 'node_modules', 'vue'))).toBe(true); // UI dependencies inside ui/
  expect(fs.readFileSync(path.join(dir, '.env'), 'utf8')).toMatch(/^BCMS_KEY_ID=.+$/m); // written by keys create --env-file
  expect(all).toMatch(/Type-checking backend\/\.\.\. ok\nBundling backend\/main\.ts\.\.\. [\d.]+ KB\nBuilding ui\/\.\.\. \d+ files\nWrote bcms-bundle\/plugin-workflow-plugin\.json/);
  expect(all).not.toContain('Unknown at rule'); // the scaffold's stylesheet has no Tailwind directives
  expect(all).toMatch(/Deploying plugin workflow-plugin 0\.1\.0 \([\d.]+ KB\) to http:\/\/localhost:\d+\.\.\. live\./);
  const written = JSON.parse(fs.readFileSync(path.join(dir, 'bcms-bundle', 'plugin-workflow-plugin.json'), 'utf8')) as { manifest: Record<string, string>; code: string };
  expect(written.manifest).toMatchObject({ kind: 'plugin', name: 'workflow-plugin', version: '0.1.0', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  expect(written.code).toContain('require("bcms-extensions")');

  // npm test: the project's own test deploys its bundle into a test service (bcms-extensions/testing) and calls it.
  const tested = run('npm', ['test'], dir);
  expect([tested.status, output(tested)]).toEqual([0, expect.stringMatching(/^(?:# |ℹ )pass 2$/m)]);
  expect(output(tested)).toMatch(/^(?:# |ℹ )fail 0$/m);

  expect(await get('/api/plugin/workflow-plugin/hello/world')).toEqual({ status: 200, body: { message: 'Hello from workflow-plugin!' } });
  expect((await get('/api/plugin/workflow-plugin/hello/templates')).status).toBe(401);
  expect((await get('/api/plugin/workflow-plugin/hello/templates', { Authorization: `Bearer ${service.token}` })).body).toMatchObject({ templates: ['blog', 'form-submissions'] });
  expect(String((await get('/plugin/workflow-plugin/')).body)).toContain('<script type="module" src="/api/extensions/sdk.js"></script>');
  const listed = (await get('/api/extensions/plugins', { Authorization: `Bearer ${service.token}` })).body as { plugins: { name: string; uiUrl: string | null }[] };
  expect(listed.plugins).toContainEqual({ name: 'workflow-plugin', label: 'Workflow plugin', uiUrl: '/plugin/workflow-plugin/', policies: [] });

  // Renamed in bcms-plugin.config.json: its endpoints move.
  const configFile = path.join(dir, 'bcms-plugin.config.json');
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8')) as { pluginName: string; projectId: string };
  expect(config.projectId).toMatch(/^[0-9a-f-]{36}$/);
  fs.writeFileSync(configFile, JSON.stringify({ ...config, pluginName: 'workflow-renamed' }));
  expect(run('npm', ['run', 'bundle'], dir).status).toBe(0);
  expect(run('npm', ['run', 'deploy'], dir).status).toBe(0);
  expect((await get('/api/plugin/workflow-renamed/hello/world')).status).toBe(200);
  expect((await get('/api/plugin/workflow-plugin/hello/world')).status).toBe(404);

  // A type error: reported with file and line, no bundle written, and the earlier one gone: deploy has nothing stale to send.
  const main = path.join(dir, 'backend', 'main.ts');
  const good = fs.readFileSync(main, 'utf8');
  fs.writeFileSync(main, good.replace("handler: async () => ({ message: 'Hello from workflow-plugin!' }),", 'handler: async () => ({ message: 42 * "x" }),'));
  const typeError = run('npm', ['run', 'bundle'], dir);
  expect(typeError.status).not.toBe(0);
  expect(output(typeError)).toMatch(/backend\/main\.ts\(\d+,\d+\): error TS\d+/);
  expect(output(typeError)).toMatch(/no bundle written/);
  expect(output(typeError)).toContain('Removed bcms-bundle/: it held the bundles of the code before this change.');
  expect(fs.existsSync(path.join(dir, 'bcms-bundle'))).toBe(false);
  const nothing = run('npm', ['run', 'deploy'], dir);
  expect(nothing.status).not.toBe(0);
  expect(output(nothing)).toContain('bcms-ext deploy: no bundle in bcms-bundle/: run npm run bundle first');

  // A bundle that breaks when loaded: refused with its error, and the old version still answers.
  fs.writeFileSync(main, `${good}\nthrow new Error('missing configuration');\n`);
  expect(run('npm', ['run', 'bundle'], dir).status).toBe(0);
  const refused = run('npm', ['run', 'deploy'], dir);
  expect(refused.status).not.toBe(0);
  expect(output(refused)).toMatch(/the service answered 422: The bundle did not load: missing configuration/);
  expect((await get('/api/plugin/workflow-renamed/hello/world')).body).toEqual({ message: 'Hello from workflow-plugin!' });

  // npm run dev: deploys, then again on each change.
  fs.writeFileSync(main, good);
  const dev = spawn('npm', ['run', 'dev'], { cwd: dir, env: { ...process.env, DATABASE_URL: '', NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let devOutput = '';
  dev.stdout.on('data', (chunk) => (devOutput += chunk));
  dev.stderr.on('data', (chunk) => (devOutput += chunk));
  try {
    await waitFor(async () => devOutput.includes('Deployed: the service serves this version now.'), 'the first dev deploy');
    fs.writeFileSync(main, good.replace('Hello from workflow-plugin!', 'Changed while dev ran'));
    await waitFor(async () => JSON.stringify((await get('/api/plugin/workflow-renamed/hello/world')).body).includes('Changed while dev ran'), 'the change, deployed by dev');
  } finally {
    process.kill(-(dev.pid as number), 'SIGINT');
  }
}, 240_000);

test('a functions project: create, add a private function, install, bundle, deploy, call it signed', async () => {
  const dir = project('functions', 'workflow-fns');
  expect(run(process.execPath, [BIN, 'create', 'function', 'shout'], dir).status).toBe(0);
  // npm test passes, and fails when the function no longer does what its test says.
  const tested = run('npm', ['test'], dir);
  expect([tested.status, output(tested)]).toEqual([0, expect.stringMatching(/^(?:# |ℹ )pass 1$/m)]);
  const helloFile = path.join(dir, 'src', 'functions', 'hello.ts');
  const source = fs.readFileSync(helloFile, 'utf8');
  fs.writeFileSync(helloFile, source.replace('Hello, ', 'Goodbye, '));
  const failed = run('npm', ['test'], dir);
  expect(failed.status).not.toBe(0);
  expect(output(failed)).toMatch(/^(?:not ok 1 - |✖ )hello greets by name/m);
  expect(output(failed)).toContain('Goodbye, Ada!');
  fs.writeFileSync(helloFile, source);
  const bundled = run('npm', ['run', 'bundle'], dir);
  expect(output(bundled)).toMatch(/Bundling src\/functions\/hello\.ts\.\.\. [\d.]+ KB\nBundling src\/functions\/shout\.ts\.\.\. [\d.]+ KB\n/);
  const deployed = run('npm', ['run', 'deploy'], dir);
  expect(output(deployed)).toMatch(/Deploying function hello 0\.1\.0 .*live\.\nDeploying function shout 0\.1\.0 .*live\./);
  const hello = await request('/api/function/hello', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"Ada"}' });
  expect(await hello.json()).toEqual({ success: true, result: { message: 'Hello, Ada!' } });
  expect((await request('/api/function/shout', { method: 'POST' })).status).toBe(401);
  const key = run(process.execPath, [BIN, 'keys', 'create', '--name', 'shouter', '--functions', 'shout', '--env'], dir, { BCMS_URL: service.base, BCMS_TOKEN: service.token });
  const env = Object.fromEntries([...key.stdout.matchAll(/^export (\w+)='([^']+)'$/gm)].map((m) => [m[1] as string, m[2] as string]));
  const called = run(process.execPath, [BIN, 'call', 'shout', '--data', '{"name":"Grace"}'], dir, { BCMS_URL: service.base, ...env });
  expect(called.stdout).toBe('{\n  "message": "Hello, Grace!"\n}\n');
}, 240_000);

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PLUGIN_NAME_PLACEHOLDER, replacePluginNamePlaceholder } from '../../lib/cli/bundle';

const ROOT = path.resolve(__dirname, '..', '..');
const BIN = path.join(ROOT, 'dist', 'cli', 'bin.js');
const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * A project folder whose node_modules links to this repository's packages (bcms-extensions itself,
 * typescript, vite, @types/node): what npm install gives a project, without the network.
 */
function linkedProject(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bundle-'));
  made.push(dir);
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  const modules = path.join(dir, 'node_modules');
  fs.mkdirSync(path.join(modules, '.bin'), { recursive: true });
  fs.mkdirSync(path.join(modules, '@types'));
  fs.symlinkSync(ROOT, path.join(modules, 'bcms-extensions'), 'dir');
  for (const name of ['typescript', 'vite', '@types/node']) fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(modules, name), 'dir');
  fs.symlinkSync(path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), path.join(modules, '.bin', 'tsc'));
  return dir;
}

const TSCONFIG = JSON.stringify({
  compilerOptions: { target: 'ES2022', module: 'esnext', moduleResolution: 'bundler', lib: ['ES2023'], types: ['node'], strict: true, noEmit: true, skipLibCheck: true, isolatedModules: true },
  include: ['backend'],
});

test('replacePluginNamePlaceholder: every occurrence, nothing else', () => {
  expect(PLUGIN_NAME_PLACEHOLDER).toBe('bcms-plugin---name');
  expect(replacePluginNamePlaceholder("'bcms-plugin---name' /plugin/bcms-plugin---name/x bcms-plugin--name", 'reading-list')).toBe("'reading-list' /plugin/reading-list/x bcms-plugin--name");
});

test("bcms-ext bundle replaces bcms-plugin---name with pluginName in the back end and the built UI, as BCMS's CLI does", () => {
  const dir = linkedProject({
    'package.json': JSON.stringify({ name: 'placeholder', version: '1.2.3', private: true }),
    'bcms-plugin.config.json': JSON.stringify({ pluginName: 'reading-list' }),
    'tsconfig.json': TSCONFIG,
    'backend/name.ts': "export const PLUGIN_NAME = 'bcms-plugin---name';\n",
    'backend/main.ts': `import { createBcmsPlugin, createController, createControllerMethod } from 'bcms-extensions';
import { PLUGIN_NAME } from './name';

export default createBcmsPlugin({
  name: 'bcms-plugin---name',
  controllers: [
    createController({
      name: 'Where',
      path: '/where',
      methods: () => ({
        url: createControllerMethod({ path: '/url', type: 'get', handler: async () => ({ url: \`/api/plugin/\${PLUGIN_NAME}/where/url\` }) }),
      }),
    }),
  ],
});
`,
    'ui/vite.config.mjs': "export default { base: './', logLevel: 'warn', build: { outDir: 'dist', emptyOutDir: true } };\n",
    'ui/index.html': '<!doctype html>\n<html><head><title>bcms-plugin---name</title><script type="module" src="./main.js"></script></head><body></body></html>\n',
    'ui/main.js':
      "document.body.dataset.api = '/api/plugin/bcms-plugin---name/where/url';\n" +
      // As BCMS's plugin UIs call their own back end (window.bcms.sdk.send prefixes /api).
      "window.bcms.sdk.send({ url: '/plugin/bcms-plugin---name/where/url', headers: { Authorization: '' } });\n",
  });
  const result = spawnSync(process.execPath, [BIN, 'bundle'], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 });
  expect(`${result.stdout}${result.stderr}`).toMatch(/Wrote bcms-bundle\/plugin-reading-list\.json/);
  expect(result.status).toBe(0);
  const bundle = JSON.parse(fs.readFileSync(path.join(dir, 'bcms-bundle', 'plugin-reading-list.json'), 'utf8')) as { manifest: { name: string }; code: string; ui: Record<string, string> };
  expect(bundle.manifest.name).toBe('reading-list');
  expect(bundle.code).not.toContain('bcms-plugin---name');
  expect(bundle.code).toContain('"reading-list"');
  const ui = Object.values(bundle.ui)
    .map((base64) => Buffer.from(base64, 'base64').toString('utf8'))
    .join('\n');
  expect(ui).not.toContain('bcms-plugin---name');
  expect(ui).toContain('<title>reading-list</title>');
  expect(ui).toContain('/api/plugin/reading-list/where/url');
  // The minifier writes it as url:`...`: the BCMS-relative URL that send prefixes with /api.
  expect(ui).toMatch(/url:\s*[`'"]\/plugin\/reading-list\/where\/url[`'"]/);
}, 120_000);

test('bcms-ext bundle outside a project says so, rather than asking for vite', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-bundle-none-'));
  made.push(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'an-app', private: true }));
  const result = spawnSync(process.execPath, [BIN, 'bundle'], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  expect(result.status).toBe(1);
  expect(result.stderr).toBe('bcms-ext bundle: neither bcms-plugin.config.json nor src/functions/*.ts (nor src/events/*.ts, src/jobs/*.ts) here: run it in a project made by bcms-ext create\n');
  expect(fs.existsSync(path.join(dir, 'bcms-bundle'))).toBe(false);
});

test("bcms-ext bundle finds a BCMS v3 functions project's functions/ folder", () => {
  const dir = linkedProject({
    'package.json': JSON.stringify({ name: 'fns', version: '0.1.0', private: true }),
    'tsconfig.json': TSCONFIG.replace('"backend"', '"functions"'),
    'functions/hi.ts':
      "import { createBcmsFunction } from 'bcms-extensions';\n\nexport default createBcmsFunction(async () => ({ config: { name: 'hi', public: true }, handler: async () => 'hi' }));\n",
  });
  const result = spawnSync(process.execPath, [BIN, 'bundle'], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 });
  expect(result.stdout).toMatch(/^Type-checking functions\/\.\.\. ok\nBundling functions\/hi\.ts\.\.\. [\d.]+ KB\nWrote bcms-bundle\/function-hi\.json/);
  expect(result.status).toBe(0);
}, 120_000);

test('a dynamic import() is bundled into the one file, never left as a chunk beside it (mongoose 6 imports its transports so)', () => {
  const dir = linkedProject({
    'package.json': JSON.stringify({ name: 'fns', version: '0.1.0', private: true }),
    'tsconfig.json': TSCONFIG.replace('"backend"', '"functions"'),
    'functions/lazy.ts':
      "import { createBcmsFunction } from 'bcms-extensions';\n\nexport default createBcmsFunction(async () => ({ config: { name: 'lazy', public: true }, handler: async () => (await import('./lib/shout')).shout('hi') }));\n",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the file's source, with a template literal of its own
    'functions/lib/shout.ts': 'export function shout(text: string): string {\n  return `${text.toUpperCase()}!`;\n}\n',
  });
  const result = spawnSync(process.execPath, [BIN, 'bundle'], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 });
  expect(result.status).toBe(0);
  const { code } = JSON.parse(fs.readFileSync(path.join(dir, 'bcms-bundle', 'function-lazy.json'), 'utf8')) as { code: string };
  expect(code).toContain('toUpperCase');
  expect(code).not.toMatch(/require\(["']\.\//);
}, 120_000);

test('a bundle that fails removes the bundles of the code before it: deploy has nothing stale to send', () => {
  const dir = linkedProject({
    'package.json': JSON.stringify({ name: 'fns', version: '0.1.0', private: true }),
    'tsconfig.json': TSCONFIG.replace('"backend"', '"functions"'),
    'functions/hi.ts':
      "import { createBcmsFunction } from 'bcms-extensions';\n\nexport default createBcmsFunction(async () => ({ config: { name: 'hi', public: true }, handler: async () => 'hi' }));\n",
  });
  const bundle = () => spawnSync(process.execPath, [BIN, 'bundle'], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 });
  expect(bundle().status).toBe(0);
  expect(fs.existsSync(path.join(dir, 'bcms-bundle', 'function-hi.json'))).toBe(true);
  fs.writeFileSync(path.join(dir, 'functions', 'hi.ts'), "const n: number = 'not a number';\nexport default n;\n");
  const failed = bundle();
  expect(failed.status).toBe(1);
  expect(failed.stderr).toContain('Removed bcms-bundle/: it held the bundles of the code before this change.\n');
  expect(fs.existsSync(path.join(dir, 'bcms-bundle'))).toBe(false);
}, 120_000);

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addCommand, main } from '../../lib/cli/main';
import { bcmsPluginSlug, portCommand } from '../../lib/bcms/port/port';
import { rewriteBcmsImports } from '../../lib/bcms/port/imports';
import { BCMS_V3_FIXTURES, copyBcmsV3Fixture, type BcmsV3Fixture } from './support/bcms-v3';

const ROOT = path.resolve(__dirname, '..', '..');
// As the CLI's entry point (lib/cli/bin.ts) adds it.
addCommand(portCommand);

/** The CLI run in-process, its output captured. */
async function bcmsExt(args: string[], cwd: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, { out: (text) => (out += text), err: (text) => (err += text), env: {}, cwd });
  return { code, out, err };
}

/** Every file under a folder, relative path → bytes. */
function snapshot(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  const walk = (folder: string): void => {
    for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
      const full = path.join(folder, entry.name);
      if (entry.isDirectory()) walk(full);
      else files.set(path.relative(dir, full).split(path.sep).join('/'), fs.readFileSync(full));
    }
  };
  walk(dir);
  return files;
}

const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-port-'));

/** The line as port must write it: its BCMS module name (in its own quotes) replaced, nothing else. */
/** A line as port rewrites it: BCMS's module names, and a namespace import the file calls (the fixtures' `ms`) made a default import. */
const ported = (line: string): string => line.replace(/(['"])@becomes\/(?:cms-backend|purple-cheetah)[^'"]*\1/, '$1bcms-extensions$1').replace(/^import \* as ms from 'ms';$/, "import ms from 'ms';");

describe("bcmsPluginSlug: pluginName as BCMS's CLI slugs it", () => {
  test.each([
    ['Reading List', 'reading-list'],
    ['Hello World', 'hello-world'],
    ['my_plugin', 'my-plugin'],
    ['Hello, World!', 'hello-world'],
    ['Two  Spaces', 'two-spaces'],
    ['already-a-slug', 'already-a-slug'],
    ['Ünïcode Plugin 2', 'ncode-plugin-2'],
  ])('%j → %j', (name, slug) => {
    expect(bcmsPluginSlug(name)).toBe(slug);
  });
});

describe('rewriteBcmsImports: only the module names of imports change', () => {
  test('import, import type, export from, require, import(), side-effect imports, both quotes, several lines', () => {
    const source = [
      "import { createController } from '@becomes/purple-cheetah';",
      'import type { ObjectSchema } from "@becomes/purple-cheetah/types";',
      'import {',
      '  JWTPermissionName,',
      "} from '@becomes/purple-cheetah-mod-jwt/types';",
      "export * from '@becomes/cms-backend/src/types';",
      "export { BCMSRepo } from '@becomes/cms-backend/src/repo';",
      "const { BCMSConfig } = require('@becomes/cms-backend/src/config');",
      "const lazy = () => import('@becomes/purple-cheetah-mod-fsdb');",
      "import '@becomes/cms-backend';",
      "import x = require('@becomes/purple-cheetah-mod-mongodb-mem-cache');",
    ].join('\n');
    const { text, replaced } = rewriteBcmsImports(source);
    expect(text).toBe(source.split('\n').map(ported).join('\n'));
    expect(replaced).toEqual([
      '@becomes/purple-cheetah',
      '@becomes/purple-cheetah/types',
      '@becomes/purple-cheetah-mod-jwt/types',
      '@becomes/cms-backend/src/types',
      '@becomes/cms-backend/src/repo',
      '@becomes/cms-backend/src/config',
      '@becomes/purple-cheetah-mod-fsdb',
      '@becomes/cms-backend',
      '@becomes/purple-cheetah-mod-mongodb-mem-cache',
    ]);
  });

  test('other modules, comments, strings and method calls stay as they are', () => {
    const source = [
      "import { createBcmsSdk } from '@becomes/cms-sdk';",
      "import { Types } from 'mongoose';",
      "// import { x } from '@becomes/cms-backend/src/util';",
      "/* from '@becomes/purple-cheetah' */",
      "const name = '@becomes/cms-backend';",
      "const template = `from '@becomes/cms-backend'`;",
      "const list = Array.from('@becomes/purple-cheetah');",
      "log('import', 'x'); const from = 1;",
    ].join('\n');
    expect(rewriteBcmsImports(source)).toEqual({ text: source, replaced: [] });
  });
});

describe('bcms-ext port on a copy of a BCMS v3 project', () => {
  /** Ports a fresh copy of a fixture; returns it with the files before and after. */
  async function portCopy(name: BcmsV3Fixture) {
    const dir = copyBcmsV3Fixture(name, tempDir());
    const before = snapshot(dir);
    const run = await bcmsExt(['port', dir], ROOT);
    return { dir, before, after: snapshot(dir), run };
  }

  /** Every .ts file: same lines, and those that differ are import lines with only the module name changed. */
  function expectOnlyImportLinesChanged(before: Map<string, Buffer>, after: Map<string, Buffer>): number {
    let changedLines = 0;
    for (const [file, bytes] of before) {
      if (!file.endsWith('.ts')) continue;
      const old = bytes.toString('utf8').split('\n');
      const now = (after.get(file) as Buffer).toString('utf8').split('\n');
      expect([file, now.length]).toEqual([file, old.length]);
      old.forEach((line, i) => {
        if (line === now[i]) return;
        changedLines++;
        expect([file, i + 1, now[i]]).toEqual([file, i + 1, ported(line)]);
        expect([file, i + 1, /^(import\b|export\b|\} from ')/.test(line)]).toEqual([file, i + 1, true]);
      });
      expect([file, now.join('\n').includes('@becomes/')]).toEqual([file, false]);
    }
    return changedLines;
  }

  test('a plugin: imports, the pluginName slug, package.json, a tsconfig; printed change by change; nothing else', async () => {
    const { dir, before, after, run } = await portCopy('reading-list');
    expect(run).toMatchObject({ code: 0, err: '' });
    expect(expectOnlyImportLinesChanged(before, after)).toBe(20);

    // Files port adds; files it leaves byte for byte.
    expect([...after.keys()].filter((file) => !before.has(file)).sort()).toEqual(['.env.example']);
    for (const [file, bytes] of before) {
      if (file.endsWith('.ts') || ['package.json', 'bcms-plugin.config.json', '.gitignore', 'backend/tsconfig.json'].includes(file)) continue;
      expect([file, (after.get(file) as Buffer).equals(bytes)]).toEqual([file, true]);
    }
    expect(after.get('bcms-plugin.config.json')?.toString()).toBe('{\n  "pluginName": "reading-list"\n}\n');
    expect(after.get('.gitignore')?.toString()).toBe('node_modules/\ndist/\nbcms-bundle/\n.env\nbcms-deploy-key.pem\n');
    // BCMS's back-end tsconfig, for TypeScript 7: what it refuses goes, the author's own options stay.
    expect(JSON.parse(after.get('backend/tsconfig.json')?.toString() as string)).toEqual({
      compilerOptions: {
        module: 'commonjs',
        declaration: true,
        removeComments: true,
        emitDecoratorMetadata: true,
        experimentalDecorators: true,
        strict: true,
        target: 'ES2020',
        outDir: '../dist/backend',
        rootDir: './',
        skipLibCheck: true,
        noUnusedLocals: true,
        noUnusedParameters: true,
      },
      include: ['./**/*'],
    });

    const oldPkg = JSON.parse(before.get('package.json')?.toString() as string) as Record<string, Record<string, string>>;
    const pkg = JSON.parse(after.get('package.json')?.toString() as string) as Record<string, Record<string, string>>;
    expect(pkg).toEqual({
      ...oldPkg,
      scripts: { ...oldPkg.scripts, dev: 'bcms-ext dev', bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy' },
      devDependencies: { '@types/node': '20.19.25', typescript: '7.0.2', 'bcms-extensions': `file:${path.relative(dir, ROOT)}`, vite: '8.3.8' },
    });
    expect(Object.keys(pkg)).toEqual(Object.keys(oldPkg)); // the keys keep their order

    expect(run.out).toBe(
      [
        `Ported ${dir} (a BCMS v3 plugin project) to bcms-extensions:`,
        '  backend/tsconfig.json: importsNotUsedAsValues removed (TypeScript 7 has no such option)',
        '  backend/tsconfig.json: baseUrl removed (TypeScript 7 has no such option; paths are relative to the tsconfig)',
        "  backend/tsconfig.json: paths @becomes/cms-backend/* removed (BCMS's own sources; those imports now name bcms-extensions)",
        "  backend/tsconfig.json: include: BCMS's own sources (node_modules/@becomes/...) removed",
        '  backend/book/controller.ts: 5 imports of @becomes/cms-backend/src/types, @becomes/cms-backend/src/util, @becomes/purple-cheetah, @becomes/purple-cheetah-mod-jwt/types, @becomes/purple-cheetah/types → bcms-extensions',
        '  backend/book/models/main.ts: 2 imports of @becomes/purple-cheetah-mod-fsdb/types, @becomes/purple-cheetah/types → bcms-extensions',
        '  backend/book/repo.ts: 6 imports of @becomes/cms-backend/src/config, @becomes/purple-cheetah-mod-fsdb/types, @becomes/purple-cheetah-mod-fsdb, @becomes/purple-cheetah-mod-mongodb-mem-cache/types, @becomes/purple-cheetah-mod-mongodb-mem-cache, @becomes/purple-cheetah-mod-mongodb → bcms-extensions',
        '  backend/main.ts: 1 import of @becomes/cms-backend/src/plugin → bcms-extensions',
        '  backend/shelf/controller.ts: 6 imports of @becomes/cms-backend/src/types, @becomes/cms-backend/src/util, @becomes/purple-cheetah, @becomes/purple-cheetah-mod-jwt, @becomes/purple-cheetah-mod-jwt/types, @becomes/purple-cheetah/types → bcms-extensions',
        '  package.json: removed @becomes/cms-backend, @becomes/cms-cli, @becomes/purple-cheetah, @becomes/purple-cheetah-mod-fsdb, @becomes/purple-cheetah-mod-jwt, @becomes/purple-cheetah-mod-mongodb, @becomes/purple-cheetah-mod-mongodb-mem-cache',
        `  package.json: added bcms-extensions (file:${path.relative(dir, ROOT)})`,
        '  package.json: typescript ^4.9.5 → 7.0.2 (bcms-ext bundle type-checks with moduleResolution "bundler", TypeScript 5 or newer)',
        '  package.json: added vite 8.3.8 (bcms-ext bundle runs it)',
        '  package.json: @types/node ^18.15.11 → 20.19.25 (vite 8.3.8 asks for @types/node 20.19 or newer, and npm install refuses an older one)',
        '  package.json: scripts.bundle: "bcms --plugin bundle" → "bcms-ext bundle"',
        '  package.json: scripts.deploy: "bcms --plugin deploy" → "bcms-ext deploy"',
        '  package.json: scripts.dev: "docker compose up" → "bcms-ext dev"',
        '  bcms-plugin.config.json: pluginName "Reading List" → "reading-list" (as BCMS\'s CLI slugs it: the plugin\'s URL name)',
        '  .env.example: created: where bcms-ext deploy sends bundles, and its key (copy it to .env)',
        '  .gitignore: added bcms-bundle/, .env, bcms-deploy-key.pem',
        'Next:',
        '  npm install',
        '  cp .env.example .env   # BCMS_URL; then a key that may deploy: BCMS_TOKEN=<a SUDO JWT> npx --no bcms-ext keys create --name deployer --deploy --env-file .env',
        '  npm run bundle',
        '  npm run deploy',
        '',
      ].join('\n'),
    );

    // A second run changes nothing, and says so.
    const again = await bcmsExt(['port'], dir);
    expect(again).toEqual({ code: 0, out: 'Nothing to change: . is a plugin project ported to bcms-extensions already.\n', err: '' });
    expect(snapshot(dir)).toEqual(after);
  });

  test('a functions project (functions/*.ts): imports, package.json, a tsconfig over functions/', async () => {
    const { dir, before, after, run } = await portCopy('blog-functions');
    expect(run).toMatchObject({ code: 0, err: '' });
    expect(expectOnlyImportLinesChanged(before, after)).toBe(8);
    expect([...after.keys()].filter((file) => !before.has(file)).sort()).toEqual(['.env.example', 'tsconfig.json']);
    expect(JSON.parse(after.get('tsconfig.json')?.toString() as string)).toMatchObject({ include: ['functions'] });
    const pkg = JSON.parse(after.get('package.json')?.toString() as string) as Record<string, Record<string, string>>;
    expect(pkg.scripts).toEqual({ bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy' });
    expect(pkg.devDependencies).toEqual({ '@types/ms': '^2.1.0', '@types/node': '20.19.25', typescript: '7.0.2', 'bcms-extensions': `file:${path.relative(dir, ROOT)}`, vite: '8.3.8' });
    expect(run.out).toContain(`Ported ${dir} (a BCMS v3 functions project) to bcms-extensions:\n`);
    expect(run.out).toContain('  functions/blog-titles.ts: 3 imports of @becomes/cms-backend/src/function, @becomes/cms-backend/src/repo, @becomes/purple-cheetah/types → bcms-extensions\n');
    expect(run.out).toContain('  package.json: scripts.bundle: "bcms --function bundle" → "bcms-ext bundle"\n');
    expect(await bcmsExt(['port', '.'], dir)).toEqual({ code: 0, out: 'Nothing to change: . is a functions project ported to bcms-extensions already.\n', err: '' });
    expect(snapshot(dir)).toEqual(after);
  });

  test("a functions project's dev script is left, with a note: bcms-ext dev serves plugins", async () => {
    const dir = copyBcmsV3Fixture('blog-functions', tempDir());
    const pkgFile = path.join(dir, 'package.json');
    const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { scripts: Record<string, string> };
    fs.writeFileSync(pkgFile, JSON.stringify({ ...pkg, scripts: { ...pkg.scripts, dev: 'docker compose up' } }, null, 2));
    const run = await bcmsExt(['port'], dir);
    expect(run.code).toBe(0);
    expect(run.out).toContain('Note: package.json: scripts.dev ("docker compose up") left as it is: bcms-ext dev serves plugin projects\n');
    expect((JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as typeof pkg).scripts.dev).toBe('docker compose up');
  });

  test("a plugin's ui/ (plugin-starter's layout): cms-ui imports, its aliases and copied folder, package.json, tsconfig, vite.config.mjs; a warning for what the kit lacks", async () => {
    const dir = copyBcmsV3Fixture('reading-list', tempDir());
    const write = (file: string, text: string): void => {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    };
    write(
      'ui/package.json',
      `${JSON.stringify({ name: 'ui', scripts: { build: 'vue-tsc && vite build' }, dependencies: { vue: '^3.2.47' }, devDependencies: { '@becomes/cms-sdk': '^3.4.1', '@becomes/cms-ui': '^3.3.0', '@vitejs/plugin-vue': '^4.1.0', '@vitejs/plugin-vue-jsx': '^3.0.1', typescript: '^4.9.3', vite: '^4.2.0', 'vite-tsconfig-paths': '^4.0.7', 'vue-tsc': '^1.2.0' } }, null, 2)}\n`,
    );
    write(
      'ui/tsconfig.json',
      `${JSON.stringify({ compilerOptions: { module: 'ESNext', moduleResolution: 'Node', jsx: 'preserve', importsNotUsedAsValues: 'error', paths: { '@ui/*': ['./src/*'], '@bcms-ui/*': ['./src/bcms-ui/*'] } }, include: ['src/**/*.tsx'] }, null, 2)}\n`,
    );
    write('ui/tailwind.config.cjs', "const bcmsTWConfig = require('@becomes/cms-ui/tailwind.config.cjs');\nmodule.exports = bcmsTWConfig;\n");
    write(
      'ui/src/main.ts',
      "import { createApp } from 'vue';\nimport { cy } from '@bcms-ui/directives';\nimport '@becomes/cms-ui/styles/_main.scss';\nimport type { BCMSGlobalScopeMain } from '@bcms-ui/types';\n",
    );
    write(
      'ui/src/app.tsx',
      "import { BCMSPluginLayout } from './bcms-ui/components';\nimport { BCMSMediaInput } from '@becomes/cms-ui/components';\nimport type { BCMSTemplate } from '@becomes/cms-sdk/types';\n",
    );
    const run = await bcmsExt(['port'], dir);
    expect(run.code).toBe(0);
    const read = (file: string): string => fs.readFileSync(path.join(dir, file), 'utf8');
    expect(read('ui/src/main.ts')).toBe(
      "import { createApp } from 'vue';\nimport { cy } from 'bcms-extensions/ui';\nimport 'bcms-extensions/ui/styles.css';\nimport type { BCMSGlobalScopeMain } from 'bcms-extensions/ui';\n",
    );
    // @becomes/cms-sdk stays: it installs, and its enums (BCMSPropType) are bundled into the UI.
    expect(read('ui/src/app.tsx')).toBe(
      "import { BCMSPluginLayout } from 'bcms-extensions/ui';\nimport { BCMSMediaInput } from 'bcms-extensions/ui';\nimport type { BCMSTemplate } from '@becomes/cms-sdk/types';\n",
    );
    expect(read('ui/tailwind.config.cjs')).toContain("require('bcms-extensions/ui/tailwind.config.cjs')");
    expect(run.out).toContain('  ui/src/main.ts: 3 imports of @bcms-ui/directives, @bcms-ui/types → bcms-extensions/ui; @becomes/cms-ui/styles/_main.scss → bcms-extensions/ui/styles.css\n');
    expect(run.err).toBe('Warning: ui/src/app.tsx: bcms-extensions/ui does not export BCMSMediaInput; this file will not type-check or bundle until it no longer needs it\n');

    const pkg = JSON.parse(read('ui/package.json')) as Record<string, Record<string, string>>;
    expect(pkg.scripts).toEqual({ build: 'vite build' });
    expect(pkg.devDependencies).toEqual({
      '@becomes/cms-sdk': '^3.4.1',
      '@vitejs/plugin-vue': '6.0.11',
      '@vitejs/plugin-vue-jsx': '5.1.6',
      typescript: '7.0.2',
      vite: '8.3.8',
      'vite-tsconfig-paths': '6.1.1',
      'bcms-extensions': `file:${path.relative(path.join(dir, 'ui'), ROOT)}`,
    });
    expect(JSON.parse(read('ui/tsconfig.json'))).toEqual({
      compilerOptions: { module: 'ESNext', moduleResolution: 'bundler', jsx: 'preserve', jsxImportSource: 'vue', skipLibCheck: true, paths: { '@ui/*': ['./src/*'] } },
      include: ['src/**/*.tsx'],
    });
    const config = read('ui/vite.config.mjs');
    expect(config).toContain('plugins: [vue(), vueJsx()],');
    expect(config).toContain("base: './',");
    expect(config).toContain("resolve: { tsconfigPaths: true, dedupe: ['vue', 'vue-router'] },");
    // Run again: nothing left to change.
    expect((await bcmsExt(['port'], dir)).out).toBe('Nothing to change: . is a plugin project ported to bcms-extensions already.\n');
  });

  test("a Vue CLI UI at the root (bngine's layout): ui/ builds it with Vite where it is; the Vue CLI leaves package.json", async () => {
    const { dir, before, after, run } = await portCopy('job-runner');
    expect(run).toMatchObject({ code: 0, err: '' });
    const read = (file: string): string => after.get(file)?.toString() as string;
    expect([...after.keys()].filter((file) => !before.has(file)).sort()).toEqual(['.env.example', '.gitignore', 'ui/index.html', 'ui/vite.config.mjs']);
    expect([...before.keys()].filter((file) => !after.has(file)).sort()).toEqual(['babel.config.js', 'bcms.config.js', 'postcss.config.js', 'vue.config.js']);
    // The page: its template tags and BCMS's own stylesheet out, the root's src/main.ts in.
    expect(read('ui/index.html')).toContain('<script type="module" src="../src/main.ts"></script>\n  </body>');
    expect(read('ui/index.html')).not.toMatch(/<%|\/assets\/css|auto injected/);
    expect(run.out).toContain("Note: ui/index.html: left out /assets/css/codemirror.css, BCMS's own stylesheets, which this service does not serve\n");
    expect(read('ui/vite.config.mjs')).toContain("createRequire(import.meta.url)('../tailwind.config.js')");
    // Stylesheets and the Tailwind config name the kit; a UI's @becomes/cms-sdk stays, for its types and enums.
    expect(read('src/ui/assets/styles/_main.scss')).toContain("@import 'bcms-extensions/ui/styles';");
    expect(read('tailwind.config.js')).toContain("require('bcms-extensions/ui/tailwind.config.cjs')");
    expect(read('src/ui/views/jobs.tsx')).toContain("from '@becomes/cms-sdk/types'");
    const pkg = JSON.parse(read('package.json')) as Record<string, Record<string, string>>;
    expect(Object.keys(pkg.devDependencies ?? {}).sort()).toEqual([
      '@becomes/cms-sdk',
      '@types/node',
      '@vitejs/plugin-vue',
      '@vitejs/plugin-vue-jsx',
      'autoprefixer',
      'bcms-extensions',
      'postcss',
      'sass',
      'tailwindcss',
      'typescript',
      'vite',
      'vue',
      'vue-router',
      'vuex',
    ]);
    expect(pkg.devDependencies).toMatchObject({ tailwindcss: '3.4.9', postcss: '8.5.33', sass: '1.108.2' });
    expect(pkg.scripts).toEqual({ 'build:backend': 'tsc --project tsconfig.backend.json', bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy', 'build:ui': 'vite build --config ui/vite.config.mjs' });
    expect(JSON.parse(read('tsconfig.json')).compilerOptions.types).toEqual([]);
    expect(fs.existsSync(path.join(dir, 'ui', 'package.json'))).toBe(false);
  });

  test('a Vue CLI UI ported once changes nothing on a second run; without Tailwind, Vite runs none; a src/main.js entry works too', async () => {
    const { dir } = await portCopy('job-runner');
    const ported = snapshot(dir);
    const again = await bcmsExt(['port'], dir);
    expect(again).toEqual({ code: 0, out: 'Nothing to change: . is a plugin project ported to bcms-extensions already.\n', err: '' });
    expect(snapshot(dir)).toEqual(ported);

    const plain = copyBcmsV3Fixture('job-runner', tempDir());
    fs.rmSync(path.join(plain, 'tailwind.config.js'));
    fs.writeFileSync(path.join(plain, 'postcss.config.js'), "module.exports = { plugins: { 'postcss-nested': {}, autoprefixer: {} } };\n");
    fs.renameSync(path.join(plain, 'src', 'main.ts'), path.join(plain, 'src', 'main.js'));
    const run = await bcmsExt(['port'], plain);
    expect(run.code).toBe(0);
    const config = fs.readFileSync(path.join(plain, 'ui', 'vite.config.mjs'), 'utf8');
    expect(config).not.toMatch(/tailwind/i);
    expect(fs.readFileSync(path.join(plain, 'ui', 'index.html'), 'utf8')).toContain('<script type="module" src="../src/main.js"></script>');
    expect(run.out).toContain("  postcss.config.js: removed: the Vue CLI's (ui/vite.config.mjs takes its place)\n");
    expect(run.out).toContain('Note: postcss.config.js: its other plugins (postcss-nested) no longer run: add them to css.postcss.plugins in ui/vite.config.mjs\n');
    expect(JSON.parse(fs.readFileSync(path.join(plain, 'package.json'), 'utf8')).devDependencies).not.toHaveProperty('autoprefixer');
  });

  test("a vue.config.js without the Vue CLI's page and entry is named in a note, and left", async () => {
    const dir = copyBcmsV3Fixture('job-runner', tempDir());
    fs.rmSync(path.join(dir, 'public', 'index.html'));
    const run = await bcmsExt(['port'], dir);
    expect(run.code).toBe(0);
    expect(run.out).toContain(
      "Note: vue.config.js: a Vue CLI UI without public/index.html and src/main.ts (or .js) is not ported; bcms-ext bundle builds a plugin's UI with Vite from ui/ (index.html and vite.config.mjs there)\n",
    );
    expect(fs.existsSync(path.join(dir, 'vue.config.js'))).toBe(true);
    expect(fs.existsSync(path.join(dir, 'ui'))).toBe(false);
  });

  test('--dry-run prints the changes and writes nothing', async () => {
    const dir = copyBcmsV3Fixture('reading-list', tempDir());
    const before = snapshot(dir);
    const run = await bcmsExt(['port', '--dry-run'], dir);
    expect(run.code).toBe(0);
    expect(run.out).toMatch(/^Would port \. \(a BCMS v3 plugin project\) to bcms-extensions:\n {2}backend\/tsconfig\.json: importsNotUsedAsValues removed/);
    expect(run.out).not.toContain('Next:');
    expect(snapshot(dir)).toEqual(before);
  });

  test('the fixtures themselves are left as BCMS wrote them', () => {
    const sources = [...snapshot(BCMS_V3_FIXTURES).entries()].filter(([file]) => file.endsWith('.ts'));
    expect(sources.length).toBeGreaterThan(10);
    for (const [file, bytes] of sources) {
      expect([file, bytes.toString().includes("from 'bcms-extensions'")]).toEqual([file, false]);
      expect([file, bytes.toString().startsWith("// Written in BCMS v3's idiom")]).toEqual([file, true]);
    }
  });
});

describe('bcms-ext port refuses a folder that is not a BCMS v3 project, and writes nothing', () => {
  test.each([
    ['an empty folder', {}, /is not a BCMS v3 plugin or functions project: it has no package\.json\. Run bcms-ext port in the project's folder, or give it: bcms-ext port DIR/],
    [
      'a package with neither plugin config nor functions',
      { 'package.json': '{"name":"x"}', 'index.ts': "import '@becomes/cms-backend';" },
      /neither bcms-plugin\.config\.json \(a plugin\) nor functions, events or jobs \(src\/functions\/\*\.ts, src\/events\/\*\.ts, src\/jobs\/\*\.ts/,
    ],
    ['functions that use nothing of BCMS', { 'package.json': '{"name":"x"}', 'functions/a.ts': 'export default 1;' }, /neither its package\.json nor its code uses @becomes\/\* packages/],
    [
      'a plugin config without backend/main.ts',
      { 'package.json': '{"name":"x"}', 'bcms-plugin.config.json': '{"pluginName":"X"}' },
      /has bcms-plugin\.config\.json but neither backend\/main\.ts nor src\/backend\/main\.ts/,
    ],
    [
      'a pluginName whose slug a URL cannot carry',
      { 'package.json': '{"devDependencies":{"@becomes/cms-backend":"3.1.8"}}', 'bcms-plugin.config.json': '{"pluginName":" Spaced"}', 'backend/main.ts': '' },
      /pluginName " Spaced" in bcms-plugin\.config\.json slugs to "-spaced", not a name a URL can carry/,
    ],
    ['a package.json that is not JSON', { 'package.json': '{', 'functions/a.ts': "import '@becomes/cms-backend';" }, /package\.json is not JSON/],
  ])('%s', async (_what, files: Record<string, string>, message) => {
    const dir = tempDir();
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    }
    const before = snapshot(dir);
    const run = await bcmsExt(['port', dir], ROOT);
    expect(run.code).toBe(1);
    expect(run.out).toBe('');
    expect(run.err).toMatch(/^bcms-ext port: /);
    expect(run.err).toMatch(message);
    expect(snapshot(dir)).toEqual(before);
  });

  test('a folder that does not exist, and two folders', async () => {
    expect((await bcmsExt(['port', '/no/such/folder'], ROOT)).err).toBe("bcms-ext port: /no/such/folder is not a folder: give the project's folder (bcms-ext port DIR)\n");
    expect((await bcmsExt(['port', 'a', 'b'], ROOT)).err).toBe('bcms-ext port: expected port [DIR] [--dry-run], got 2 folders\n');
  });

  test('bcms-ext help lists port', async () => {
    expect((await bcmsExt(['help'], ROOT)).out).toMatch(/\n {2}port \[DIR\] \[--dry-run\] +Rewrite a BCMS v3 plugin or functions project/);
  });
});

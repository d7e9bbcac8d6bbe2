/**
 * `bcms-ext port`'s part for a Vue CLI UI at the project's root (bcms/plugin-bngine's layout:
 * `vue.config.js`, `public/index.html`, `src/main.ts`, webpack, PostCSS 7). `bcms-ext bundle` builds
 * a plugin's UI with Vite from `ui/`, so `ui/` gets an `index.html` and a `vite.config.mjs` that
 * build the root's sources where they are: no file moves, and the UI keeps importing the back
 * end's types by the paths it has. The root's package.json trades the Vue CLI for Vite.
 */
import fs from 'node:fs';
import path from 'node:path';
import { VERSIONS } from '../../cli/create';

type Deps = Record<string, string>;
type Package = Record<string, unknown> & { dependencies?: Deps; devDependencies?: Deps; scripts?: Record<string, string> };

const SECTIONS = ['dependencies', 'devDependencies'] as const;

/** The Vue CLI and what only its webpack build used; Vite and its plugins do their work. */
const VUE_CLI_ONLY = /^(?:@vue\/cli-.*|@vue\/compiler-sfc|@vue\/eslint-config-.*|eslint-plugin-vue|sass-loader|@babel\/.*|babel-.*|vue-loader|webpack|postcss-loader)$/;

/** Tailwind 2 plugins of cms-ui's Tailwind config that BCMS projects list beside it. */
const TAILWIND_2_PLUGINS = ['tailwindcss-nested-groups'];

/** Versions that build under the Vite `bundle` uses (Tailwind 3 and PostCSS 8 in place of the postcss7-compat build). */
const UI_TOOLS: Record<string, string> = {
  '@vitejs/plugin-vue': '6.0.11',
  '@vitejs/plugin-vue-jsx': VERSIONS['@vitejs/plugin-vue-jsx'],
  tailwindcss: '3.4.9',
  postcss: '8.5.33',
  autoprefixer: '10.7.0',
  sass: '1.108.2',
};

/** Whether `root` has a Vue CLI UI that `ui/` does not build yet. */
export function hasVueCliUi(root: string): boolean {
  return (
    fs.existsSync(path.join(root, 'vue.config.js')) &&
    fs.existsSync(path.join(root, 'public', 'index.html')) &&
    fs.existsSync(path.join(root, 'src', 'main.ts')) &&
    !fs.existsSync(path.join(root, 'ui', 'index.html'))
  );
}

/**
 * Ports the Vue CLI UI at `root`: writes `ui/index.html` and `ui/vite.config.mjs`, removes the
 * Vue CLI's own configs, and changes `pkg` (the root's package.json, written by the caller):
 * `pkgChanges` says how. Changes to other files go to `changes`, and what a user should know to `notes`.
 */
export function portVueCliUi(
  root: string,
  pkg: Package,
  files: { writes: Map<string, string>; removes: Set<string>; changes: { file: string; what: string }[]; notes: string[] },
  pkgChanges: string[],
): void {
  const { writes, removes, changes, notes } = files;

  const page = fs.readFileSync(path.join(root, 'public', 'index.html'), 'utf8');
  const { html, dropped } = viteIndexHtml(page);
  writes.set(path.join(root, 'ui', 'index.html'), html);
  changes.push({ file: 'ui/index.html', what: 'created from public/index.html: its page, loading ../src/main.ts as a module (Vite builds the UI from ui/)' });
  if (dropped.length > 0) notes.push(`ui/index.html: left out ${dropped.join(', ')}, BCMS's own stylesheets, which this service does not serve`);

  const tailwind = ['tailwind.config.js', 'tailwind.config.cjs'].find((name) => fs.existsSync(path.join(root, name)));
  writes.set(path.join(root, 'ui', 'vite.config.mjs'), viteConfig(tailwind));
  changes.push({
    file: 'ui/vite.config.mjs',
    what: `created: the root's src/ built by Vite (vue, vue-jsx, @ → src/, public/${tailwind === undefined ? '' : `, ${tailwind} with its content paths from the project's root`}), with relative URLs`,
  });

  for (const name of ['vue.config.js', 'babel.config.js', 'postcss.config.js']) {
    if (!fs.existsSync(path.join(root, name))) continue;
    removes.add(path.join(root, name));
    changes.push({ file: name, what: `removed: the Vue CLI's (ui/vite.config.mjs ${name === 'postcss.config.js' ? 'runs Tailwind and Autoprefixer itself' : 'takes its place'})` });
  }

  // package.json: the Vue CLI out, Vite's plugins and the PostCSS 8 tools in.
  const declared = (name: string): string | undefined => SECTIONS.map((section) => pkg[section]?.[name]).find((range) => range !== undefined);
  const removed: string[] = [];
  for (const section of SECTIONS) {
    for (const name of Object.keys(pkg[section] ?? {})) {
      if (!VUE_CLI_ONLY.test(name)) continue;
      delete (pkg[section] as Deps)[name];
      removed.push(name);
    }
  }
  if (removed.length > 0) pkgChanges.push(`removed ${removed.join(', ')} (the Vue CLI's webpack build; bcms-ext bundle builds the UI with Vite)`);
  // A Tailwind 2 plugin that @becomes/cms-ui's Tailwind config loaded: npm refuses it beside Tailwind 3.
  const twConfigText = tailwind === undefined ? '' : fs.readFileSync(path.join(root, tailwind), 'utf8');
  for (const plugin of TAILWIND_2_PLUGINS) {
    if (declared(plugin) === undefined || twConfigText.includes(plugin)) continue;
    for (const section of SECTIONS) delete pkg[section]?.[plugin];
    pkgChanges.push(`removed ${plugin} (a Tailwind 2 plugin that @becomes/cms-ui's Tailwind config loaded; npm refuses it beside Tailwind 3, and nothing here loads it)`);
  }
  for (const [name, version] of Object.entries(UI_TOOLS)) {
    const range = declared(name);
    if (range === version) continue;
    if ((name === 'tailwindcss' || name === 'autoprefixer') && tailwind === undefined && range === undefined) continue;
    const section = SECTIONS.find((each) => pkg[each]?.[name] !== undefined) ?? 'devDependencies';
    pkg[section] = { ...pkg[section], [name]: version };
    pkgChanges.push(range === undefined ? `added ${name} ${version} (the UI's Vite build)` : `${name} ${range} → ${version} (builds under Vite ${VERSIONS.vite})`);
  }
  const scripts = (pkg.scripts ??= {});
  for (const [script, command] of Object.entries(scripts)) {
    if (!/\bvue-cli-service\b/.test(command)) continue;
    delete scripts[script];
    pkgChanges.push(`scripts.${script} ("${command}") removed: the Vue CLI is not installed any more`);
  }
  if (scripts['build:ui'] === undefined) {
    scripts['build:ui'] = 'vite build --config ui/vite.config.mjs';
    pkgChanges.push('scripts.build:ui: "vite build --config ui/vite.config.mjs" (bcms-ext bundle builds it too)');
  }

  // The UI's tsconfig: the types of webpack's `require.context` and `module.hot` are gone with it.
  for (const [file, text] of tsconfigTexts(root, writes)) {
    const dropped = text.replace(/"webpack-env"\s*,?\s*/g, '');
    if (dropped === text) continue;
    writes.set(file, dropped.replace(/,(\s*\])/g, '$1'));
    changes.push({ file: path.relative(root, file), what: 'types: removed "webpack-env" (the Vue CLI\'s, gone with it)' });
  }
}

/** Vue CLI's page made Vite's: its template tags out, the entry in, BCMS's own stylesheets out. */
function viteIndexHtml(page: string): { html: string; dropped: string[] } {
  const dropped: string[] = [];
  let html = page.replace(/[ \t]*<link\b[^>]*href="(\/assets\/css\/[^"]+)"[^>]*>[ \t]*\r?\n?/g, (_tag, href: string) => {
    dropped.push(href);
    return '';
  });
  html = html.replace(/<%=\s*BASE_URL\s*%>/g, '').replace(/<%=[^%]*%>/g, '');
  html = html.replace(/[ \t]*<!--\s*built files will be auto injected\s*-->[ \t]*\r?\n?/, '');
  html = html.replace(/<\/body>/i, '  <script type="module" src="../src/main.ts"></script>\n  </body>');
  return { html, dropped };
}

function viteConfig(tailwind: string | undefined): string {
  const css =
    tailwind === undefined
      ? ''
      : `
// Tailwind with the project's config, its content paths read from the project's root (where the
// Vue CLI ran it), whichever folder the build runs in.
const tailwindConfig = createRequire(import.meta.url)('../${tailwind}');
const content = (tailwindConfig.purge && tailwindConfig.purge.content) || tailwindConfig.content || [];
const { purge, ...rest } = tailwindConfig;
const tailwind = tailwindcss({ ...rest, content: content.map((glob) => path.resolve(project, glob)) });
// bcms-extensions/ui's stylesheet brings Tailwind's directives, as cms-ui's did, and so does the UI's
// own: Tailwind expands the last of each, and the repeats left over go.
const repeatedDirectives = { postcssPlugin: 'repeated-tailwind-directives', OnceExit: (root) => root.walkAtRules('tailwind', (rule) => rule.remove()) };
`;
  return `// The plugin's UI as bcms-ext bundle builds it (written by bcms-ext port from a Vue CLI project):
// the root's src/main.ts and public/, into ui/dist with relative URLs, since the service serves it
// under /plugin/<name>/.
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import vue from '@vitejs/plugin-vue';
import vueJsx from '@vitejs/plugin-vue-jsx';
${tailwind === undefined ? '' : "import autoprefixer from 'autoprefixer';\nimport tailwindcss from 'tailwindcss';\n"}import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));
const project = path.resolve(here, '..');
${css}
export default defineConfig({
  root: here,
  base: './',
  publicDir: path.join(project, 'public'),
  plugins: [vue(), vueJsx()],
  // The Vue CLI's @ is src/; bcms-extensions/ui and the UI share one copy of vue (and of its router and store).
  resolve: { alias: { '@': path.join(project, 'src') }, dedupe: ['vue', 'vue-router', 'vuex'] },
  css: {
    // Sass's @import works still; its deprecation notice would fill every build's output.
    preprocessorOptions: { scss: { silenceDeprecations: ['import', 'global-builtin'] }, sass: { silenceDeprecations: ['import', 'global-builtin'] } },${tailwind === undefined ? '' : '\n    postcss: { plugins: [tailwind, repeatedDirectives, autoprefixer()] },'}
  },
  build: { outDir: 'dist', emptyOutDir: true },
  logLevel: 'warn',
});
`;
}

/** The root's tsconfig files as they will be written (port may have rewritten them already). */
function tsconfigTexts(root: string, writes: Map<string, string>): [string, string][] {
  return fs
    .readdirSync(root)
    .filter((name) => /^tsconfig(\.[\w-]+)?\.json$/.test(name))
    .map((name) => path.join(root, name))
    .map((file) => [file, writes.get(file) ?? fs.readFileSync(file, 'utf8')]);
}

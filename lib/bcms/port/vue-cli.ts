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
import { parseJsonc } from './tsconfig';

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

/** The entry of a Vue CLI UI at `root` that `ui/` does not build yet (`src/main.ts` or `.js`); else why not, or undefined without a vue.config.js. */
export function vueCliUi(root: string): { entry: string } | { unported: string } | undefined {
  if (!fs.existsSync(path.join(root, 'vue.config.js'))) return undefined;
  if (fs.existsSync(path.join(root, 'ui', 'index.html'))) return undefined; // ported already, or a ui/ of its own
  const entry = ['src/main.ts', 'src/main.js'].find((file) => fs.existsSync(path.join(root, file)));
  if (entry === undefined || !fs.existsSync(path.join(root, 'public', 'index.html'))) {
    return {
      unported:
        "vue.config.js: a Vue CLI UI without public/index.html and src/main.ts (or .js) is not ported; bcms-ext bundle builds a plugin's UI with Vite from ui/ (index.html and vite.config.mjs there)",
    };
  }
  return { entry };
}

/**
 * Ports the Vue CLI UI at `root`: writes `ui/index.html` and `ui/vite.config.mjs`, removes the
 * Vue CLI's own configs, and changes `pkg` (the root's package.json, written by the caller):
 * `pkgChanges` says how. Changes to other files go to `changes`, and what a user should know to `notes`.
 */
export function portVueCliUi(
  root: string,
  entry: string,
  pkg: Package,
  files: { writes: Map<string, string>; removes: Set<string>; changes: { file: string; what: string }[]; notes: string[] },
  pkgChanges: string[],
): void {
  const { writes, removes, changes, notes } = files;

  const page = fs.readFileSync(path.join(root, 'public', 'index.html'), 'utf8');
  const { html, dropped } = viteIndexHtml(page, `../${entry}`);
  writes.set(path.join(root, 'ui', 'index.html'), html);
  changes.push({ file: 'ui/index.html', what: 'created from public/index.html: its page, loading ../src/main.ts as a module (Vite builds the UI from ui/)' });
  if (dropped.length > 0) notes.push(`ui/index.html: left out ${dropped.join(', ')}, BCMS's own stylesheets, which this service does not serve`);

  const tailwind = ['tailwind.config.js', 'tailwind.config.cjs'].find((name) => fs.existsSync(path.join(root, name)));
  const configFile = path.join(root, 'ui', 'vite.config.mjs');
  if (fs.existsSync(configFile)) {
    notes.push("ui/vite.config.mjs: left as it is; bcms-ext bundle builds the UI with it (port would have written one that builds the root's src/ with Vue, Vue JSX and Tailwind)");
  } else {
    writes.set(configFile, viteConfig(tailwind));
    changes.push({
      file: 'ui/vite.config.mjs',
      what: `created: the root's src/ built by Vite (vue, vue-jsx, @ → src/, public/${tailwind === undefined ? '' : `, ${tailwind} with its content paths from the project's root`}), with relative URLs`,
    });
  }

  for (const name of ['vue.config.js', 'babel.config.js']) {
    if (!fs.existsSync(path.join(root, name))) continue;
    removes.add(path.join(root, name));
    changes.push({ file: name, what: "removed: the Vue CLI's (ui/vite.config.mjs takes its place)" });
  }
  const postcssFile = path.join(root, 'postcss.config.js');
  if (fs.existsSync(postcssFile)) {
    // Vite would read it from the root (its PostCSS 7 plugins, Tailwind with paths from ui/): ui/vite.config.mjs says what runs.
    removes.add(postcssFile);
    const others = postcssPlugins(fs.readFileSync(postcssFile, 'utf8')).filter((name) => name !== 'tailwindcss' && name !== 'autoprefixer');
    changes.push({
      file: 'postcss.config.js',
      what: `removed: the Vue CLI's (${tailwind === undefined ? 'ui/vite.config.mjs takes its place' : 'ui/vite.config.mjs runs Tailwind and Autoprefixer itself'})`,
    });
    if (others.length > 0) notes.push(`postcss.config.js: its other plugins (${others.join(', ')}) no longer run: add them to css.postcss.plugins in ui/vite.config.mjs`);
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
    if (range !== undefined && !olderThan(range, version)) continue;
    if ((name === 'tailwindcss' || name === 'autoprefixer') && tailwind === undefined && range === undefined) continue;
    const section = SECTIONS.find((each) => pkg[each]?.[name] !== undefined) ?? 'devDependencies';
    pkg[section] = { ...pkg[section], [name]: version };
    pkgChanges.push(range === undefined ? `added ${name} ${version} (the UI's Vite build)` : `${name} ${range} → ${version} (builds under Vite ${VERSIONS.vite})`);
  }
  pkg.scripts ??= {};
  const scripts = pkg.scripts;
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
    let config: { compilerOptions?: { types?: unknown } };
    try {
      config = parseJsonc(text) as typeof config;
    } catch {
      continue; // port said so when it read it
    }
    const types = config.compilerOptions?.types;
    if (!Array.isArray(types) || !types.includes('webpack-env')) continue;
    (config.compilerOptions as { types: unknown[] }).types = types.filter((type) => type !== 'webpack-env');
    writes.set(file, `${JSON.stringify(config, null, 2)}\n`);
    changes.push({ file: path.relative(root, file), what: 'types: removed "webpack-env" (the Vue CLI\'s, gone with it)' });
  }
}

/** Whether the lowest version a range allows is older than `version` (an npm: alias of another package counts as older). */
function olderThan(range: string, version: string): boolean {
  if (range.startsWith('npm:')) return true;
  const found = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(range);
  if (found === null) return false; // a tag, a URL, a path: the author's choice
  const have = [Number(found[1]), Number(found[2]), Number(found[3] ?? 0)];
  const want = version.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (have[i] !== want[i]) return (have[i] as number) < (want[i] as number);
  return false;
}

/** The plugins a postcss.config.js names: its object's keys, and what it requires. */
function postcssPlugins(text: string): string[] {
  const names = new Set<string>();
  for (const match of text.matchAll(/require\(\s*['"]([^'"]+)['"]\s*\)/g)) names.add(match[1] as string);
  const plugins = /plugins\s*:\s*\{([\s\S]*)\}/.exec(text)?.[1] ?? '';
  for (const match of plugins.matchAll(/['"]?([@\w/.-]+)['"]?\s*:/g)) names.add(match[1] as string);
  return [...names];
}

/** Vue CLI's page made Vite's: its template tags out, the entry in, BCMS's own stylesheets out. */
function viteIndexHtml(page: string, entry: string): { html: string; dropped: string[] } {
  const dropped: string[] = [];
  let html = page.replace(/[ \t]*<link\b[^>]*href="(\/assets\/css\/[^"]+)"[^>]*>[ \t]*\r?\n?/g, (_tag, href: string) => {
    dropped.push(href);
    return '';
  });
  html = html.replace(/<%=\s*BASE_URL\s*%>/g, '').replace(/<%[\s\S]*?%>/g, '');
  // An emptied title: bundle makes the placeholder the plugin's name.
  html = html.replace(/<title>\s*<\/title>/i, '<title>bcms-plugin---name</title>');
  html = html.replace(/[ \t]*<!--\s*built files will be auto injected\s*-->[ \t]*\r?\n?/, '');
  const script = `<script type="module" src="${entry}"></script>`;
  html = /<\/body>/i.test(html) ? html.replace(/<\/body>/i, `  ${script}\n  </body>`) : `${html.replace(/\s*$/, '')}\n${script}\n`;
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
const { purge, content, safelist, ...rest } = tailwindConfig;
// Tailwind 2's purge (an array, or { content, options: { safelist } }) as the Vue CLI ran it, else Tailwind 3's content.
const source = purge ?? content ?? [];
const globs = Array.isArray(source) ? source : source.content ?? source.files ?? [];
const fromRoot = (glob) => (typeof glob !== 'string' ? glob : glob.startsWith('!') ? \`!\${path.resolve(project, glob.slice(1))}\` : path.resolve(project, glob));
const kept = safelist ?? (purge && !Array.isArray(purge) ? purge.safelist ?? purge.options?.safelist : undefined);
const tailwind = tailwindcss({ ...rest, content: globs.map(fromRoot), ...(kept === undefined ? {} : { safelist: kept }) });
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

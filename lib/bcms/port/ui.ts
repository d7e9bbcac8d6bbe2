/**
 * `bcms-ext port`'s part for a plugin's `ui/` (BCMS's plugin-starter layout: a Vite app with its own
 * package.json): its dependencies for `bcms-extensions/ui` in place of `@becomes/cms-ui`, which the
 * registry no longer has, the tools `bcms-ext bundle` builds it with, and the `ui/vite.config.mjs`
 * it builds with.
 */
import fs from 'node:fs';
import path from 'node:path';
import { VERSIONS } from '../../cli/create';
import { packageSpec } from '../../cli/layout';
import { PACKAGE } from './imports';

/**
 * Vite plugins a BCMS UI lists, the versions that run under the Vite `bundle` uses, and how
 * vite.config.mjs calls them (none for vite-tsconfig-paths: Vite reads tsconfig paths itself now).
 */
const VITE_PLUGINS: Record<string, { version: string; binding?: string; call?: string }> = {
  'vite-tsconfig-paths': { version: '6.1.1' },
  '@vitejs/plugin-vue': { version: '6.0.11', binding: 'vue', call: 'vue()' },
  '@vitejs/plugin-vue-jsx': { version: VERSIONS['@vitejs/plugin-vue-jsx'], binding: 'vueJsx', call: 'vueJsx()' },
};
/** Build tools `bcms-ext bundle` replaces: it builds with vite.config.mjs (and type-checks ui/ with tsc when ui/tsconfig.json exists). */
const DROPPED_TOOLS = ['vue-tsc'];

type Deps = Record<string, string>;
export type UiPackage = Record<string, unknown> & { dependencies?: Deps; devDependencies?: Deps; scripts?: Record<string, string> };

/** JSON written back with the file's own indentation and final newline. */
function jsonLike(original: string, value: unknown): string {
  const indent = /^([ \t]+)"/m.exec(original)?.[1] ?? '  ';
  return `${JSON.stringify(value, null, indent)}${original.endsWith('\n') ? '\n' : ''}`;
}

/**
 * Ports `<root>/ui` when it has a package.json: fills `writes` (file → text) and `changes`
 * (what, per file); returns its package.json as ported when it changed. A UI made by `bcms-ext
 * create` has nothing to change.
 */
export function portPluginUi(root: string, writes: Map<string, string>, changes: { file: string; what: string }[]): UiPackage | undefined {
  const ui = path.join(root, 'ui');
  const pkgFile = path.join(ui, 'package.json');
  if (!fs.existsSync(pkgFile)) return undefined;
  const text = fs.readFileSync(pkgFile, 'utf8');
  const pkg = JSON.parse(text) as UiPackage;
  const what: string[] = [];
  const sections = ['dependencies', 'devDependencies'] as const;
  const declared = (name: string): string | undefined => sections.map((section) => pkg[section]?.[name]).find((range) => range !== undefined);
  const set = (name: string, version: string): void => {
    const section = sections.find((each) => pkg[each]?.[name] !== undefined) ?? 'devDependencies';
    pkg[section] = { ...pkg[section], [name]: version };
  };
  const remove = (name: string): void => {
    for (const section of sections) if (pkg[section]?.[name] !== undefined) delete (pkg[section] as Deps)[name];
  };

  if (declared('@becomes/cms-ui') !== undefined) {
    remove('@becomes/cms-ui');
    what.push(`removed @becomes/cms-ui (gone from the registry; ${PACKAGE}/ui takes its place)`);
  }
  if (declared(PACKAGE) === undefined) {
    const spec = packageSpec(ui);
    set(PACKAGE, spec);
    what.push(`added ${PACKAGE} (${spec})`);
  }
  for (const tool of DROPPED_TOOLS) {
    if (declared(tool) === undefined) continue;
    remove(tool);
    what.push(`removed ${tool} (bcms-ext bundle builds the UI with Vite, and type-checks it with tsc only when ui/tsconfig.json exists)`);
  }
  const raise = (name: string, version: string, why: string): void => {
    const range = declared(name);
    if (range === undefined || range === version) return;
    set(name, version);
    what.push(`${name} ${range} → ${version} (${why})`);
  };
  raise('vite', VERSIONS.vite, 'the Vite bcms-ext bundle builds with');
  raise('typescript', VERSIONS.typescript, 'the TypeScript bcms-ext bundle type-checks with');
  for (const [name, plugin] of Object.entries(VITE_PLUGINS)) raise(name, plugin.version, `runs under Vite ${VERSIONS.vite}`);
  if (pkg.scripts?.build !== undefined && /vue-tsc/.test(pkg.scripts.build)) {
    what.push(`scripts.build: "${pkg.scripts.build}" → "vite build"`);
    pkg.scripts.build = 'vite build';
  }
  if (what.length > 0) {
    writes.set(pkgFile, jsonLike(text, pkg));
    for (const line of what) changes.push({ file: 'ui/package.json', what: line });
  }

  const configFile = path.join(ui, 'vite.config.mjs');
  if (!fs.existsSync(configFile)) {
    const plugins = Object.entries(VITE_PLUGINS).filter(([name, plugin]) => declared(name) !== undefined && plugin.call !== undefined);
    writes.set(configFile, viteConfig(plugins.map(([name, plugin]) => ({ name, binding: plugin.binding as string, call: plugin.call as string }))));
    changes.push({
      file: 'ui/vite.config.mjs',
      what: `created: what bcms-ext bundle builds the UI with (${plugins.map(([name]) => name).join(', ') || 'no plugins'}; tsconfig paths, relative URLs, one copy of vue)`,
    });
  }
  return what.length > 0 ? pkg : undefined;
}

function viteConfig(plugins: { name: string; binding: string; call: string }[]): string {
  return `// The UI as bcms-ext bundle builds it (written by bcms-ext port): into ./dist, with relative URLs,
// since the service serves it under /plugin/<name>/.
import { fileURLToPath } from 'node:url';
${plugins.map((plugin) => `import ${plugin.binding} from '${plugin.name}';`).join('\n')}
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  plugins: [${plugins.map((plugin) => plugin.call).join(', ')}],
  // The tsconfig's paths (@ui/*, @backend/*); bcms-extensions/ui and the UI share one copy of vue (and of its router).
  resolve: { tsconfigPaths: true, dedupe: ['vue', 'vue-router'] },
  build: { outDir: 'dist', emptyOutDir: true },
  logLevel: 'warn',
});
`;
}

// Builds the todo plugin's UI (a test fixture written as BCMS's plugin-starter writes its todo UI)
// into ./dist. `npm run build:test-ui` (part of `npm test`'s pretest).
//
// BCMS's placeholder `bcms-plugin---name` is replaced with the plugin's name as `bcms-ext bundle`
// replaces it, with the same function (dist/cli/bundle.js, built by `npm run build` first).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import vueJsx from '@vitejs/plugin-vue-jsx';
import { defineConfig } from 'vite';

const { replacePluginNamePlaceholder } = createRequire(import.meta.url)('../../../dist/cli/bundle.js');
/** The name the browser test gives the plugin (test/ui/todo-plugin.test.ts). */
export const PLUGIN_NAME = 'todos';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs: the UI is served under /plugin/todos/.
  base: './',
  plugins: [
    vueJsx(),
    {
      name: 'bcms-plugin-name',
      // The built text, as bcms-ext bundle sees it: every chunk and the HTML.
      renderChunk: (code) => replacePluginNamePlaceholder(code, PLUGIN_NAME),
      transformIndexHtml: (html) => replacePluginNamePlaceholder(html, PLUGIN_NAME),
    },
  ],
  logLevel: 'warn',
  build: { outDir: 'dist', emptyOutDir: true },
});

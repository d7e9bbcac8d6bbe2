// Builds the content-stats plugin's UI into ./dist, which the plugin serves (ui.dir).
// `npm run build:example-ui` from the repository root.
import { fileURLToPath } from 'node:url';
import vueJsx from '@vitejs/plugin-vue-jsx';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs: the UI is served under /plugin/content-stats/ (and any mount prefix).
  base: './',
  plugins: [vueJsx()],
  logLevel: 'warn',
  build: { outDir: 'dist', emptyOutDir: true },
});

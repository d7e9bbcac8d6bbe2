// Copies Swagger UI's built files (swagger-ui-dist, a dev dependency) into dist/browser/browser,
// where the router serves them for the admin shell's API view (lib/browser/api.ts): the tarball
// carries them, so users install neither swagger-ui-dist nor its install-time analytics. The
// source-map comment goes (the map is not shipped: it would be a 404 in every DevTools console);
// LICENSE and NOTICE go along, as Apache-2.0 asks of a redistribution.
const fs = require('node:fs');
const path = require('node:path');

const from = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const to = path.resolve(__dirname, '..', 'dist', 'browser', 'browser');
fs.mkdirSync(to, { recursive: true });
for (const [source, target] of [
  ['swagger-ui-bundle.js', 'swagger-ui-bundle.js'],
  ['swagger-ui.css', 'swagger-ui.css'],
]) {
  const text = fs.readFileSync(path.join(from, source), 'utf8').replace(/\n?\/[/*]# sourceMappingURL=\S+?(?:\s*\*\/)?\s*$/, '\n');
  fs.writeFileSync(path.join(to, target), text);
}
fs.copyFileSync(path.join(from, 'LICENSE'), path.join(to, 'swagger-ui.LICENSE.txt'));
fs.copyFileSync(path.join(from, 'NOTICE'), path.join(to, 'swagger-ui.NOTICE.txt'));

// After `tsc -p lib/bcms/ui/tsconfig.json` (npm run build:ui-kit): puts the stylesheet (with its
// declarations, for `import 'bcms-extensions/ui/styles.css'`) and the Tailwind preset beside the built modules, marks them ES modules, and points the declarations at
// the SDK's types by a relative path (a package cannot name itself from a folder that has a
// package.json of its own).
const fs = require('node:fs');
const path = require('node:path');

const from = __dirname;
const to = path.resolve(__dirname, '..', '..', '..', 'dist', 'bcms', 'ui');
for (const file of ['styles.d.ts', 'tailwind.config.cjs', 'tailwind.config.d.cts']) fs.copyFileSync(path.join(from, file), path.join(to, file));
// styles.css: Tailwind's directives, then the core's look (lib/ui/base.css), one file.
const base = fs.readFileSync(path.resolve(from, '..', '..', 'ui', 'base.css'), 'utf8');
fs.writeFileSync(path.join(to, 'styles.css'), `${fs.readFileSync(path.join(from, 'styles.css'), 'utf8')}\n${base}`);
fs.writeFileSync(path.join(to, 'package.json'), `${JSON.stringify({ type: 'module' })}\n`);
const types = path.join(to, 'types.d.ts');
const text = fs.readFileSync(types, 'utf8');
if (!text.includes("'bcms-extensions/sdk/types'")) throw new Error(`${types} no longer imports bcms-extensions/sdk/types: update assemble.cjs`);
fs.writeFileSync(types, text.replace("'bcms-extensions/sdk/types'", "'../../sdk/types.js'"));

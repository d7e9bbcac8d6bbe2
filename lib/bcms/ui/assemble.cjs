// After `tsc -p lib/bcms/ui/tsconfig.json` (npm run build:ui-kit): puts the stylesheet (with its
// declarations, for `import 'bcms-extensions/ui/styles.css'`) and the Tailwind preset beside the built modules, marks them ES modules, and points the declarations at
// the SDK's types by a relative path (a package cannot name itself from a folder that has a
// package.json of its own).
const fs = require('node:fs');
const path = require('node:path');

const from = __dirname;
const to = path.resolve(__dirname, '..', '..', '..', 'dist', 'bcms', 'ui');
for (const file of ['styles.css', 'styles.d.ts', 'tailwind.config.cjs']) fs.copyFileSync(path.join(from, file), path.join(to, file));
// base.css: the same look without Tailwind's directives, for UIs that are not built with Tailwind
// (what bcms-ext create writes): Vite warned "Unknown at rule: @tailwind" three times a build.
const styles = fs.readFileSync(path.join(from, 'styles.css'), 'utf8');
const base = styles.replace(/\/\* For a UI built with Tailwind[\s\S]*?@tailwind utilities;\n\n/, '');
if (base === styles || base.includes('@tailwind')) throw new Error('lib/bcms/ui/styles.css: its @tailwind block is not where assemble.cjs looks: update assemble.cjs');
fs.writeFileSync(path.join(to, 'base.css'), base.replace('(import \'bcms-extensions/ui/styles.css\')', "without Tailwind's directives (import 'bcms-extensions/ui/base.css')"));
fs.writeFileSync(path.join(to, 'package.json'), `${JSON.stringify({ type: 'module' })}\n`);
const types = path.join(to, 'types.d.ts');
const text = fs.readFileSync(types, 'utf8');
if (!text.includes("'bcms-extensions/sdk/types'")) throw new Error(`${types} no longer imports bcms-extensions/sdk/types: update assemble.cjs`);
fs.writeFileSync(types, text.replace("'bcms-extensions/sdk/types'", "'../../sdk/types.js'"));

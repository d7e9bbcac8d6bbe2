import fs from 'node:fs';
import path from 'node:path';
import { isUrlSafe } from '../../names';
import { parseArgs, UsageError, type Io } from '../../cli/_io';
import { backendTsconfig, VERSIONS } from '../../cli/create';
import { backendTsconfigOf, BACKEND_DIRS, functionsProjectLayout, packageSpec, pluginBackendDir, type BackendDir } from '../../cli/layout';
import { bcmsModuleTarget, exportedNames, namedImports, PACKAGE, rewriteBcmsImports, rewriteCalledNamespaceImports } from './imports';
import { bcmsPathAliases, parseJsonc, portTsconfig } from './tsconfig';
import { portPluginUi } from './ui';
import { portVueCliUi, vueCliUi } from './vue-cli';

export const PORT_USAGE = `  port [DIR] [--dry-run]                    Rewrite a BCMS v3 plugin or functions project (DIR, default
                                            here; its functions, events and jobs) for
                                            bcms-extensions: its imports of
                                            @becomes/cms-backend* and @becomes/purple-cheetah* come
                                            from bcms-extensions, pluginName becomes its slug,
                                            package.json drops @becomes/* for bcms-extensions and its
                                            bundle/deploy/dev scripts call bcms-ext. Prints each change;
                                            run again, it changes nothing. --dry-run writes nothing.
`;

// Stylesheets too: `@import '@becomes/cms-ui/styles/_main.scss'`.
const SOURCE_FILE = /\.(?:[cm]?[jt]sx?|vue|s?css|sass)$/;
/** Build output, dependencies and version control: never the author's code. */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'bcms-bundle', '.git']);
const DEPENDENCY_SECTIONS = ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'] as const;

export interface PortChange {
  /** Relative to the project, with `/`. */
  file: string;
  what: string;
}

export interface PortResult {
  kind: 'plugin' | 'functions';
  changes: PortChange[];
  /** What port left as it was, and the author may want to look at. */
  notes: string[];
  /** What stands in the way of a bundle: imports of names bcms-extensions does not export. */
  warnings: string[];
}

/**
 * The plugin name as BCMS's CLI makes it when it bundles a plugin (`bcms --plugin bundle`, bcms/cli
 * `src/plugin.ts`): lower case, spaces and `_` to `-`, `--` to `-` (once over the text), then every
 * character other than `a-z`, `0-9` and `-` dropped. `Reading List` → `reading-list`.
 */
export function bcmsPluginSlug(name: string): string {
  return name
    .toLowerCase()
    .replace(/ /g, '-')
    .replace(/_/g, '-')
    .replace(/--/g, '-')
    .replace(/[^a-z0-9-]/g, '');
}

function sourceFiles(root: string, dir = root): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : sourceFiles(root, full);
      return entry.isFile() && SOURCE_FILE.test(entry.name) ? [full] : [];
    });
}

/** JSON written back with the file's own indentation and final newline, so that a port's diff shows only what changed. */
function jsonLike(original: string, value: unknown): string {
  const indent = /^([ \t]+)"/m.exec(original)?.[1] ?? '  ';
  return `${JSON.stringify(value, null, indent)}${original.endsWith('\n') ? '\n' : ''}`;
}

type PackageJson = Record<string, unknown> & Partial<Record<(typeof DEPENDENCY_SECTIONS)[number] | 'scripts', Record<string, string>>>;

/** package.json's part of the port: what it becomes, and what changed. */
function portPackageJson(pkg: PackageJson, kind: PortResult['kind'], root: string, changes: string[], notes: string[], kept?: { name: string; why: string }): void {
  const removed: string[] = [];
  for (const section of DEPENDENCY_SECTIONS) {
    const deps = pkg[section];
    if (deps === undefined) continue;
    for (const name of Object.keys(deps)) {
      if (!name.startsWith('@becomes/') || name === kept?.name) continue;
      delete deps[name];
      removed.push(name);
    }
  }
  if (removed.length > 0) changes.push(`removed ${removed.join(', ')}`);
  if (removed.length > 0 && kept !== undefined && DEPENDENCY_SECTIONS.some((section) => pkg[section]?.[kept.name] !== undefined)) {
    notes.push(`package.json: ${kept.name} kept: ${kept.why}`);
  }
  const declared = (name: string): string | undefined => DEPENDENCY_SECTIONS.map((section) => pkg[section]?.[name]).find((range) => range !== undefined);
  const addDevDependency = (name: string, version: string): void => {
    pkg.devDependencies = { ...pkg.devDependencies, [name]: version };
  };
  // As bcms-ext create writes it: bundles leave bcms-extensions out, the service provides it.
  if (declared(PACKAGE) === undefined) {
    const spec = packageSpec(root);
    addDevDependency(PACKAGE, spec);
    changes.push(`added ${PACKAGE} (${spec})`);
  }
  // What bcms-ext bundle runs in the project: tsc, vite, and Node's types; older majors than these
  // break it (a BCMS project's TypeScript 4 or @types/node 18), so they are raised too.
  const tools: Record<string, { version: string; oldest?: { major: number; why: string } }> = {
    typescript: { version: VERSIONS.typescript, oldest: { major: 5, why: 'bcms-ext bundle type-checks with moduleResolution "bundler", TypeScript 5 or newer' } },
    vite: { version: VERSIONS.vite },
    '@types/node': { version: VERSIONS['@types/node'], oldest: { major: 20, why: `vite ${VERSIONS.vite} asks for @types/node 20.19 or newer, and npm install refuses an older one` } },
  };
  for (const [name, { version, oldest }] of Object.entries(tools)) {
    const range = declared(name);
    if (range === undefined) {
      addDevDependency(name, version);
      changes.push(`added ${name} ${version} (bcms-ext bundle runs it)`);
    } else if (oldest !== undefined && Number(/\d+/.exec(range)?.[0] ?? '0') < oldest.major) {
      for (const section of DEPENDENCY_SECTIONS) if (pkg[section]?.[name] !== undefined) (pkg[section] as Record<string, string>)[name] = version;
      changes.push(`${name} ${range} → ${version} (${oldest.why})`);
    }
  }
  pkg.scripts ??= {};
  const scripts = pkg.scripts;
  const wanted: Record<string, string> = { bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy' };
  if (kind === 'plugin' && scripts.dev !== undefined) wanted.dev = 'bcms-ext dev';
  for (const [script, command] of Object.entries(wanted)) {
    if (scripts[script] === command) continue;
    changes.push(scripts[script] === undefined ? `scripts.${script}: "${command}"` : `scripts.${script}: "${scripts[script]}" → "${command}"`);
    scripts[script] = command;
  }
  for (const [script, command] of Object.entries(scripts)) {
    // BCMS's own CLI (@becomes/cms-cli) is gone with the other @becomes packages.
    if (/^bcms(\s|$)/.test(command)) {
      delete scripts[script];
      changes.push(`scripts.${script} ("${command}") removed: BCMS's CLI is not installed any more`);
    }
  }
  // plugin-starter's postinstall installs ui/ and copies @becomes/cms-ui's sources into it: the
  // first would fail on cms-ui, which the registry no longer has, and the second has nothing to copy.
  const postinstall = scripts.postinstall;
  if (postinstall !== undefined && /npm-tool\s+--postinstall/.test(postinstall)) {
    const ui = fs.existsSync(path.join(root, 'ui', 'package.json'));
    if (ui) scripts.postinstall = 'npm --prefix ui install';
    else delete scripts.postinstall;
    changes.push(`scripts.postinstall: "${postinstall}" ${ui ? '→ "npm --prefix ui install"' : 'removed'} (it copied @becomes/cms-ui's sources, which bcms-extensions/ui replaces)`);
  }
  if (kind === 'functions' && scripts.dev !== undefined && !scripts.dev.startsWith('bcms-ext')) {
    notes.push(`package.json: scripts.dev ("${scripts.dev}") left as it is: bcms-ext dev serves plugin projects`);
  }
}

/** The tsconfig files of a project that port brings to TypeScript 7: the root's, a plugin back end's and its UI's. */
function tsconfigFiles(root: string): string[] {
  const rootConfigs = fs.readdirSync(root).filter((file) => /^tsconfig(\.[\w-]+)?\.json$/.test(file));
  const nested = [...BACKEND_DIRS, 'ui'].flatMap((dir) => {
    const folder = path.join(root, dir);
    if (!fs.existsSync(folder) || !fs.statSync(folder).isDirectory()) return [];
    return fs
      .readdirSync(folder)
      .filter((file) => /^tsconfig(\.[\w-]+)?\.json$/.test(file))
      .map((file) => `${dir}/${file}`);
  });
  return [...rootConfigs.sort(), ...nested.sort()].map((file) => path.join(root, file));
}

/**
 * A lockfile that pins a version of a package of BCMS's the project still uses (`@becomes/cms-sdk`
 * 3.4.1 in plugin-starter's ui/), which the registry no longer has: removed, and `npm install`
 * writes a new one. A lockfile whose BCMS packages port removed stays: npm drops them from the tree,
 * and keeps the rest as the author locked it.
 */
function staleLock(root: string, folder: string, removes: Set<string>, changes: PortChange[], pkg: PackageJson): void {
  const lock = path.join(root, folder, 'package-lock.json');
  const stillBcms = DEPENDENCY_SECTIONS.some((section) => Object.keys(pkg[section] ?? {}).some((name) => name.startsWith('@becomes/')));
  if (!fs.existsSync(lock) || !stillBcms) return;
  removes.add(lock);
  changes.push({ file: `${folder}package-lock.json`, what: 'removed: it locked versions of @becomes packages the registry no longer has; npm install writes a new one' });
}

/** Files that only BCMS's own server and tools read, which require packages port removes. */
const BCMS_ONLY_FILES: Record<string, string> = {
  'bcms.config.js': "BCMS's server config (createBcmsConfig); the host's bcmsExtensions(...) options take its place",
};

/**
 * Ports the BCMS v3 plugin or functions project in `root` to bcms-extensions (see PORT_USAGE),
 * writing the files unless `write` is false. Throws a UsageError, and writes nothing, for a
 * folder that is not such a project. A project already ported gives no changes.
 */
export function portProject(root: string, { write = true }: { write?: boolean } = {}): PortResult {
  const where = `${root} is not a BCMS v3 plugin or functions project`;
  const pkgFile = path.join(root, 'package.json');
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) throw new UsageError(`${root} is not a folder: give the project's folder (bcms-ext port DIR)`);
  if (!fs.existsSync(pkgFile)) throw new UsageError(`${where}: it has no package.json. Run bcms-ext port in the project's folder, or give it: bcms-ext port DIR`);
  const configFile = path.join(root, 'bcms-plugin.config.json');
  // A functions project: src/functions, src/events, src/jobs as BCMS v3 has them (or at the root): any of them.
  const functions = functionsProjectLayout(root);
  const kind: PortResult['kind'] | undefined = fs.existsSync(configFile) ? 'plugin' : functions !== undefined ? 'functions' : undefined;
  if (kind === undefined) {
    throw new UsageError(
      `${where}: neither bcms-plugin.config.json (a plugin) nor functions, events or jobs (src/functions/*.ts, src/events/*.ts, src/jobs/*.ts, or the same folders here). Run bcms-ext port in the project's folder, or give it: bcms-ext port DIR`,
    );
  }
  const backend: BackendDir | undefined = kind === 'plugin' ? pluginBackendDir(root) : undefined;
  if (kind === 'plugin' && backend === undefined) {
    throw new UsageError(`${where}: it has bcms-plugin.config.json but neither backend/main.ts nor src/backend/main.ts, the plugin's entry (export default createBcmsPlugin(...))`);
  }

  const writes = new Map<string, string>();
  const removes = new Set<string>();
  const changes: PortChange[] = [];
  const notes: string[] = [];
  const warnings: string[] = [];
  const relative = (file: string): string => path.relative(root, file).split(path.sep).join('/');

  // tsconfig files first: the aliases they give BCMS's sources (`@bcms/*`) are BCMS imports too.
  const aliases = { backend: new Set<string>(), ui: new Set<string>() };
  for (const file of tsconfigFiles(root)) {
    const text = fs.readFileSync(file, 'utf8');
    let config: Record<string, unknown>;
    try {
      config = parseJsonc(text) as Record<string, unknown>;
    } catch (error) {
      throw new UsageError(`${relative(file)} is not JSON (${(error as Error).message}): fix it, then run bcms-ext port again`);
    }
    const found = bcmsPathAliases(config);
    for (const alias of found.backend) aliases.backend.add(alias);
    for (const alias of found.ui) aliases.ui.add(alias);
    const what = portTsconfig(config, file);
    if (what.length === 0) continue;
    writes.set(file, jsonLike(text, config));
    for (const line of what) changes.push({ file: relative(file), what: line });
    if (/\/\/|\/\*/.test(text.replace(/"(?:\\.|[^"\\])*"/g, '""'))) notes.push(`${relative(file)}: its comments were dropped when it was rewritten`);
  }

  for (const [name, why] of Object.entries(BCMS_ONLY_FILES)) {
    const file = path.join(root, name);
    if (!fs.existsSync(file) || !/@becomes\//.test(fs.readFileSync(file, 'utf8'))) continue;
    removes.add(file);
    changes.push({ file: name, what: `removed: ${why}` });
  }

  for (const file of sourceFiles(root)) {
    if (removes.has(file)) continue;
    const source = fs.readFileSync(file, 'utf8');
    const imports = rewriteBcmsImports(source, { backend: [...aliases.backend], ui: [...aliases.ui] }, path.dirname(file));
    // Sass inlines a stylesheet it imports without its extension (a `.css` one stays a CSS @import, which Tailwind never sees).
    if (/\.s[ac]ss$/.test(file)) imports.text = imports.text.replace(/(['"])bcms-extensions\/ui\/styles\.css\1/g, '$1bcms-extensions/ui/styles$1');
    const namespaces = rewriteCalledNamespaceImports(imports.text);
    if (imports.replaced.length === 0 && namespaces.changed.length === 0) continue;
    writes.set(file, namespaces.text);
    const { replaced } = imports;
    if (replaced.length > 0) {
      // Grouped by what they became: `bcms-extensions`, `bcms-extensions/ui`...
      const byTarget = new Map<string, string[]>();
      for (const name of new Set(replaced)) {
        const found = bcmsModuleTarget(name, { backend: [...aliases.backend], ui: [...aliases.ui] }, path.dirname(file)) as string;
        const target = /\.s[ac]ss$/.test(file) ? found.replace(/\/styles\.css$/, '/styles') : found;
        byTarget.set(target, [...(byTarget.get(target) ?? []), name]);
      }
      const parts = [...byTarget].map(([target, names]) => `${names.join(', ')} → ${target}`);
      changes.push({ file: relative(file), what: `${replaced.length} import${replaced.length === 1 ? '' : 's'} of ${parts.join('; ')}` });
      for (const module of [PACKAGE, `${PACKAGE}/ui`]) {
        const missing = [...new Set(namedImports(namespaces.text, module).filter((name) => !exportedNames(module).has(name)))];
        if (missing.length > 0)
          warnings.push(`${relative(file)}: ${module} does not export ${missing.join(', ')}; this file will not type-check or bundle until it no longer needs ${missing.length === 1 ? 'it' : 'them'}`);
      }
    }
    for (const binding of namespaces.changed) {
      changes.push({
        file: relative(file),
        what: `import * as ${binding} → import ${binding} (a namespace import cannot be called; the default import is the module itself, as TypeScript 4 compiled it)`,
      });
    }
  }

  let pkg: PackageJson;
  const pkgText = fs.readFileSync(pkgFile, 'utf8');
  try {
    pkg = JSON.parse(pkgText) as PackageJson;
  } catch (error) {
    throw new UsageError(`package.json is not JSON (${(error as Error).message}): fix it, then run bcms-ext port again`);
  }
  const bcmsDependency = DEPENDENCY_SECTIONS.some((section) => Object.keys(pkg[section] ?? {}).some((name) => name.startsWith('@becomes/') || name === PACKAGE));
  if (!bcmsDependency && writes.size === 0) {
    throw new UsageError(`${where}: neither its package.json nor its code uses @becomes/* packages (or ${PACKAGE}, for a project ported already)`);
  }
  const pkgChanges: string[] = [];
  // A UI's imports of @becomes/cms-sdk (its types and enums, such as BCMSJwtRoleName; the registry
  // has it) stay: window.bcms.sdk is this service's, the package only names its shapes.
  const inBackEnd = (file: string): boolean => /^(?:src\/)?(?:backend|functions|events|jobs)\//.test(relative(file));
  const importsSdk = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]@becomes\/cms-sdk(?:\/[^'"]*)?['"]/;
  const sdkImporter = sourceFiles(root).find((file) => !removes.has(file) && !inBackEnd(file) && importsSdk.test(fs.readFileSync(file, 'utf8')));
  const kept = sdkImporter === undefined ? undefined : { name: '@becomes/cms-sdk', why: `${relative(sdkImporter)} imports its types and enums (window.bcms.sdk itself is this service's)` };
  portPackageJson(pkg, kind, root, pkgChanges, notes, kept);
  const vueCli = kind === 'plugin' ? vueCliUi(root) : undefined;
  if (vueCli !== undefined && 'entry' in vueCli) portVueCliUi(root, vueCli.entry, pkg, { writes, removes, changes, notes }, pkgChanges);
  else if (vueCli !== undefined) notes.push(vueCli.unported);
  if (pkgChanges.length > 0) {
    writes.set(pkgFile, jsonLike(pkgText, pkg));
    for (const what of pkgChanges) changes.push({ file: 'package.json', what });
    staleLock(root, '', removes, changes, pkg);
  }

  if (kind === 'plugin') {
    const configText = fs.readFileSync(configFile, 'utf8');
    let config: Record<string, unknown>;
    try {
      config = JSON.parse(configText) as Record<string, unknown>;
    } catch (error) {
      throw new UsageError(`bcms-plugin.config.json is not JSON (${(error as Error).message}): fix it, then run bcms-ext port again`);
    }
    if (typeof config.pluginName !== 'string') throw new UsageError('bcms-plugin.config.json has no "pluginName": add the plugin\'s name, then run bcms-ext port again');
    const slug = bcmsPluginSlug(config.pluginName);
    if (!isUrlSafe(slug)) {
      throw new UsageError(`pluginName ${JSON.stringify(config.pluginName)} in bcms-plugin.config.json slugs to ${JSON.stringify(slug)}, not a name a URL can carry: start it with a letter or digit`);
    }
    if (slug !== config.pluginName) {
      writes.set(configFile, jsonLike(configText, { ...config, pluginName: slug }));
      changes.push({ file: 'bcms-plugin.config.json', what: `pluginName "${config.pluginName}" → "${slug}" (as BCMS's CLI slugs it: the plugin's URL name)` });
    }
    const uiPackage = portPluginUi(root, writes, changes);
    if (uiPackage !== undefined) staleLock(root, 'ui/', removes, changes, uiPackage);
  }

  // The config bcms-ext bundle type-checks the back end with: made when the project has none.
  const checkConfig = backendTsconfigOf(root, backend);
  if (!fs.existsSync(path.join(root, checkConfig))) {
    // A functions project's events and jobs are type-checked with its functions, as they are bundled with them.
    const include = kind === 'plugin' ? [backend as string] : Object.values((functions as NonNullable<typeof functions>).folders);
    writes.set(path.join(root, checkConfig), backendTsconfig(include));
    changes.push({ file: checkConfig, what: `created: strict, over ${include.map((dir) => `${dir}/`).join(', ')}, as bcms-ext create makes it (bcms-ext bundle type-checks with it)` });
  }
  const envExample = path.join(root, '.env.example');
  if (!fs.existsSync(envExample)) {
    writes.set(envExample, 'BCMS_URL=http://localhost:8080\nBCMS_KEY_ID=\nBCMS_KEY_SECRET=\n');
    changes.push({ file: '.env.example', what: 'created: where bcms-ext deploy sends bundles, and its key (copy it to .env)' });
  }
  const gitignore = path.join(root, '.gitignore');
  const ignored = fs.existsSync(gitignore) ? fs.readFileSync(gitignore, 'utf8') : undefined;
  const missing = ['node_modules/', 'bcms-bundle/', '.env', 'bcms-deploy-key.pem'].filter((line) => !(ignored ?? '').split(/\r?\n/).includes(line));
  if (missing.length > 0) {
    const head = ignored === undefined || ignored === '' || ignored.endsWith('\n') ? (ignored ?? '') : `${ignored}\n`;
    writes.set(gitignore, `${head}${missing.join('\n')}\n`);
    changes.push({ file: '.gitignore', what: `${ignored === undefined ? 'created with' : 'added'} ${missing.join(', ')}` });
  }

  if (write) {
    for (const [file, text] of writes) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, text);
    }
    for (const file of removes) fs.rmSync(file);
  }
  return { kind, changes, notes, warnings };
}

/** `bcms-ext port`, which lib/cli/bin.ts adds to the CLI. */
export const portCommand = { name: 'port', usage: PORT_USAGE, run: (args: string[], io: Io, cwd?: string) => runPort(args, io, cwd) };

export async function runPort(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { 'dry-run': 'boolean' });
  if (positionals.length > 1) throw new UsageError(`expected port [DIR] [--dry-run], got ${positionals.length} folders`);
  const root = path.resolve(cwd, positionals[0] ?? '.');
  const dryRun = flags['dry-run'] === true;
  const { kind, changes, notes, warnings } = portProject(root, { write: !dryRun });
  const relative = path.relative(cwd, root);
  const shown = relative.startsWith('..') || path.isAbsolute(relative) ? root : relative || '.';
  if (changes.length === 0) {
    io.out(`Nothing to change: ${shown} is a ${kind} project ported to ${PACKAGE} already.\n`);
  } else {
    io.out(`${dryRun ? 'Would port' : 'Ported'} ${shown} (a BCMS v3 ${kind} project) to ${PACKAGE}:\n`);
    for (const { file, what } of changes) io.out(`  ${file}: ${what}\n`);
  }
  for (const note of notes) io.out(`Note: ${note}\n`);
  for (const warning of warnings) io.err(`Warning: ${warning}\n`);
  if (changes.length > 0 && !dryRun) {
    io.out(
      `Next:\n  npm install\n  cp .env.example .env   # BCMS_URL; then a key that may deploy: BCMS_TOKEN=<a SUDO JWT> npx --no bcms-ext keys create --name deployer --deploy --env-file .env\n` +
        `  npm run bundle\n  npm run deploy\n`,
    );
  }
  return 0;
}

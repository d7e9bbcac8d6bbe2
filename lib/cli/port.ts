import fs from 'node:fs';
import path from 'node:path';
import { isUrlSafe } from '../names';
import { parseArgs, UsageError, type Io } from './_io';
import { backendTsconfig, PACKAGE_ROOT, VERSIONS } from './create';

export const PORT_USAGE = `  port [DIR] [--dry-run]                    Rewrite a BCMS v3 plugin or functions project (DIR, default
                                            here) for bcms-extensions: its imports of
                                            @becomes/cms-backend* and @becomes/purple-cheetah* come
                                            from bcms-extensions, pluginName becomes its slug,
                                            package.json drops @becomes/* for bcms-extensions and its
                                            bundle/deploy/dev scripts call bcms-ext. Prints each change;
                                            run again, it changes nothing. --dry-run writes nothing.
`;

/** The package every BCMS back-end module name is replaced with. */
const PACKAGE = 'bcms-extensions';
/** BCMS's back end and purple-cheetah with its modules: what the extension interface replaces. */
const BCMS_MODULE = /^@becomes\/(?:cms-backend|purple-cheetah)(?:$|[-/])/;
const SOURCE_FILE = /\.(?:[cm]?[jt]sx?|vue)$/;
/** Build output, dependencies and version control: never the author's code. */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'bcms-bundle', '.git']);
/** Comments, template literals and string literals: the tokens an import's module name hides among. */
const TOKEN = /\/\/[^\n]*|\/\*[\s\S]*?\*\/|`(?:\\[\s\S]|[^\\`])*`|'((?:\\.|[^\\'\n])*)'|"((?:\\.|[^\\"\n])*)"/g;
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
}

/**
 * The plugin name as BCMS's CLI makes it when it bundles a plugin (`bcms --plugin bundle`, bcms/cli
 * `src/plugin.ts`): lower case, spaces and `_` to `-`, `--` to `-` (once over the text), then every
 * character other than `a-z`, `0-9` and `-` dropped. `Reading List` → `reading-list`.
 */
export function bcmsPluginSlug(name: string): string {
  return name.toLowerCase().replace(/ /g, '-').replace(/_/g, '-').replace(/--/g, '-').replace(/[^a-z0-9-]/g, '');
}

/** Whether the string literal starting at `quote` is a module name: after `from`, `import`, `require(` or `import(`. */
function isModuleName(source: string, quote: number): boolean {
  let i = quote - 1;
  const skipSpace = (): void => {
    while (i >= 0 && /\s/.test(source[i] as string)) i--;
  };
  skipSpace();
  const call = source[i] === '(';
  if (call) {
    i--;
    skipSpace();
  }
  const end = i + 1;
  while (i >= 0 && /[\w$]/.test(source[i] as string)) i--;
  if (i >= 0 && source[i] === '.') return false; // a method: `something.from('x')`
  const word = source.slice(i + 1, end);
  return call ? word === 'require' || word === 'import' : word === 'from' || word === 'import';
}

/**
 * Replaces the module name of every import, `export ... from`, `require()` and `import()` of
 * BCMS's back end or purple-cheetah (and its modules) with `bcms-extensions`, keeping its quotes;
 * nothing else in the text changes (`import type` stays, no two imports are merged). Returns the
 * text and the module names it replaced, in order.
 */
export function rewriteBcmsImports(source: string): { text: string; replaced: string[] } {
  const replaced: string[] = [];
  const text = source.replace(TOKEN, (token: string, single: string | undefined, double: string | undefined, offset: number) => {
    const name = single ?? double;
    if (name === undefined || !BCMS_MODULE.test(name) || !isModuleName(source, offset)) return token;
    replaced.push(name);
    return `${token[0]}${PACKAGE}${token[0]}`;
  });
  return { text, replaced };
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

/** Whether a file of a functions folder is a function's source (a .ts or .js file, not a declaration file). */
export const isFunctionSource = (file: string): boolean => /\.(ts|js)$/.test(file) && !file.endsWith('.d.ts');

/** The folder of a functions project's function files: `src/functions` (as bcms-ext create makes it) or `functions`. */
export function functionsDir(root: string): string | undefined {
  return ['src/functions', 'functions'].find((dir) => {
    const full = path.join(root, dir);
    return fs.existsSync(full) && fs.readdirSync(full).some(isFunctionSource);
  });
}

/** JSON written back with the file's own indentation and final newline, so that a port's diff shows only what changed. */
function jsonLike(original: string, value: unknown): string {
  const indent = /^([ \t]+)"/m.exec(original)?.[1] ?? '  ';
  return `${JSON.stringify(value, null, indent)}${original.endsWith('\n') ? '\n' : ''}`;
}

type PackageJson = Record<string, unknown> & Partial<Record<(typeof DEPENDENCY_SECTIONS)[number] | 'scripts', Record<string, string>>>;

/** package.json's part of the port: what it becomes, and what changed. */
function portPackageJson(pkg: PackageJson, kind: PortResult['kind'], changes: string[], notes: string[]): void {
  const removed: string[] = [];
  for (const section of DEPENDENCY_SECTIONS) {
    const deps = pkg[section];
    if (deps === undefined) continue;
    for (const name of Object.keys(deps)) {
      if (!name.startsWith('@becomes/')) continue;
      delete deps[name];
      removed.push(name);
    }
  }
  if (removed.length > 0) changes.push(`removed ${removed.join(', ')}`);
  const declared = (name: string): string | undefined => DEPENDENCY_SECTIONS.map((section) => pkg[section]?.[name]).find((range) => range !== undefined);
  const addDevDependency = (name: string, version: string): void => {
    pkg.devDependencies = { ...pkg.devDependencies, [name]: version };
  };
  // As bcms-ext create writes it: bundles leave bcms-extensions out, the service provides it.
  if (declared(PACKAGE) === undefined) {
    addDevDependency(PACKAGE, `file:${PACKAGE_ROOT}`);
    changes.push(`added ${PACKAGE} (file:${PACKAGE_ROOT})`);
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
  const scripts = (pkg.scripts ??= {});
  const wanted: Record<string, string> = { bundle: 'bcms-ext bundle', deploy: 'bcms-ext deploy' };
  if (kind === 'plugin' && scripts.dev !== undefined) wanted.dev = 'bcms-ext dev';
  for (const [script, command] of Object.entries(wanted)) {
    if (scripts[script] === command) continue;
    changes.push(scripts[script] === undefined ? `scripts.${script}: "${command}"` : `scripts.${script}: "${scripts[script]}" → "${command}"`);
    scripts[script] = command;
  }
  if (kind === 'functions' && scripts.dev !== undefined && !scripts.dev.startsWith('bcms-ext')) {
    notes.push(`package.json: scripts.dev ("${scripts.dev}") left as it is: bcms-ext dev serves plugin projects`);
  }
}

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
  const functions = functionsDir(root);
  const kind: PortResult['kind'] | undefined = fs.existsSync(configFile) ? 'plugin' : functions !== undefined ? 'functions' : undefined;
  if (kind === undefined) {
    throw new UsageError(`${where}: neither bcms-plugin.config.json (a plugin) nor functions/*.ts (functions). Run bcms-ext port in the project's folder, or give it: bcms-ext port DIR`);
  }
  if (kind === 'plugin' && !fs.existsSync(path.join(root, 'backend', 'main.ts'))) {
    throw new UsageError(`${where}: it has bcms-plugin.config.json but no backend/main.ts, the plugin's entry (export default createBcmsPlugin(...))`);
  }

  const writes = new Map<string, string>();
  const changes: PortChange[] = [];
  const notes: string[] = [];
  const relative = (file: string): string => path.relative(root, file).split(path.sep).join('/');

  for (const file of sourceFiles(root)) {
    const source = fs.readFileSync(file, 'utf8');
    const { text, replaced } = rewriteBcmsImports(source);
    if (replaced.length === 0) continue;
    writes.set(file, text);
    const names = [...new Set(replaced)];
    changes.push({ file: relative(file), what: `${replaced.length} import${replaced.length === 1 ? '' : 's'} of ${names.join(', ')} → ${PACKAGE}` });
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
  portPackageJson(pkg, kind, pkgChanges, notes);
  if (pkgChanges.length > 0) {
    writes.set(pkgFile, jsonLike(pkgText, pkg));
    for (const what of pkgChanges) changes.push({ file: 'package.json', what });
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
    if (fs.existsSync(path.join(root, 'ui'))) {
      notes.push('ui/: left as it is. bcms-ext bundle builds it with ui/vite.config.mjs into ui/dist; a UI on @becomes/cms-ui needs porting by hand');
    }
  }

  const tsconfig = path.join(root, 'tsconfig.json');
  if (!fs.existsSync(tsconfig)) {
    const include = kind === 'plugin' ? 'backend' : (functions as string);
    writes.set(tsconfig, backendTsconfig([include]));
    changes.push({ file: 'tsconfig.json', what: `created: strict, over ${include}/, as bcms-ext create makes it (bcms-ext bundle type-checks with it)` });
  }
  const envExample = path.join(root, '.env.example');
  if (!fs.existsSync(envExample)) {
    writes.set(envExample, 'BCMS_URL=http://localhost:8080\nBCMS_KEY_ID=\nBCMS_KEY_SECRET=\n');
    changes.push({ file: '.env.example', what: 'created: where bcms-ext deploy sends bundles, and its key (copy it to .env)' });
  }
  const gitignore = path.join(root, '.gitignore');
  const ignored = fs.existsSync(gitignore) ? fs.readFileSync(gitignore, 'utf8') : undefined;
  const missing = ['node_modules/', 'bcms-bundle/', '.env'].filter((line) => !(ignored ?? '').split(/\r?\n/).includes(line));
  if (missing.length > 0) {
    const head = ignored === undefined || ignored === '' || ignored.endsWith('\n') ? (ignored ?? '') : `${ignored}\n`;
    writes.set(gitignore, `${head}${missing.join('\n')}\n`);
    changes.push({ file: '.gitignore', what: `${ignored === undefined ? 'created with' : 'added'} ${missing.join(', ')}` });
  }

  if (write) for (const [file, text] of writes) fs.writeFileSync(file, text);
  return { kind, changes, notes };
}

export async function runPort(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { 'dry-run': 'boolean' });
  if (positionals.length > 1) throw new UsageError(`expected port [DIR] [--dry-run], got ${positionals.length} folders`);
  const root = path.resolve(cwd, positionals[0] ?? '.');
  const dryRun = flags['dry-run'] === true;
  const { kind, changes, notes } = portProject(root, { write: !dryRun });
  const relative = path.relative(cwd, root);
  const shown = relative.startsWith('..') || path.isAbsolute(relative) ? root : relative || '.';
  if (changes.length === 0) {
    io.out(`Nothing to change: ${shown} is a ${kind} project ported to ${PACKAGE} already.\n`);
  } else {
    io.out(`${dryRun ? 'Would port' : 'Ported'} ${shown} (a BCMS v3 ${kind} project) to ${PACKAGE}:\n`);
    for (const { file, what } of changes) io.out(`  ${file}: ${what}\n`);
  }
  for (const note of notes) io.out(`Note: ${note}\n`);
  if (changes.length > 0 && !dryRun) {
    io.out(
      `Next:\n  npm install\n  cp .env.example .env   # BCMS_URL, and a key that may deploy: bcms-ext keys create --name deployer --deploy --env\n` +
        `  npm run bundle\n  npm run deploy\n`,
    );
  }
  return 0;
}

/**
 * Where things are in a plugin or functions project, for the commands that read one (`bundle`,
 * `port`, `create`): the layouts `bcms-ext create` makes and the ones BCMS's tools made.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../manifest';

/** A plugin's back end: `backend/` (bcms-ext create, BCMS's plugin-starter) or `src/backend/` (BCMS's Vue CLI plugins). */
export const BACKEND_DIRS = ['backend', 'src/backend'] as const;
export type BackendDir = (typeof BACKEND_DIRS)[number];

/** The folder of a plugin's back end: the first of BACKEND_DIRS with a main.ts. */
export function pluginBackendDir(root: string): BackendDir | undefined {
  return BACKEND_DIRS.find((dir) => fs.existsSync(path.join(root, dir, 'main.ts')));
}

/**
 * The tsconfig `bcms-ext bundle` type-checks a back end with: a plugin's `tsconfig.backend.json`
 * or its back end's own tsconfig, as BCMS projects have them, else the project's `tsconfig.json`.
 */
export function backendTsconfigOf(root: string, backend: BackendDir | undefined): string {
  const candidates = backend === undefined ? [] : ['tsconfig.backend.json', `${backend}/tsconfig.json`];
  return candidates.find((file) => fs.existsSync(path.join(root, file))) ?? 'tsconfig.json';
}

/** Whether a file of a functions folder is a function's source (a .ts or .js file, not a declaration file). */
export const isFunctionSource = (file: string): boolean => /\.(ts|js)$/.test(file) && !file.endsWith('.d.ts');

/** The folder of a functions project's function files: `src/functions` (as bcms-ext create makes it) or `functions`. */
export function functionsDir(root: string): string | undefined {
  return ['src/functions', 'functions'].find((dir) => hasSources(path.join(root, dir)));
}

/** Whether a folder holds .ts or .js sources (declaration files aside). */
function hasSources(dir: string): boolean {
  return fs.existsSync(dir) && fs.statSync(dir).isDirectory() && fs.readdirSync(dir).some(isFunctionSource);
}

/** What a functions project deploys, folder by folder: each file of one is a deployment of that kind, named after the file. */
export const FUNCTIONS_PROJECT_KINDS = [
  { kind: 'function', folder: 'functions' },
  { kind: 'event', folder: 'events' },
  { kind: 'job', folder: 'jobs' },
] as const;

/**
 * A functions project's folders, side by side as BCMS has them: `src/functions`, `src/events` and
 * `src/jobs` (as bcms-ext create makes them, and BCMS v3's layout), else `functions/`, `events/`
 * and `jobs/` at the root. `base` is `src` or `''`; `folders` holds those with sources, by kind.
 * Undefined when none has any.
 */
export function functionsProjectLayout(root: string): { base: 'src' | ''; folders: Partial<Record<'function' | 'event' | 'job', string>> } | undefined {
  for (const base of ['src', ''] as const) {
    const folders: Partial<Record<'function' | 'event' | 'job', string>> = {};
    for (const { kind, folder } of FUNCTIONS_PROJECT_KINDS) {
      const dir = base === '' ? folder : `${base}/${folder}`;
      if (hasSources(path.join(root, dir))) folders[kind] = dir;
    }
    if (Object.keys(folders).length > 0) return { base, folders };
  }
  return undefined;
}

/**
 * How a project in `projectDir` depends on bcms-extensions, in a form that installs on another
 * machine as well as this one:
 * - run from a checkout of this package: `file:` and the path from the project to it, relative, so
 *   that the two folders may move together;
 * - run from a copy installed in an app (`npx --no bcms-ext` there): what that app's package.json says,
 *   a relative `file:` path (to a tarball, say) made relative to the project;
 * - else the version, `^x.y.z`.
 */
export function packageSpec(projectDir: string, packageRoot = PACKAGE_ROOT): string {
  const version = (JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
  const parent = path.dirname(packageRoot);
  if (path.basename(parent) !== 'node_modules') return `file:${relativePath(projectDir, packageRoot)}`;
  const app = path.dirname(parent);
  try {
    const declared = JSON.parse(fs.readFileSync(path.join(app, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
    const spec = declared.dependencies?.['bcms-extensions'] ?? declared.devDependencies?.['bcms-extensions'];
    if (spec?.startsWith('file:')) return `file:${relativePath(projectDir, path.resolve(app, spec.slice('file:'.length)))}`;
    if (spec !== undefined && spec !== '') return spec;
  } catch {
    // No package.json there, or not JSON: the version.
  }
  return `^${version}`;
}

function relativePath(from: string, to: string): string {
  const relative = path.relative(from, to).split(path.sep).join('/');
  return relative === '' ? '.' : relative === '..' || relative.startsWith('../') ? relative : `./${relative}`;
}

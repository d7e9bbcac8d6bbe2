import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { replacePluginNamePlaceholder } from '../../../lib/cli/bundle';
import { backendTsconfigOf, functionsDir, pluginBackendDir } from '../../../lib/cli/layout';
import { portProject, type PortResult } from '../../../lib/bcms/port/port';

const ROOT = path.resolve(__dirname, '..', '..', '..');
/** BCMS v3 projects written as BCMS users write them, with BCMS's own import lines. */
export const BCMS_V3_FIXTURES = path.join(ROOT, 'test', 'bcms', 'fixtures');
/** Where ported copies go: inside the repository (git-ignored), so that jest transforms them. */
export const PORTED_DIR = path.join(ROOT, 'test-output', 'bcms-v3');

/**
 * `reading-list`: a plugin (backend/, bcms-plugin.config.json); `todo-board`: a plugin with a ui/ as
 * plugin-starter has it; `blog-functions`: functions/*.ts; `site-customization`: a function, an
 * event and a job under src/, as BCMS's documentation lays out a customization.
 */
export type BcmsV3Fixture = 'reading-list' | 'blog-functions' | 'todo-board' | 'job-runner' | 'site-customization';

/** Copies a fixture project into `parent` (leaving out anything an install or a bundle left in it) and returns its folder. */
export function copyBcmsV3Fixture(name: BcmsV3Fixture, parent: string): string {
  const dir = path.join(parent, name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(path.join(BCMS_V3_FIXTURES, name), dir, {
    recursive: true,
    filter: (source) => !/[\\/](node_modules|bcms-bundle|dist)([\\/]|$)/.test(path.relative(BCMS_V3_FIXTURES, source)),
  });
  return dir;
}

export interface PortedBcmsV3Fixture {
  dir: string;
  port: PortResult;
  /** The plugin's name once ported (pluginName's slug); undefined for functions. */
  pluginName?: string;
  /** backend/main.ts of a plugin: its default export is the plugin. */
  backendMain?: string;
  /** functions/*.ts: each default export is a function module (createBcmsFunction). */
  functionFiles: string[];
}

/**
 * Ports a fresh copy of a fixture project into test-output/bcms-v3/<name> (or `parent`: test files
 * running side by side each need their own), with `bcms-ext port`'s
 * own code, and returns where its entry files are. In jest, `bcms-extensions` resolves to lib/
 * (the moduleNameMapper in package.json), so `require(backendMain).default` is a plugin of the
 * code under test. As `bcms-ext bundle` would, the plugin's sources get its name in place of
 * BCMS's placeholder `bcms-plugin---name` (`placeholder: false` keeps it).
 *
 * @example
 * const { backendMain } = portBcmsV3Fixture('reading-list');
 * const { functionFiles } = portBcmsV3Fixture('blog-functions');
 * const router = bcmsExtensions({
 *   plugins: [require(backendMain!).default],            // served at /api/plugin/reading-list/...
 *   functions: functionFiles.map((file) => require(file).default),
 * }, { database: { pglite: 'memory://' }, jwt: { secret } });
 */
export function portBcmsV3Fixture(name: BcmsV3Fixture, { placeholder = true, parent = PORTED_DIR }: { placeholder?: boolean; parent?: string } = {}): PortedBcmsV3Fixture {
  fs.mkdirSync(parent, { recursive: true });
  const dir = copyBcmsV3Fixture(name, parent);
  const port = portProject(dir);
  if (port.kind === 'functions') {
    const functions = path.join(dir, functionsDir(dir) ?? 'functions');
    return {
      dir,
      port,
      functionFiles: fs
        .readdirSync(functions)
        .filter((file) => file.endsWith('.ts'))
        .sort()
        .map((file) => path.join(functions, file)),
    };
  }
  const { pluginName } = JSON.parse(fs.readFileSync(path.join(dir, 'bcms-plugin.config.json'), 'utf8')) as { pluginName: string };
  if (placeholder) {
    const walk = (folder: string): void => {
      for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
        const file = path.join(folder, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (file.endsWith('.ts')) fs.writeFileSync(file, replacePluginNamePlaceholder(fs.readFileSync(file, 'utf8'), pluginName));
      }
    };
    walk(path.join(dir, 'backend'));
  }
  return { dir, port, pluginName, backendMain: path.join(dir, 'backend', 'main.ts'), functionFiles: [] };
}

/**
 * Type-checks a ported project with this repository's TypeScript (`npx tsc`), with the options
 * `bcms-ext bundle` type-checks it with (backendTsconfigOf: the one port rewrote or wrote), and
 * `bcms-extensions` resolved to this build's declarations (dist/index.d.ts: run `npm run build`
 * first), as an installed project resolves it. Resolves to tsc's exit status and output.
 */
export function typeCheckPorted(dir: string): { status: number | null; output: string } {
  const config = path.join(dir, 'tsconfig.check.json');
  fs.writeFileSync(
    config,
    `${JSON.stringify({ extends: `./${backendTsconfigOf(dir, pluginBackendDir(dir))}`, compilerOptions: { paths: { 'bcms-extensions': [path.join(ROOT, 'dist', 'index.d.ts')] } } }, null, 2)}\n`,
  );
  const tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
  const result = spawnSync(tsc, ['--noEmit', '-p', config], { cwd: dir, encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { isUrlSafe } from '../names';
import { parseArgs, UsageError, type Io } from './_io';
import { BUNDLE_DIR } from './deploy';
import { backendTsconfigOf, FUNCTIONS_PROJECT_KINDS, functionsProjectLayout, isFunctionSource, pluginBackendDir } from './layout';
import type { DeploymentKind } from '../deploy/load';
import type { BundleSignature } from '../deploy/signing';
import { signed, signingKey } from './sign';
import { sha256Hex } from '../security/digest';

export const BUNDLE_USAGE = `  bundle                                    In a plugin or functions project: type-check, bundle the
                                            back end (or each function, event and job: each file
                                            of src/functions, src/events, src/jobs) as one file with
                                            bcms-extensions external, build the UI, and write
                                            bcms-bundle/*.json with a manifest (kind, name, version,
                                            sha256). When a step fails nothing is written, and
                                            bcms-bundle/ is removed: nothing stale to deploy.
                                            In a plugin, BCMS's placeholder bcms-plugin---name
                                            becomes pluginName in the back end and the built UI.
`;

/** BCMS's stand-in for the plugin's name in its code, replaced at bundle time as BCMS's CLI does. */
export const PLUGIN_NAME_PLACEHOLDER = 'bcms-plugin---name';

/**
 * `bcms-plugin---name` replaced with the plugin's name everywhere in a text, as BCMS's CLI does
 * in the built back end and UI (bcms/cli `src/plugin.ts`), so that code can name its own plugin
 * (its URL, its collections) before it has a name.
 */
export function replacePluginNamePlaceholder(text: string, pluginName: string): string {
  return text.split(PLUGIN_NAME_PLACEHOLDER).join(pluginName);
}

interface Bundle {
  manifest: { kind: DeploymentKind; name: string; version: string; sha256: string; project: string };
  code: string;
  ui?: Record<string, string>;
  signature?: BundleSignature;
}

const NOT_A_PROJECT = 'neither bcms-plugin.config.json nor src/functions/*.ts (nor src/events/*.ts, src/jobs/*.ts) here: run it in a project made by bcms-ext create';

type Vite = { build(config: unknown): Promise<unknown>; version?: string };

/** The project's own vite (a devDependency of every generated project). */
async function projectVite(root: string): Promise<Vite> {
  let entry: string;
  try {
    entry = createRequire(path.join(root, 'package.json')).resolve('vite');
  } catch {
    throw new UsageError('vite is not installed in this project: run npm install');
  }
  return (await import(pathToFileURL(entry).href)) as Vite;
}

/** tsc --noEmit over the project (and ui/); errors are printed as tsc prints them, with file and line. */
function typeCheck(root: string, project: string, io: Io): void {
  const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
  if (!fs.existsSync(tsc)) throw new UsageError('typescript is not installed in this project: run npm install');
  const result = spawnSync(tsc, ['--noEmit', '-p', project], { cwd: root, encoding: 'utf8' });
  if (result.status !== 0) {
    io.err(`${result.stdout}${result.stderr}`);
    throw new UsageError(`type errors in ${path.relative(root, path.dirname(path.resolve(root, project))) || '.'} (above): no bundle written`);
  }
}

/**
 * The output option that keeps a bundle in one file: Vite 8 (Rolldown) calls it `codeSplitting:
 * false` and warns on the old name; Vite 7 and older (Rollup), which a ported project may keep,
 * know only `inlineDynamicImports`.
 */
function oneFile(vite: Vite): Record<string, boolean> {
  const major = Number(/^(\d+)\./.exec(vite.version ?? '')?.[1] ?? 8);
  return major >= 8 ? { codeSplitting: false } : { inlineDynamicImports: true };
}

/** One CommonJS file from an entry, everything bundled but bcms-extensions and Node's own modules. */
async function bundleBackend(vite: Vite, root: string, entry: string): Promise<string> {
  let output: unknown;
  try {
    output = await vite.build({
      configFile: false,
      root,
      logLevel: 'silent',
      ssr: { noExternal: true, external: ['bcms-extensions'] },
      build: {
        ssr: entry,
        write: false,
        minify: false,
        target: 'node20',
        // One file: an import() of a dependency (mongoose's optional transports) is inlined, never a chunk beside it.
        rollupOptions: { external: ['bcms-extensions', /^node:/], output: { format: 'cjs', exports: 'named', ...oneFile(vite) } },
      },
    });
  } catch (error) {
    throw new UsageError(`the build of ${path.relative(root, entry)} failed: ${(error as Error).message}`);
  }
  const outputs = (Array.isArray(output) ? output : [output]) as { output: { type: string; code?: string }[] }[];
  const chunks = outputs[0]?.output.filter((item) => item.type === 'chunk') ?? [];
  const chunk = chunks[0];
  if (chunk?.code === undefined) throw new UsageError(`the build of ${path.relative(root, entry)} produced no code`);
  // A bundle is one file: a second chunk would be required at run time, and is not there.
  if (chunks.length > 1) throw new UsageError(`the build of ${path.relative(root, entry)} was split into ${chunks.length} files; a bundle must be one`);
  return chunk.code;
}

/** One entry bundled as `bcms-ext bundle` bundles a back end or a function, with the project's vite. */
export async function bundleEntry(root: string, entry: string): Promise<string> {
  return bundleBackend(await projectVite(root), root, entry);
}

/** Files of a built UI whose text may carry the plugin-name placeholder. */
const UI_TEXT = /\.(?:html|m?js|css|json|svg|map|txt)$/;

/** The UI, built with its own Vite config into ui/dist, as path → base64, with the placeholder replaced in its text files. */
async function buildUi(vite: Vite, root: string, pluginName: string): Promise<Record<string, string>> {
  const ui = path.join(root, 'ui');
  // In ui/, as `npm run build` there would: Tailwind and PostCSS read their configs and content globs from the working directory.
  const cwd = process.cwd();
  process.chdir(ui);
  try {
    await vite.build({ root: ui, configFile: path.join(ui, 'vite.config.mjs'), logLevel: 'warn' });
  } catch (error) {
    throw new UsageError(`the UI build failed: ${(error as Error).message}`);
  } finally {
    process.chdir(cwd);
  }
  const files: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else {
        const content = UI_TEXT.test(entry.name) ? Buffer.from(replacePluginNamePlaceholder(fs.readFileSync(full, 'utf8'), pluginName)) : fs.readFileSync(full);
        files[path.relative(path.join(ui, 'dist'), full).split(path.sep).join('/')] = content.toString('base64');
      }
    }
  };
  walk(path.join(ui, 'dist'));
  return files;
}

const kb = (text: string): string => `${(Buffer.byteLength(text) / 1024).toFixed(1)} KB`;

export async function runBundle(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  parseArgs(args, {});
  const pkgFile = path.join(cwd, 'package.json');
  if (!fs.existsSync(pkgFile)) throw new UsageError('no package.json here: run it in a project made by bcms-ext create');
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { name?: string; version?: string };
  const version = pkg.version ?? '0.0.0';
  const project = pkg.name ?? path.basename(cwd);
  const out = path.join(cwd, BUNDLE_DIR);
  try {
    await bundleProject(cwd, out, version, project, io);
  } catch (error) {
    // A failed run leaves nothing to deploy: bcms-ext deploy would send the previous bundles as if they were this code.
    if (fs.existsSync(out)) {
      fs.rmSync(out, { recursive: true, force: true });
      io.err(`Removed ${BUNDLE_DIR}/: it held the bundles of the code before this change.\n`);
    }
    throw error;
  }
  return 0;
}

async function bundleProject(cwd: string, out: string, version: string, project: string, io: Io): Promise<void> {
  const configFile = path.join(cwd, 'bcms-plugin.config.json');
  const bundles: Bundle[] = [];
  // Before vite is looked for: outside a project, "vite is not installed" would send people the wrong way.
  if (!fs.existsSync(configFile) && functionsProjectLayout(cwd) === undefined) throw new UsageError(NOT_A_PROJECT);
  const vite = await projectVite(cwd);

  if (fs.existsSync(configFile)) {
    const { pluginName, projectId } = JSON.parse(fs.readFileSync(configFile, 'utf8')) as { pluginName?: unknown; projectId?: unknown };
    if (!isUrlSafe(pluginName)) {
      throw new UsageError('bcms-plugin.config.json needs { "pluginName": "<name>" }, a URL-safe name (letters, digits, "-", "_", ".", "~"); a BCMS v3 project: run bcms-ext port first');
    }
    const backend = pluginBackendDir(cwd);
    if (backend === undefined) throw new UsageError("no backend/main.ts (or src/backend/main.ts) here: the plugin's entry, export default createBcmsPlugin(...)");
    io.out(`Type-checking ${backend}/... `);
    typeCheck(cwd, backendTsconfigOf(cwd, backend), io);
    if (fs.existsSync(path.join(cwd, 'ui', 'tsconfig.json'))) typeCheck(cwd, 'ui/tsconfig.json', io);
    io.out(`ok\nBundling ${backend}/main.ts... `);
    const code = replacePluginNamePlaceholder(await bundleBackend(vite, cwd, path.join(cwd, backend, 'main.ts')), pluginName);
    io.out(`${kb(code)}\n`);
    const plugin = typeof projectId === 'string' && projectId !== '' ? projectId : project;
    const bundle: Bundle = { manifest: { kind: 'plugin', name: pluginName, version, sha256: sha256Hex(code), project: plugin }, code };
    if (fs.existsSync(path.join(cwd, 'ui', 'index.html'))) {
      io.out('Building ui/... ');
      bundle.ui = await buildUi(vite, cwd, pluginName);
      io.out(`${Object.keys(bundle.ui).length} files\n`);
    }
    bundles.push(bundle);
  } else {
    // src/functions, src/events, src/jobs as bcms-ext create makes them (and BCMS v3 has them);
    // functions/ and its siblings at the root as some BCMS v3 projects have them.
    const layout = functionsProjectLayout(cwd);
    if (layout === undefined) throw new UsageError(NOT_A_PROJECT);
    const checked = layout.base === 'src' ? 'src' : (Object.values(layout.folders)[0] as string);
    io.out(`Type-checking ${checked}/... `);
    typeCheck(cwd, 'tsconfig.json', io);
    io.out('ok\n');
    // One bundle per file, named after it (src/jobs/tick.ts is the job "tick"): functions first, then events, then jobs.
    for (const { kind } of FUNCTIONS_PROJECT_KINDS) {
      const folder = layout.folders[kind];
      if (folder === undefined) continue;
      const dir = path.join(cwd, folder);
      for (const file of fs.readdirSync(dir).filter(isFunctionSource).sort()) {
        const name = file.replace(/\.(ts|js)$/, '');
        if (kind !== 'function' && !isUrlSafe(name))
          throw new UsageError(`${folder}/${file}: a ${kind} is named after its file, and "${name}" is not URL-safe (letters, digits, "-", "_", ".", "~"): rename the file`);
        io.out(`Bundling ${folder}/${file}... `);
        const code = await bundleBackend(vite, cwd, path.join(dir, file));
        io.out(`${kb(code)}\n`);
        bundles.push({ manifest: { kind, name, version, sha256: sha256Hex(code), project }, code });
      }
    }
  }

  // Signed by the author when BCMS_SIGNING_KEY_FILE names their key (a service with deploy.trustedKeys runs nothing else).
  const key = signingKey(io, cwd);
  const written = key === undefined ? bundles : bundles.map((bundle) => signed(bundle, key));
  if (key !== undefined) io.out(`Signed with ${path.relative(cwd, key.file) || key.file} (key ${written[0]?.signature?.keyId ?? ''})\n`);

  // Only now, with every step done, the new bundles replace the old.
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  for (const bundle of written) {
    const file = path.join(out, `${bundle.manifest.kind}-${bundle.manifest.name}.json`);
    fs.writeFileSync(file, JSON.stringify(bundle));
    io.out(`Wrote ${path.relative(cwd, file)} (${bundle.manifest.kind} ${bundle.manifest.name} ${version}, sha256 ${bundle.manifest.sha256.slice(0, 12)}...)\n`);
  }
}

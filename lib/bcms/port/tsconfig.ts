/**
 * `bcms-ext port`'s part for tsconfig files: BCMS projects were written for TypeScript 4, and the
 * TypeScript `bcms-ext bundle` runs (7) refuses options that have since gone. Each rule below
 * answers one of its errors; everything else the author set stays as it was.
 */
import path from 'node:path';

/** Options TypeScript 7 no longer knows (TS5023) or has removed (TS5102): dropped. */
const GONE = [
  'importsNotUsedAsValues',
  'preserveValueImports',
  'keyofStringsOnly',
  'suppressImplicitAnyIndexErrors',
  'suppressExcessPropertyErrors',
  'noStrictGenericChecks',
  'charset',
  'out',
  'noImplicitUseStrict',
  'downlevelIteration',
];
/** Values TypeScript 7 has removed (TS5108): the option is dropped, its default is what `false` used to turn off. */
const GONE_FALSE = ['esModuleInterop', 'allowSyntheticDefaultImports', 'alwaysStrict'];
/** Module resolutions TypeScript 7 has removed: `bundler` is what `bcms-ext bundle` (vite) does. */
const OLD_RESOLUTION = new Set(['node', 'node10', 'classic']);
/** Module kinds `moduleResolution: bundler` refuses. */
const OLD_MODULE = new Set(['commonjs', 'amd', 'umd', 'system', 'none']);
/** Where BCMS projects point `paths` and `include` at BCMS's own sources: bcms-extensions replaces them. */
const BCMS_SOURCES = /(^|\/)node_modules\/@becomes\//;

type Json = Record<string, unknown>;

/** JSON with comments and trailing commas, as tsconfig files may be written. */
export function parseJsonc(text: string): unknown {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    if (char === '"') {
      const end = stringEnd(text, i);
      out += text.slice(i, end);
      i = end - 1;
    } else if (char === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
      out += '\n';
    } else if (char === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end === -1 ? text.length : end + 1;
    } else {
      out += char;
    }
  }
  return JSON.parse(out.replace(/,(\s*[}\]])/g, '$1'));
}

function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i + 1;
}

/**
 * Module names that `paths` sends to BCMS's sources: to its back end (`@bcms/*` → cms-backend),
 * and to its UI kit (`@bcms-ui/*` → the `bcms-ui/` copy of cms-ui, `@bcms-components` → cms-ui).
 */
export function bcmsPathAliases(config: unknown): { backend: string[]; ui: string[] } {
  const paths = ((config as Json | undefined)?.compilerOptions as Json | undefined)?.paths;
  const aliases = { backend: [] as string[], ui: [] as string[] };
  if (paths === null || typeof paths !== 'object') return aliases;
  for (const [alias, targets] of Object.entries(paths as Record<string, unknown>)) {
    if (alias.startsWith('@becomes/') || !Array.isArray(targets)) continue;
    const name = alias.replace(/\/\*$/, '');
    if (targets.some((target) => /node_modules\/@becomes\/cms-backend\b/.test(String(target)))) aliases.backend.push(name);
    else if (targets.some((target) => /node_modules\/@becomes\/cms-ui\b|(^|\/)bcms-ui(\/|$)/.test(String(target)))) aliases.ui.push(name);
  }
  return aliases;
}

/**
 * Rewrites a parsed tsconfig (`file`'s) in place for TypeScript 7 and `bcms-ext bundle`; returns
 * what it changed, one line each (none: it was fine).
 */
export function portTsconfig(config: Json, file: string): string[] {
  const changes: string[] = [];
  config.compilerOptions ??= {};
  const options = config.compilerOptions as Json;
  for (const name of GONE) {
    if (name in options) {
      delete options[name];
      changes.push(`${name} removed (TypeScript 7 has no such option)`);
    }
  }
  for (const name of GONE_FALSE) {
    if (options[name] === false) {
      delete options[name];
      changes.push(`${name}: false removed (TypeScript 7 has it always on)`);
    }
  }
  if (typeof options.target === 'string' && /^es[35]$/i.test(options.target)) {
    changes.push(`target ${options.target} → ES2020 (TypeScript 7 has no ES3/ES5 target)`);
    options.target = 'ES2020';
  }
  const resolution = typeof options.moduleResolution === 'string' ? options.moduleResolution.toLowerCase() : undefined;
  if (resolution !== undefined && OLD_RESOLUTION.has(resolution)) {
    changes.push(`moduleResolution ${String(options.moduleResolution)} → bundler (how bcms-ext bundle resolves modules)`);
    options.moduleResolution = 'bundler';
  }
  if (options.moduleResolution === 'bundler' && (options.module === undefined || OLD_MODULE.has(String(options.module).toLowerCase()))) {
    changes.push(`module ${String(options.module ?? '(unset)')} → esnext (moduleResolution bundler needs it; bcms-ext bundle writes CommonJS itself)`);
    options.module = 'esnext';
  }
  if (options.jsx === 'preserve' && options.jsxImportSource === undefined) {
    options.jsxImportSource = 'vue';
    changes.push('jsxImportSource: vue (Vue 3.4 and later no longer declare JSX for every project)');
  }
  if (options.skipLibCheck !== true) {
    // This package's declarations name express's types, which a BCMS project has no @types/express for (TS7016).
    options.skipLibCheck = true;
    changes.push("skipLibCheck: true (the declarations in node_modules, bcms-extensions' among them, are not type-checked: a BCMS project has no @types/express)");
  }
  portPaths(options, path.dirname(file), changes);
  if (Array.isArray(config.include)) {
    const kept = config.include.filter((entry) => !BCMS_SOURCES.test(String(entry)));
    if (kept.length !== config.include.length) {
      changes.push("include: BCMS's own sources (node_modules/@becomes/...) removed");
      config.include = kept;
    }
  }
  return changes;
}

/**
 * `baseUrl` is gone in TypeScript 7 and `paths` must be relative: each target becomes relative
 * to the tsconfig's folder, and aliases of BCMS's sources go (their imports now name
 * bcms-extensions).
 */
function portPaths(options: Json, dir: string, changes: string[]): void {
  const baseUrl = typeof options.baseUrl === 'string' ? options.baseUrl : undefined;
  if (baseUrl !== undefined) {
    delete options.baseUrl;
    changes.push('baseUrl removed (TypeScript 7 has no such option; paths are relative to the tsconfig)');
  }
  const paths = options.paths as Record<string, unknown> | undefined;
  if (paths === null || typeof paths !== 'object') return;
  const base = path.resolve(dir, baseUrl ?? '.');
  const ported: Record<string, string[]> = {};
  const dropped: string[] = [];
  let moved = false;
  for (const [alias, targets] of Object.entries(paths)) {
    const list = Array.isArray(targets) ? targets.map(String) : [];
    if (list.some((target) => BCMS_SOURCES.test(target) || /(^|\/)bcms-ui(\/|$)/.test(target))) {
      dropped.push(alias);
      continue;
    }
    ported[alias] = list.map((target) => {
      if (target.startsWith('./') || target.startsWith('../')) return baseUrl === undefined ? target : relativeTo(dir, path.resolve(base, target));
      moved = true;
      return relativeTo(dir, path.resolve(base, target));
    });
    if (baseUrl !== undefined && ported[alias]?.join() !== list.join()) moved = true;
  }
  if (dropped.length > 0) changes.push(`paths ${dropped.join(', ')} removed (BCMS's own sources; those imports now name bcms-extensions)`);
  if (moved) changes.push("paths made relative to the tsconfig's folder (TypeScript 7 refuses non-relative ones)");
  if (Object.keys(ported).length === 0) delete options.paths;
  else options.paths = ported;
}

function relativeTo(dir: string, target: string): string {
  const relative = path.relative(dir, target).split(path.sep).join('/');
  return relative === '..' || relative.startsWith('../') ? relative : `./${relative}`;
}

/**
 * `bcms-ext port`'s part for source files: the module names of BCMS's imports, the namespace
 * imports TypeScript 4 let a file call, and the names this package does not export.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../../manifest';

/** The package every BCMS back-end module name is replaced with. */
export const PACKAGE = 'bcms-extensions';
/** BCMS's back end and purple-cheetah with its modules: what the extension interface replaces. */
const BCMS_MODULE = /^@becomes\/(?:cms-backend|purple-cheetah)(?:$|[-/])/;
/** Comments, template literals and string literals: the tokens an import's module name hides among. */
const TOKEN = /\/\/[^\n]*|\/\*[\s\S]*?\*\/|`(?:\\[\s\S]|[^\\`])*`|'((?:\\.|[^\\'\n])*)'|"((?:\\.|[^\\"\n])*)"/g;

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
  if (call) return word === 'require' || word === 'import';
  // Sass's @use and @forward name modules too (`@import` is `import` here).
  return word === 'from' || word === 'import' || ((word === 'use' || word === 'forward') && source[i] === '@');
}

/** Module names a project's tsconfig `paths` gave BCMS's sources: its back end (`@bcms/*`) and its UI kit (`@bcms-ui/*`). */
export interface BcmsAliases {
  backend: readonly string[];
  ui: readonly string[];
}

const NO_ALIASES: BcmsAliases = { backend: [], ui: [] };
const UI_KIT = `${PACKAGE}/ui`;
const isUnder = (name: string, alias: string): boolean => name === alias || name.startsWith(`${alias}/`);

/**
 * What a module name of BCMS's becomes: `bcms-extensions` for its back end and purple-cheetah,
 * `bcms-extensions/ui` (and its stylesheet and Tailwind preset) for `@becomes/cms-ui`, for the
 * aliases a tsconfig gave them, and for a relative path into the `bcms-ui/` folder that BCMS's
 * postinstall copied cms-ui's sources to (`fromDir`: the importing file's folder); else undefined.
 */
export function bcmsModuleTarget(module: string, aliases: BcmsAliases = NO_ALIASES, fromDir?: string): string | undefined {
  // webpack's `~` (a package, in a stylesheet): Vite resolves packages without it.
  const name = module.startsWith('~@becomes/') ? module.slice(1) : module;
  if (BCMS_MODULE.test(name) || aliases.backend.some((alias) => isUnder(name, alias))) return PACKAGE;
  if (/^@becomes\/cms-ui\/(?:tailwind\.config|tw)(?:\.c?js)?$/.test(name)) return `${UI_KIT}/tailwind.config.cjs`;
  if (/^@becomes\/cms-ui\/styles(?:\/|$)/.test(name)) return `${UI_KIT}/styles.css`;
  if (/^@becomes\/cms-ui(?:$|\/)/.test(name) || aliases.ui.some((alias) => isUnder(name, alias))) return UI_KIT;
  if (fromDir !== undefined && name.startsWith('.')) {
    const parts = path.resolve(fromDir, name).split(path.sep);
    const at = parts.lastIndexOf('bcms-ui');
    if (at !== -1 && !fs.existsSync(parts.slice(0, at + 1).join(path.sep))) return UI_KIT;
  }
  return undefined;
}

/**
 * Replaces the module name of every import, `export ... from`, `require()` and `import()` of
 * BCMS's packages (see `bcmsModuleTarget`) with what replaces it here, keeping its quotes; nothing
 * else in the text changes (`import type` stays, no two imports are merged). Returns the text and
 * the module names it replaced, in order.
 */
export function rewriteBcmsImports(source: string, aliases: BcmsAliases = NO_ALIASES, fromDir?: string): { text: string; replaced: string[] } {
  const replaced: string[] = [];
  const text = source.replace(TOKEN, (token: string, single: string | undefined, double: string | undefined, offset: number) => {
    const name = single ?? double;
    if (name === undefined || !isModuleName(source, offset)) return token;
    const target = bcmsModuleTarget(name, aliases, fromDir);
    if (target === undefined) return token;
    replaced.push(name);
    return `${token[0]}${target}${token[0]}`;
  });
  return { text, replaced };
}

const NAMESPACE_IMPORT = /\bimport\s+\*\s+as\s+([A-Za-z_$][\w$]*)\s+from\s+(['"])([^'"]+)\2/g;

/**
 * `import * as sha1 from 'crypto-js/sha1'`, then `sha1(...)`: TypeScript 4 compiled it to a
 * `require()`, whose value a file could call; TypeScript 7 and a bundler give a namespace object,
 * which cannot be called. Such an import of a package (never a file of the project) whose binding
 * the file calls or `new`s becomes a default import, which is the package's `module.exports`.
 * Returns the text and the bindings it changed.
 */
export function rewriteCalledNamespaceImports(source: string): { text: string; changed: string[] } {
  const changed: string[] = [];
  const text = source.replace(NAMESPACE_IMPORT, (statement: string, binding: string, quote: string, module: string) => {
    if (module.startsWith('.') || module.startsWith('/')) return statement;
    const rest = source.replace(statement, '');
    const called = new RegExp(`(?<![\\w$.])${binding.replace(/\$/g, '\\$')}\\s*\\(|\\bnew\\s+${binding.replace(/\$/g, '\\$')}\\b`).test(rest);
    if (!called) return statement;
    changed.push(binding);
    return `import ${binding} from ${quote}${module}${quote}`;
  });
  return { text, changed };
}

const NAMED_IMPORT = /\b(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s*from\s*['"]([^'"]+)['"]/g;

/** The names a file imports (or re-exports) from `module` in braces: `{ a, type B, c as d }` gives a, B, c. */
export function namedImports(source: string, module = PACKAGE): string[] {
  const names: string[] = [];
  for (const match of source.matchAll(NAMED_IMPORT)) {
    if (match[2] !== module) continue;
    for (const part of (match[1] as string).split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)[0]
        ?.trim();
      if (name !== undefined && name !== '') names.push(name);
    }
  }
  return names;
}

const exported = new Map<string, Set<string>>();

/** Every name `bcms-extensions` (or `bcms-extensions/ui`) exports, values and types, read from its declarations (or its sources, unbuilt). */
export function exportedNames(module: string = PACKAGE): ReadonlySet<string> {
  const known = exported.get(module);
  if (known !== undefined) return known;
  const names = new Set<string>();
  const [built, source] = module === UI_KIT ? ['dist/bcms/ui/index.d.ts', 'lib/bcms/ui/index.ts'] : ['dist/index.d.ts', 'lib/index.ts'];
  const file = path.join(PACKAGE_ROOT, built);
  collectExports(fs.existsSync(file) ? file : path.join(PACKAGE_ROOT, source), names, new Set());
  exported.set(module, names);
  return names;
}

function collectExports(file: string, names: Set<string>, seen: Set<string>): void {
  if (seen.has(file) || !fs.existsSync(file)) return;
  seen.add(file);
  const source = fs.readFileSync(file, 'utf8');
  for (const match of source.matchAll(/\bexport\s+(?:type\s+)?\{([^}]*)\}/g)) {
    for (const part of (match[1] as string).split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .pop()
        ?.trim();
      if (name !== undefined && name !== '') names.add(name);
    }
  }
  for (const match of source.matchAll(/\bexport\s+(?:declare\s+)?(?:const|let|var|function|class|interface|type|enum|namespace|abstract\s+class)\s+([A-Za-z_$][\w$]*)/g)) {
    names.add(match[1] as string);
  }
  for (const match of source.matchAll(/\bexport\s+\*\s+from\s+['"](\.[^'"]+)['"]/g)) {
    const base = path.resolve(path.dirname(file), match[1] as string);
    const next = [`${base}.d.ts`, `${base}.ts`, path.join(base, 'index.d.ts'), path.join(base, 'index.ts')].find((candidate) => fs.existsSync(candidate));
    if (next !== undefined) collectExports(next, names, seen);
  }
}

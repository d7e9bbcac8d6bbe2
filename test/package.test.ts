import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

// The built package, as a user gets it: `npm test` builds dist/ first (the pretest script).
const root = path.resolve(__dirname, '..');
const run = (args: string[]) => execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
/** The files `npm pack` puts in the tarball, by their paths in it. */
const packedFiles = (): string[] =>
  (JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' })) as { files: { path: string }[] }[])[0]?.files.map((file) => file.path) ?? [];

/**
 * Every link target of a Markdown page: inline links and images (`[text](target "title")`,
 * `<target>` too), reference definitions (`[label]: target`), and HTML's `src` and `href` (an
 * `<img>` in a page is a link to its file as much as `![alt](file)` is). Code, fenced or in
 * backticks, links nowhere.
 */
function linksOf(page: string): string[] {
  const markdown = page.replace(/^[ \t]*(`{3,}|~{3,})[\s\S]*?^[ \t]*\1/gm, '').replace(/(`+)[\s\S]*?\1/g, '');
  const inline = [...markdown.matchAll(/\]\(\s*(?:<([^>]*)>|([^)\s]+))/g)].map((match) => match[1] ?? match[2]);
  const definitions = [...markdown.matchAll(/^ {0,3}\[[^\]]+\]:\s*(?:<([^>]*)>|(\S+))/gm)].map((match) => match[1] ?? match[2]);
  const attributes = [...markdown.matchAll(/\b(?:src|href)\s*=\s*(?:"([^"]*)"|'([^']*)')/gi)].map((match) => match[1] ?? match[2]);
  return [...inline, ...definitions, ...attributes].filter((link): link is string => link !== undefined && link !== '');
}

const CORE = [
  'BcmsHttpError',
  'HTTPStatus',
  'JWTPermissionName',
  'JWTRoleName',
  'MIGRATIONS_DIRECTORY',
  'MIGRATIONS_TABLE',
  'SIGNATURE_ALGORITHMS',
  'bcmsExtensions',
  'blockApiKey',
  'createApiKey',
  'BCMSEventConfigMethod',
  'BCMSEventConfigScope',
  'createBcmsEvent',
  'createBcmsFunction',
  'createBcmsJob',
  'createBcmsPlugin',
  'createController',
  'createControllerMethod',
  'createJwtProtectionPreRequestHandler',
  'deleteApiKey',
  'errorCodes',
  'keepRawBody',
  'listApiKeys',
  'migrate',
];
/** The BCMS layer's names (lib/bcms/index.ts), exported beside the core's while the layer is there. */
const BCMS_LAYER = [
  'BCMSConfig',
  'BCMSEventManager',
  'BCMSRepo',
  'BCMSRouteProtection',
  'FSDBEntitySchema',
  'FilesRootError',
  'MAX_DOCUMENT_BYTES',
  'MongoDBEntitySchemaString',
  'ObjectUtility',
  'ObjectUtilityError',
  'StringUtility',
  'createDocumentRepository',
  'createFSDBRepository',
  'createMongoDBCachedRepository',
  'objectSchemaToMongoDBSchema',
  'useBcmsEventManager',
  'useFS',
  'useLogger',
  'useObjectUtility',
  'useSocket',
  'useStringUtility',
];
const PUBLIC = [...CORE, ...(fs.existsSync(path.join(root, 'lib', 'bcms')) ? BCMS_LAYER : [])].sort();

describe('the built package', () => {
  test('require("bcms-extensions") gives the public API', () => {
    const out = run(['-e', 'console.log(JSON.stringify(Object.keys(require("bcms-extensions")).sort()))']);
    expect(JSON.parse(out)).toEqual(PUBLIC);
  });

  test('import { ... } from "bcms-extensions" gives the same names', () => {
    const script =
      'import * as m from "bcms-extensions"; import { bcmsExtensions } from "bcms-extensions"; console.log(JSON.stringify({ names: Object.keys(m).filter((k) => k !== "default" && k !== "__esModule").sort(), fn: typeof bcmsExtensions }));';
    const out = JSON.parse(run(['--input-type=module', '-e', script]));
    expect(out).toEqual({ names: PUBLIC, fn: 'function' });
  });

  test('bcms-extensions/client: the signing client, by require and by import', () => {
    const names = '["BcmsClientError","FunctionCallError","createClient","createFunctionClient","signRequest"]';
    expect(run(['-e', 'console.log(JSON.stringify(Object.keys(require("bcms-extensions/client")).sort()))']).trim()).toBe(names);
    const script = 'import * as m from "bcms-extensions/client"; console.log(JSON.stringify(Object.keys(m).filter((k) => k !== "default" && k !== "__esModule").sort()));';
    expect(run(['--input-type=module', '-e', script]).trim()).toBe(names);
  });

  test('bcms-extensions/testing: the test kit, by require and by import, with its declarations', () => {
    const names = '["createTestService"]';
    expect(run(['-e', 'console.log(JSON.stringify(Object.keys(require("bcms-extensions/testing")).sort()))']).trim()).toBe(names);
    const script = 'import * as m from "bcms-extensions/testing"; console.log(JSON.stringify(Object.keys(m).filter((k) => k !== "default" && k !== "__esModule").sort()));';
    expect(run(['--input-type=module', '-e', script]).trim()).toBe(names);
    const declarations = fs.readFileSync(path.join(root, 'dist', 'testing', 'index.d.ts'), 'utf8');
    expect(declarations).toContain('createTestService');
    expect(declarations).toContain('TestService');
    // The kit builds the router the package's entry point builds: with its layers.
    expect(fs.readFileSync(path.join(root, 'dist', 'testing', 'service.js'), 'utf8')).toContain('require("../index")');
  });

  test('bcms-extensions/sdk: the types of window.bcms.sdk, and the browser code the router serves', () => {
    expect(run(['-e', 'console.log(require.resolve("bcms-extensions/sdk"))']).trim()).toBe(path.join(root, 'dist', 'sdk', 'global.js'));
    expect(fs.readFileSync(path.join(root, 'dist', 'sdk', 'global.d.ts'), 'utf8')).toContain('bcms: BcmsGlobal;');
    for (const file of ['sdk.js', 'shell.js', 'activity.js']) expect(fs.existsSync(path.join(root, 'dist', 'browser', 'browser', file))).toBe(true);
    // The shell's API view: Swagger UI copied from swagger-ui-dist (a dev dependency), with its license and notice.
    for (const file of ['api.js', 'api.css', 'swagger-ui-bundle.js', 'swagger-ui.css', 'swagger-ui.LICENSE.txt', 'swagger-ui.NOTICE.txt']) {
      expect([file, fs.existsSync(path.join(root, 'dist', 'browser', 'browser', file))]).toEqual([file, true]);
    }
  });

  test('bcms-extensions/ui: an ES module that Node loads by import and by require (vue is an optional peer), with declarations', () => {
    const names =
      'BCMSButton,BCMSCodeEditor,BCMSIcon,BCMSManagerNav,BCMSModalWrapper,BCMSPasswordInput,BCMSPluginLayout,BCMSSpinner,BCMSSpinnerSmall,BCMSTextAreaInput,BCMSTextInput,BCMSToggleInput,clickOutside,cy,tooltip';
    expect(run(['--input-type=module', '-e', 'import * as ui from "bcms-extensions/ui"; console.log(Object.keys(ui).sort().join(","))']).trim()).toBe(names);
    expect(run(['-e', 'console.log(Object.keys(require("bcms-extensions/ui")).sort().join(","))']).trim()).toBe(names);
    const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string>; peerDependenciesMeta: Record<string, { optional?: boolean }> };
    expect([manifest.peerDependencies.vue, manifest.peerDependenciesMeta.vue]).toEqual(['^3.4.0', { optional: true }]);
    // Its declarations name their modules as Node resolves them (with extensions).
    expect(fs.readFileSync(path.join(root, 'dist', 'bcms', 'ui', 'index.d.ts'), 'utf8')).toMatch(/from '\.\/components\.js'/);
  });

  test('no source maps: the tarball has dist/, not lib/, so a map would send a stack trace to lib/*.ts files an installed package lacks', () => {
    const shipped = packedFiles();
    expect(shipped.filter((file) => file.endsWith('.map'))).toEqual([]);
    const pointing = shipped.filter((file) => /\.[cm]?js$/.test(file) && /^\/\/# sourceMappingURL=/m.test(fs.readFileSync(path.join(root, file), 'utf8')));
    expect(pointing).toEqual([]);
  });

  test('the bin, bcms-ext, is executable as npx runs it', () => {
    const bin = path.join(root, 'dist', 'cli', 'bin.js');
    expect(fs.statSync(bin).mode & 0o111).not.toBe(0);
    expect(execFileSync(bin, ['help'], { cwd: root, encoding: 'utf8' })).toMatch(/^Usage: bcms-ext <command>/);
  });

  test('the tarball carries the licence (MIT, as package.json says) and the changelog', () => {
    expect(packedFiles()).toEqual(expect.arrayContaining(['LICENSE', 'CHANGELOG.md', 'README.md', 'package.json']));
    expect(fs.readFileSync(path.join(root, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n/);
    expect((JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { license: string }).license).toBe('MIT');
  });

  test('the shipped docs link only to what ships (or to absolute URLs); no declaration or migration names DESIGN.md, which is not in it', () => {
    const shipped = new Set(packedFiles());
    const broken: string[] = [];
    const docs = [...shipped].filter((name) => name.endsWith('.md'));
    expect(docs).toEqual(expect.arrayContaining(['README.md', 'docs/plugin-uis.md']));
    for (const file of docs) {
      for (const link of linksOf(fs.readFileSync(path.join(root, file), 'utf8'))) {
        if (/^([a-z][a-z0-9+.-]*:|#)/i.test(link)) continue; // an absolute URL, or a place in the page itself
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(link.split(/[?#]/)[0] ?? '')));
        if (!shipped.has(target)) broken.push(`${file} -> ${link}`);
      }
    }
    expect(broken).toEqual([]);
    const naming = [...shipped].filter((name) => /\.(d\.ts|js)$/.test(name) && fs.readFileSync(path.join(root, name), 'utf8').includes('DESIGN.md'));
    expect(naming).toEqual([]);
  });

  test('every name the package exports has its TSDoc (a /** comment on its declaration, through re-exports)', () => {
    const dist = path.join(root, 'dist');
    const moduleFile = (from: string, specifier: string): string => {
      const base = path.join(path.dirname(from), specifier.replace(/\.js$/, ''));
      return fs.existsSync(`${base}.d.ts`) ? `${base}.d.ts` : path.join(base, 'index.d.ts');
    };
    const documented = (file: string, name: string): boolean => {
      const text = fs.readFileSync(file, 'utf8');
      const declared = new RegExp(`(/\\*\\*(?:(?!\\*/)[\\s\\S])*\\*/\\s*)?(?://[^\\n]*\\n\\s*)*export (?:declare )?(?:abstract )?(?:const|function|class|interface|type|enum) ${name}\\b`).exec(text);
      if (declared !== null) return declared[1] !== undefined;
      for (const [, names, from] of text.matchAll(/export (?:type )?\{([^}]*)\} from '([^']+)'/g)) {
        for (const part of (names ?? '').split(',').map((each) => each.trim().replace(/^type /, ''))) {
          const [original, alias] = part.split(/\s+as\s+/);
          if ((alias ?? original) === name && original !== undefined) return documented(moduleFile(file, from ?? ''), original);
        }
      }
      throw new Error(`${name} is not declared in ${path.relative(dist, file)}`);
    };
    const exported = (file: string): [string, string][] => {
      const text = fs.readFileSync(file, 'utf8');
      const names: [string, string][] = [];
      for (const [, list] of text.matchAll(/export (?:type )?\{([^}]*)\}(?: from '[^']+')?;/g)) {
        for (const part of (list ?? '')
          .split(',')
          .map((each) => each.trim().replace(/^type /, ''))
          .filter(Boolean))
          names.push([file, part.split(/\s+as\s+/).pop() ?? part]);
      }
      for (const [, from] of text.matchAll(/export \* from '([^']+)'/g)) names.push(...exported(moduleFile(file, from ?? '')));
      return names;
    };
    const names = exported(path.join(dist, 'index.d.ts'));
    expect(names.length).toBeGreaterThan(100);
    expect(names.filter(([file, name]) => !documented(file, name)).map(([, name]) => name)).toEqual([]);
  });

  test('declarations are emitted next to the code', () => {
    expect(run(['-e', 'console.log(require("fs").existsSync(require.resolve("bcms-extensions").replace(/\\.js$/, ".d.ts")))']).trim()).toBe('true');
  });
});

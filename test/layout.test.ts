import fs from 'node:fs';
import path from 'node:path';

const LIB = path.join(__dirname, '..', 'lib');
const TEST = __dirname;

function filesUnder(dir: string, extension: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(full, extension);
    return entry.name.endsWith(extension) ? [full] : [];
  });
}

/** The lib/ files a file imports (type-only imports included: a circle of types is a circle too). */
function importsOf(file: string): string[] {
  const source = fs.readFileSync(file, 'utf8');
  return [...source.matchAll(/^(?:import|export)\b[^;]*?from\s+'(\.{1,2}\/[^']+)'/gm)].flatMap((match) => {
    const target = path.resolve(path.dirname(file), match[1] as string);
    return [`${target}.ts`, path.join(target, 'index.ts')].filter((candidate) => fs.existsSync(candidate)).slice(0, 1);
  });
}

describe('the layout of lib/', () => {
  test('no circle of imports', () => {
    const graph = new Map(filesUnder(LIB, '.ts').map((file) => [file, importsOf(file)]));
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const trail: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      trail.push(file);
      for (const next of graph.get(file) ?? []) {
        if (state.get(next) === 'open') circles.push([...trail.slice(trail.indexOf(next)), next].map((f) => path.relative(LIB, f)).join(' -> '));
        else if (!state.has(next)) visit(next);
      }
      trail.pop();
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file);
    expect(graph.size).toBeGreaterThan(40);
    expect(circles).toEqual([]);
  });

  test('router.ts only composes: the request path lives in its own folders', () => {
    const router = fs.readFileSync(path.join(LIB, 'router.ts'), 'utf8');
    // Lines of code as Biome formats them (one option a line in a long call), comments and blank lines aside.
    const code = router.split('\n').filter((line) => !/^\s*($|\/\/|\/\*|\*)/.test(line));
    expect(code.length).toBeLessThan(185);
    for (const file of ['http/dispatch.ts', 'http/exchange.ts', 'plugin/serve.ts', 'function/serve.ts', 'security/caller.ts', 'deploy/live.ts']) {
      expect(fs.existsSync(path.join(LIB, file))).toBe(true);
    }
  });

  test('test/ mirrors lib/: every test folder names a folder of lib/', () => {
    const own = new Set(['support', 'fixtures', 'fixtures-ui', 'types']);
    const folders = fs.readdirSync(TEST, { withFileTypes: true }).filter((entry) => entry.isDirectory() && !own.has(entry.name));
    expect(folders.length).toBeGreaterThan(5);
    for (const folder of folders) expect([folder.name, fs.existsSync(path.join(LIB, folder.name))]).toEqual([folder.name, true]);
  });
  test('the core never imports the BCMS layer (lib/bcms/): only the lines marked "BCMS layer" of the entry points do', () => {
    const layer = path.join(LIB, 'bcms') + path.sep;
    const found: string[] = [];
    for (const file of filesUnder(LIB, '.ts')) {
      if (file.startsWith(layer)) continue;
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, index) => {
        const match = /^(?:import|export)\b.*?from\s+'(\.{1,2}\/[^']+)'/.exec(line);
        if (match === null || !(path.resolve(path.dirname(file), match[1] as string) + path.sep).startsWith(layer)) return;
        if (!line.endsWith('// BCMS layer')) found.push(`${path.relative(LIB, file)}:${index + 1}`);
      });
    }
    expect(found).toEqual([]);
    // The marked lines are where the docs say: the package's entry points, nowhere else.
    const marked = filesUnder(LIB, '.ts').filter((file) => !file.startsWith(layer) && fs.readFileSync(file, 'utf8').includes('// BCMS layer'));
    // (.ci/core-alone deletes the layer with its marked lines: then there are none.)
    const entryPoints = fs.existsSync(layer) ? ['api.ts', path.join('cli', 'bin.ts'), 'index.ts'] : [];
    expect(marked.map((file) => path.relative(LIB, file)).sort()).toEqual(entryPoints);
  });

  test("the core's tests never import the BCMS layer: its tests are in test/bcms/", () => {
    const own = path.join(TEST, 'bcms') + path.sep;
    const found = filesUnder(TEST, '.ts')
      .filter((file) => !file.startsWith(own) && !file.includes(`${path.sep}fixtures`))
      .filter((file) => /from '(?:\.\.\/)+lib\/bcms\//.test(fs.readFileSync(file, 'utf8')));
    expect(found.map((file) => path.relative(TEST, file))).toEqual([]);
  });
});

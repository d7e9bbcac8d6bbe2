import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The route and result types that createClient<typeof registry> reads must survive declaration
// emit: a plugin or function whose handler answers with an interface its file does not export
// (or whose guard yields one) still compiles with declaration: true, as BCMS's plugin projects
// have it, and a client typed by the emitted declarations alone still knows the routes.
const ROOT = path.resolve(__dirname, '../..');
const FIXTURE = path.join(ROOT, 'test/fixtures/declaration-emit');
const OUT = path.join(ROOT, 'test-output/declaration-emit');
const tsc = path.join(ROOT, 'node_modules/.bin/tsc');

function compile(config: object): string {
  const file = path.join(OUT, `tsconfig.${Object.keys(config).length}.json`);
  fs.writeFileSync(file, JSON.stringify(config));
  const result = spawnSync(tsc, ['-p', file], { cwd: OUT, encoding: 'utf8' });
  return `${result.stdout}${result.stderr}`.trim();
}

test('declarations are written for handlers that answer with private interfaces, and a client typed by them alone knows the routes', () => {
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(OUT, { recursive: true });
  const paths = { 'bcms-extensions': [path.join(ROOT, 'dist/index.d.ts')], 'bcms-extensions/client': [path.join(ROOT, 'dist/client/index.d.ts')] };
  expect(compile({ extends: path.join(FIXTURE, 'tsconfig.json'), compilerOptions: { outDir: path.join(OUT, 'types'), rootDir: FIXTURE, paths } })).toBe('');
  const registry = fs.readFileSync(path.join(OUT, 'types/main.d.ts'), 'utf8');
  // Written out in full, as JSON carries it: no interface of the plugin's files is named.
  expect(registry).not.toMatch(/\b(Note|Folder|NewNote|Status|Brand)\b/);
  expect(registry).toContain('"/api/plugin/notes/note/tree/:id"');

  // A client that sees only the emitted declarations.
  fs.writeFileSync(
    path.join(OUT, 'client.ts'),
    `import { expectTypeOf } from 'expect-type';
import { createClient } from 'bcms-extensions/client';
import type { registry } from './types/registry';
export async function use(): Promise<void> {
  const client = createClient<typeof registry>({ url: 'http://localhost:8080' });
  expectTypeOf(await client.plugin.get('/api/plugin/notes/note/all')).toEqualTypeOf<{ items: { id: string; at: string }[] }>();
  expectTypeOf(await client.plugin.post('/api/plugin/notes/note', { body: { text: 'a' } })).toEqualTypeOf<{ id: string; at: string }>();
  // @ts-expect-error: the body its guard yields (NewNote, not exported either) is what a caller sends
  await client.plugin.post('/api/plugin/notes/note', { body: { title: 'a' } });
  expectTypeOf((await client.plugin.get('/api/plugin/notes/note/tree/:id', { params: { id: 'x' } })).name).toEqualTypeOf<string>();
  expectTypeOf(await client.function.call('receipt')).toEqualTypeOf<{ id: string; at: string }>();
  expectTypeOf(await client.plugin.get('/api/plugin/notes/note/status')).toEqualTypeOf<{ status: 'open' | 'done'; id: string }>();
  // @ts-expect-error: no such route
  await client.plugin.get('/api/plugin/notes/note/none');
}
`,
  );
  expect(compile({ compilerOptions: { strict: true, noEmit: true, module: 'commonjs', target: 'ES2022', skipLibCheck: true, types: ['node'], paths }, files: ['client.ts'] })).toBe('');
});

import { Writable } from 'node:stream';
import pino from 'pino';
import { sharedTestDatabase } from '../support/database';
import { bundle, type Deployable, functionSource, signed, startDeployable } from '../support/deploy';

/** The keys of a JSON object's text, in order, duplicates kept (JSON.parse keeps the last of each). */
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '"') {
      let end = i + 1;
      while (line[end] !== '"') end += line[end] === '\\' ? 2 : 1;
      if (depth === 1 && /^\s*:/.test(line.slice(end + 1))) keys.push(JSON.parse(line.slice(i, end + 1)) as string);
      i = end;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return keys;
}

let service: Deployable;
let text = '';
beforeAll(async () => {
  // Named, as the default logger is (and as an app's own pino often is): `name` is pino's binding.
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  service = await startDeployable((await sharedTestDatabase()).knex, {}, { logger: pino({ name: 'bcms-extensions' }, stream) });
});
afterAll(() => service.close());

test('the lines of a deploy, a rollback and an undeploy carry each key once, `name` the logger name; the version is their `extension`', async () => {
  const { app, deployer } = service;
  const deploy = (version: string) => signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'logged', functionSource('logged', `async () => '${version}'`), { version }));
  expect((await deploy('1.0.0')).status).toBe(201);
  expect((await deploy('2.0.0')).status).toBe(201);
  expect((await signed(app, 'POST', '/api/extensions/deployments/function/logged/rollback', deployer)).status).toBe(200);
  expect((await signed(app, 'DELETE', '/api/extensions/deployments/function/logged', deployer)).status).toBe(200);

  const lines = text.split('\n').filter(Boolean);
  const twice = lines.filter((line) => new Set(topLevelKeys(line)).size !== topLevelKeys(line).length);
  expect(twice).toEqual([]);
  const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(parsed.every((line) => line.name === 'bcms-extensions')).toBe(true);
  const about = (msg: string) => parsed.filter((line) => line.msg === `bcms-extensions: ${msg}`).map(({ extension, kind, version }) => ({ extension, kind, version }));
  expect(about('deployed')).toEqual([
    { extension: 'function logged@1.0.0', kind: 'function', version: '1.0.0' },
    { extension: 'function logged@2.0.0', kind: 'function', version: '2.0.0' },
  ]);
  expect(about('rolled back')).toEqual([{ extension: 'function logged@1.0.0', kind: 'function', version: '1.0.0' }]);
  expect(about('undeployed')).toEqual([{ extension: 'function logged@1.0.0', kind: 'function', version: '1.0.0' }]);
  expect(about('deployment live')).toEqual(expect.arrayContaining([{ extension: 'function logged@2.0.0', kind: 'function', version: '2.0.0' }]));
}, 60_000); // three versions loaded in isolates: long on a loaded machine

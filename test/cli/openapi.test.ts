import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createBcmsFunction } from '../../lib';
import { main } from '../../lib/cli/main';
import { buildApp, freePort, role, signToken, type TestApp } from '../support/app';
import { validateOpenApi } from '../support/openapi';

// bcms-ext openapi: the document of a running service, or of the project in the folder.
const ROOT = path.resolve(__dirname, '..', '..');
const BIN = path.join(ROOT, 'dist', 'cli', 'bin.js');
const made: string[] = [];

async function run(args: string[], env: NodeJS.ProcessEnv = {}, cwd?: string) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (text) => void out.push(text), err: (text) => void err.push(text), env, cwd });
  return { code, out: out.join(''), err: err.join('') };
}

const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));
let t: TestApp;
let server: Server;
let url: string;
beforeAll(async () => {
  t = await buildApp({ functions: [hello] });
  server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

test("--url: the running service's document, to stdout or to --out", async () => {
  const printed = await run(['openapi', '--url', url]);
  expect(printed.code).toBe(0);
  expect(JSON.parse(printed.out)).toEqual({ ...t.router.openapi(), servers: [{ url: '/' }] });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-openapi-'));
  made.push(dir);
  const written = await run(['openapi', '--out', 'api.json'], { BCMS_URL: url }, dir);
  expect(written.code).toBe(0);
  expect(written.err).toMatch(/^bcms-ext openapi: wrote api\.json \(\d+ operations\)\n$/);
  expect(JSON.parse(fs.readFileSync(path.join(dir, 'api.json'), 'utf8')).paths['/api/function/hello'].post.security).toEqual([]);
});

test('a service that is not there, or not ours: exit 1, saying what to do', async () => {
  const down = await run(['openapi', '--url', `http://127.0.0.1:${await freePort()}`]);
  expect(down.code).toBe(1);
  expect(down.err).toMatch(/could not reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\.\nIs the service running there\?/);
  const other = await run(['openapi', '--url', `${url}/elsewhere`]);
  expect(other.code).toBe(1);
  expect(other.err).toMatch(/answered 404/);
  expect((await run(['openapi', 'extra'])).err).toMatch(/openapi takes no file names/);
});

test("a service that serves its document to signed-in users only (openapi: 'token'): BCMS_TOKEN is sent, and a refusal says to set it", async () => {
  const guarded = await buildApp({ functions: [hello] }, { openapi: 'token' });
  const listening = guarded.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => listening.once('listening', resolve));
  const at = `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
  try {
    const refused = await run(['openapi', '--url', at]);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain("answered 401: the service serves its document to a signed-in user only (its openapi option is 'token').\nSet BCMS_TOKEN to a JWT of a role that holds READ.");
    const wrong = await run(['openapi', '--url', at], { BCMS_TOKEN: 'not-a-token' });
    expect(wrong.err).toContain('BCMS_TOKEN was refused');
    const given = await run(['openapi', '--url', at], { BCMS_TOKEN: signToken([role('USER', 'READ')]) });
    expect(given.code).toBe(0);
    expect(JSON.parse(given.out).paths['/api/function/hello']).toBeDefined();
  } finally {
    await new Promise((resolve) => listening.close(resolve));
  }
});

test('in a functions project: its own document, from its bundles, valid OpenAPI 3.1 (the built CLI, as a project runs it)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-openapi-project-'));
  made.push(dir);
  fs.mkdirSync(path.join(dir, 'src', 'functions'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'my-functions', version: '1.4.2', private: true }));
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'esnext', moduleResolution: 'bundler', strict: true, noEmit: true, skipLibCheck: true, types: [] }, include: ['src'] }),
  );
  fs.writeFileSync(
    path.join(dir, 'src', 'functions', 'double.ts'),
    `import { createBcmsFunction } from 'bcms-extensions';
export default createBcmsFunction(async () => ({
  config: { name: 'double', public: true, bodySchema: { n: { __type: 'number', __required: true } }, responseSchema: { n: { __type: 'number', __required: true } } },
  handler: async ({ request }) => ({ n: (request.body as { n: number }).n * 2 }),
}));
`,
  );
  const modules = path.join(dir, 'node_modules');
  fs.mkdirSync(path.join(modules, '.bin'), { recursive: true });
  fs.symlinkSync(ROOT, path.join(modules, 'bcms-extensions'), 'dir');
  for (const name of ['typescript', 'vite', '@electric-sql', 'knex-pglite']) fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(modules, name), 'dir');
  fs.symlinkSync(path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), path.join(modules, '.bin', 'tsc'));
  const result = spawnSync(process.execPath, [BIN, 'openapi', '--out', 'openapi.json'], { cwd: dir, encoding: 'utf8', env: { ...process.env, DATABASE_URL: '' } });
  expect(result.stderr).toMatch(/bcms-ext openapi: wrote openapi\.json \(\d+ operations\)/);
  expect(result.status).toBe(0);
  const document = JSON.parse(fs.readFileSync(path.join(dir, 'openapi.json'), 'utf8'));
  expect([document.info.title, document.info.version]).toEqual(['my-functions', '1.4.2']);
  const call = document.paths['/api/function/double'].post;
  expect(call.requestBody.content['application/json'].schema).toEqual({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] });
  expect(call.responses['200'].content['application/json'].schema.properties.result).toEqual({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] });
  expect(validateOpenApi(document).valid).toBe(true);
}, 120_000);

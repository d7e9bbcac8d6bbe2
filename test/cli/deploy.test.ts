import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { main } from '../../lib/cli/main';
import { buildApp, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';
import { ROOMY, until } from '../support/wait';

const code = (answer: string, name: string, prelude: string) =>
  `${prelude}\nconst { createBcmsFunction } = require('bcms-extensions');\nexports.default = createBcmsFunction(async () => ({ config: { name: ${JSON.stringify(name)}, public: true }, handler: async () => ${JSON.stringify(answer)} }));`;

/** bcms-bundle/function-NAME.json, a public function answering `answer`; `prelude` runs when it loads. */
function writeBundle(dir: string, answer: string, version: string, name = 'cli-fn', prelude = ''): void {
  fs.mkdirSync(path.join(dir, 'bcms-bundle'), { recursive: true });
  const source = code(answer, name, prelude);
  const bundle = { manifest: { kind: 'function', name, version, sha256: createHash('sha256').update(source).digest('hex') }, code: source };
  fs.writeFileSync(path.join(dir, 'bcms-bundle', `function-${name}.json`), JSON.stringify(bundle));
}

/** A project folder whose .env holds the service's URL and a new deploy key. */
async function deployProject(): Promise<string> {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-deploy-cli-'));
  const key = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true, name: 'cli deployer' });
  fs.writeFileSync(path.join(project, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
  return project;
}

async function run(args: string[], env: NodeJS.ProcessEnv, cwd: string) {
  const out: string[] = [];
  const err: string[] = [];
  const status = await main(args, { out: (t) => void out.push(t), err: (t) => void err.push(t), env, cwd });
  return { status, out: out.join(''), err: err.join('') };
}

let t: TestApp;
let server: Server;
let url: string;
beforeAll(async () => {
  // Loads and calls have all the time a loaded machine may need: no limit is what these tests check.
  t = await buildApp({}, ROOMY);
  server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('bcms-ext deploy, list, rollback, undeploy', () => {
  test('deploy the bundles of bcms-bundle/ with the key of .env, list them, roll back', async () => {
    const project = await deployProject();
    writeBundle(project, 'one', '1.0.0');
    const first = await run(['deploy'], {}, project);
    expect(first).toMatchObject({ status: 0, err: '' });
    expect(first.out).toMatch(/^Deploying function cli-fn 1\.0\.0 \(\d+\.\d KB\) to http:\/\/127\.0\.0\.1:\d+\.\.\. live\.\n$/);
    expect((await request(t.app).post('/api/function/cli-fn')).body.result).toBe('one');
    // The same bundle again (npm run dev saving without a change): nothing stored.
    expect((await run(['deploy'], {}, project)).out).toMatch(/\.\.\. unchanged \(the service already runs this version\)\.\n$/);
    writeBundle(project, 'two', '2.0.0');
    expect((await run(['deploy'], {}, project)).status).toBe(0);
    expect((await request(t.app).post('/api/function/cli-fn')).body.result).toBe('two');

    const list = await run(['list'], {}, project);
    expect(list.out).toMatch(/^\s+KIND\s+NAME\s+VERSION\s+HASH\s+STATE\s+DEPLOYED\s+BY\n\s+function\s+cli-fn\s+1\.0\.0\s+[0-9a-f]{12}\s+\S+\s+cli deployer \(/);
    expect(list.out).toMatch(/\n\*\s+function\s+cli-fn\s+2\.0\.0/);
    expect(await run(['rollback', 'cli-fn'], {}, project)).toMatchObject({ status: 0, out: expect.stringMatching(/^Rolled back: function cli-fn 1\.0\.0 \([0-9a-f]{12}\) is live again\.\n$/) });
    expect((await request(t.app).post('/api/function/cli-fn')).body.result).toBe('one');
  }, 60_000); // several deploys, each loaded in an isolate: long on a loaded machine

  test('rollback names the version by the hash list shows it under: a plugin with a UI, whose hash is of its code and UI together', async () => {
    const project = await deployProject();
    const source = `const { createBcmsPlugin } = require('bcms-extensions');\nmodule.exports = createBcmsPlugin({ name: 'cli-ui', controllers: [] });`;
    // One code, two UIs: the versions differ in their UI only, as a UI-only change ships.
    for (const [version, page] of [
      ['1.0.0', '<h1>one</h1>'],
      ['2.0.0', '<h1>two</h1>'],
    ]) {
      const ui = { 'index.html': Buffer.from(page as string).toString('base64') };
      const bundle = { manifest: { kind: 'plugin', name: 'cli-ui', version, sha256: createHash('sha256').update(source).digest('hex') }, code: source, ui };
      fs.mkdirSync(path.join(project, 'bcms-bundle'), { recursive: true });
      fs.writeFileSync(path.join(project, 'bcms-bundle', 'plugin-cli-ui.json'), JSON.stringify(bundle));
      expect((await run(['deploy'], {}, project)).status).toBe(0);
    }
    const listedHash = (out: string, version: string) => new RegExp(`\\n\\*?\\s+plugin\\s+cli-ui\\s+${version.replace(/\./g, '\\.')}\\s+([0-9a-f]{12})\\s`).exec(out)?.[1];
    const before = (await run(['list'], {}, project)).out;
    const [one, two] = [listedHash(before, '1.0.0'), listedHash(before, '2.0.0')];
    expect(one).toMatch(/^[0-9a-f]{12}$/);
    expect(two).toMatch(/^[0-9a-f]{12}$/);
    expect(one).not.toBe(two);
    const back = await run(['rollback', 'cli-ui'], {}, project);
    expect(back).toEqual({ status: 0, out: `Rolled back: plugin cli-ui 1.0.0 (${one}) is live again.\n`, err: '' });
    expect((await run(['list'], {}, project)).out).toMatch(new RegExp(`\\n\\*\\s+plugin\\s+cli-ui\\s+1\\.0\\.0\\s+${one}\\s`));
    expect((await run(['undeploy', 'cli-ui'], {}, project)).status).toBe(0);
  }, 60_000); // two deploys and a rollback, each loaded in an isolate

  test('undeploy takes a function out of service; list shows it inactive; rollback brings its last version back', async () => {
    const project = await deployProject();
    writeBundle(project, 'kept', '1.0.0', 'cli-gone');
    expect((await run(['deploy'], {}, project)).status).toBe(0);
    writeBundle(project, 'last', '2.0.0', 'cli-gone');
    expect((await run(['deploy'], {}, project)).status).toBe(0);
    expect((await request(t.app).post('/api/function/cli-gone')).body.result).toBe('last');

    // The kind is found as rollback finds it: from what the service lists under the name.
    expect(await run(['undeploy', 'cli-gone'], {}, project)).toEqual({ status: 0, out: 'Undeployed: function cli-gone 2.0.0 is no longer served.\n', err: '' });
    const gone = await request(t.app).post('/api/function/cli-gone');
    expect([gone.status, gone.body.error?.code]).toEqual([404, 'FUNCTION_NOT_FOUND']);
    const list = await run(['list'], {}, project);
    expect(list.out).toMatch(/\n\s+function\s+cli-gone\s+1\.0\.0\s/);
    expect(list.out).toMatch(/\n\s+function\s+cli-gone\s+2\.0\.0\s/);
    expect(list.out).not.toMatch(/\n\*\s+function\s+cli-gone\s/);
    const listed = JSON.parse((await run(['list', '--json'], {}, project)).out) as { name: string; active: boolean }[];
    expect(listed.filter((d) => d.name === 'cli-gone').map((d) => d.active)).toEqual([false, false]);

    // Again: nothing of that name is live; the service says so, and the CLI what to do.
    const again = await run(['undeploy', 'cli-gone', '--kind', 'function'], {}, project);
    expect(again).toEqual({
      status: 1,
      out: '',
      err: 'bcms-ext undeploy: the service answered 404: No function named "cli-gone" is deployed. See what is deployed: bcms-ext list.\n',
    });
    expect((await run(['undeploy', 'cli-gone'], {}, project)).status).toBe(1);

    expect(await run(['rollback', 'cli-gone'], {}, project)).toMatchObject({ status: 0, out: expect.stringMatching(/^Rolled back: function cli-gone 2\.0\.0 \([0-9a-f]{12}\) is live again\.\n$/) });
    expect((await request(t.app).post('/api/function/cli-gone')).body.result).toBe('last');
    expect((await run(['list'], {}, project)).out).toMatch(/\n\*\s+function\s+cli-gone\s+2\.0\.0\s/);
  }, 60_000); // several deploys, each loaded in an isolate: long on a loaded machine

  test('undeploy refuses an unknown name, a wrong --kind and a missing name, exit 1', async () => {
    const project = await deployProject();
    expect(await run(['undeploy', 'cli-never-deployed'], {}, project)).toEqual({
      status: 1,
      out: '',
      err: 'bcms-ext undeploy: nothing named "cli-never-deployed" is deployed (see bcms-ext list)\n',
    });
    expect(await run(['undeploy', 'cli-never-deployed', '--kind', 'plugin'], {}, project)).toEqual({
      status: 1,
      out: '',
      err: 'bcms-ext undeploy: the service answered 404: No plugin named "cli-never-deployed" is deployed. See what is deployed: bcms-ext list.\n',
    });
    expect((await run(['undeploy', 'x', '--kind', 'widget'], {}, project)).err).toBe('bcms-ext undeploy: --kind is plugin, function, event or job\n');
    expect((await run(['undeploy'], {}, project)).err).toBe('bcms-ext undeploy: undeploy takes one name: bcms-ext undeploy NAME [--kind plugin|function|event|job]\n');
  });

  test('list shows a version whose isolates keep ending as failing, with why', async () => {
    const project = await deployProject();
    writeBundle(project, 'brief', '1.0.0', 'cli-crashing', 'setTimeout(() => process.exit(3), 100);');
    expect((await run(['deploy'], {}, project)).status).toBe(0);
    // Listed again until its isolates have ended often enough to be called failing, however slowly a busy machine gets there.
    let list = '';
    await until(async () => {
      list = (await run(['list'], {}, project)).out;
      return /failing: it exited with code 3/.test(list);
    }, 500);
    expect(list).toMatch(/\n\*\s+function\s+cli-crashing\s+1\.0\.0\s+[0-9a-f]{12}\s+failing\s+.*\n {3}failing: it exited with code 3\n/);
    const listed = JSON.parse((await run(['list', '--json'], {}, project)).out) as { name: string; state?: string; lastError?: string }[];
    expect(listed.find((d) => d.name === 'cli-crashing')).toMatchObject({ state: 'failing', lastError: 'it exited with code 3' });
    expect((await run(['undeploy', 'cli-crashing'], {}, project)).status).toBe(0);
  }, 60_000);

  test('list shows why a version failed to load', async () => {
    const project = await deployProject();
    // In the function's own folder of files.dir (its working directory), the one place of the host's its sandbox sees.
    const folder = path.resolve('.bcms', 'files', '.functions', 'cli-fragile');
    fs.mkdirSync(folder, { recursive: true });
    const flag = path.join(folder, `gone-${process.pid}`);
    fs.rmSync(flag, { force: true });
    writeBundle(project, 'v1', '1.0.0', 'cli-fragile', `if (require('node:fs').existsSync(${JSON.stringify(path.basename(flag))})) throw new Error('v1 needs what is gone');`);
    expect((await run(['deploy'], {}, project)).status).toBe(0);
    writeBundle(project, 'v2', '2.0.0', 'cli-fragile');
    expect((await run(['deploy'], {}, project)).status).toBe(0);
    fs.writeFileSync(flag, '');
    try {
      const refused = await run(['rollback', 'cli-fragile'], {}, project);
      expect(refused.status).toBe(1);
      expect(refused.err).toMatch(/^bcms-ext rollback: the service answered 422: Version 1\.0\.0 of function "cli-fragile" did not load: .*v1 needs what is gone/);
    } finally {
      fs.rmSync(flag, { force: true });
    }
    const list = (await run(['list'], {}, project)).out;
    expect(list).toMatch(/\n\s+function\s+cli-fragile\s+1\.0\.0\s+.*\n {3}load error: .*v1 needs what is gone\n/);
    expect(list).toMatch(/\n\*\s+function\s+cli-fragile\s+2\.0\.0\s+.*\n(?! {3}load error)/);
  }, 60_000); // several deploys, each loaded in an isolate: long on a loaded machine

  test('refusals exit 1 with the reason and what to do', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-deploy-cli-'));
    expect((await run(['deploy'], {}, project)).err).toBe('bcms-ext deploy: no bundle in bcms-bundle/: run npm run bundle first\n');
    writeBundle(project, 'x', '1.0.0');
    expect((await run(['deploy'], { BCMS_URL: url }, project)).err).toMatch(/^bcms-ext deploy: set BCMS_KEY_ID and BCMS_KEY_SECRET/);
    const caller = await hmacKey((await sharedTestDatabase()).knex, ['cli-fn']);
    const refused = await run(['deploy'], { BCMS_URL: url, BCMS_KEY_ID: caller.keyId, BCMS_KEY_SECRET: caller.secret }, project);
    expect(refused.status).toBe(1);
    expect(refused.out).toMatch(/\.\.\. failed\.\n$/);
    expect(refused.err).toBe('bcms-ext deploy: the service answered 403: This API key may not deploy. Deploy with a key that may: bcms-ext keys create --name deployer --deploy.\n');
  });

  test('a source changed after the bundle was made: deploy refuses, and says to bundle; a bundle named on the command line goes as it is', async () => {
    const project = await deployProject();
    writeBundle(project, 'stale', '1.0.0', 'stale-fn');
    fs.mkdirSync(path.join(project, 'src', 'functions'), { recursive: true });
    fs.writeFileSync(path.join(project, 'src', 'functions', 'stale-fn.ts'), 'export default 1;\n');
    // Later than the bundle, whatever the file system's clock resolution.
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(path.join(project, 'src', 'functions', 'stale-fn.ts'), later, later);
    const refused = await run(['deploy'], {}, project);
    expect(refused).toMatchObject({ status: 1, out: '' });
    expect(refused.err).toBe('bcms-ext deploy: src/functions/stale-fn.ts changed after bcms-bundle/ was made: run npm run bundle, then deploy (or name the bundle files to send them as they are)\n');
    expect((await request(t.app).post('/api/function/stale-fn')).status).toBe(404);
    const named = await run(['deploy', 'bcms-bundle/function-stale-fn.json'], {}, project);
    expect(named).toMatchObject({ status: 0, err: '' });
    expect((await request(t.app).post('/api/function/stale-fn')).body.result).toBe('stale');
  });

  test('a test changed after the bundle was made is no reason to refuse: tests are never bundled', async () => {
    const project = await deployProject();
    writeBundle(project, 'tested', '1.0.0', 'tested-fn');
    fs.mkdirSync(path.join(project, 'test'));
    fs.writeFileSync(path.join(project, 'test', 'hello.test.mjs'), "import 'node:test';\n");
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(path.join(project, 'test', 'hello.test.mjs'), later, later);
    expect(await run(['deploy'], {}, project)).toMatchObject({ status: 0, err: '' });
    expect((await request(t.app).post('/api/function/tested-fn')).body.result).toBe('tested');
  });
});

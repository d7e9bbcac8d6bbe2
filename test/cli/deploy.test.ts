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

const code = (answer: string) =>
  `const { createBcmsFunction } = require('bcms-extensions');\nexports.default = createBcmsFunction(async () => ({ config: { name: 'cli-fn', public: true }, handler: async () => ${JSON.stringify(answer)} }));`;

function writeBundle(dir: string, answer: string, version: string): void {
  fs.mkdirSync(path.join(dir, 'bcms-bundle'), { recursive: true });
  const source = code(answer);
  const bundle = { manifest: { kind: 'function', name: 'cli-fn', version, sha256: createHash('sha256').update(source).digest('hex') }, code: source };
  fs.writeFileSync(path.join(dir, 'bcms-bundle', 'function-cli-fn.json'), JSON.stringify(bundle));
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
  t = await buildApp({});
  server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('bcms-ext deploy, list, rollback', () => {
  test('deploy the bundles of bcms-bundle/ with the key of .env, list them, roll back', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-deploy-cli-'));
    const key = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true, name: 'cli deployer' });
    fs.writeFileSync(path.join(project, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
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
    expect(list.out).toMatch(/^\s+KIND\s+NAME\s+VERSION\s+DEPLOYED\s+BY\n\s+function\s+cli-fn\s+1\.0\.0\s+\S+\s+cli deployer \(/);
    expect(list.out).toMatch(/\n\*\s+function\s+cli-fn\s+2\.0\.0/);
    expect(await run(['rollback', 'cli-fn'], {}, project)).toMatchObject({ status: 0, out: 'Rolled back: function cli-fn 1.0.0 is live again.\n' });
    expect((await request(t.app).post('/api/function/cli-fn')).body.result).toBe('one');
  });

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
});

import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createBcmsFunction } from '../../lib';
import { main } from '../../lib/cli/main';
import { buildApp, freePort, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { hmacKey, publicKeyKey } from '../support/signature';

const sum = createBcmsFunction(async () => ({
  config: { name: 'sum', public: false },
  handler: async ({ request }) => ({ total: (request.body as number[]).reduce((a, b) => a + b, 0) }),
}));
/** How many times it ran: a retry with the same Idempotency-Key must not run it again. */
let counted = 0;
const count = createBcmsFunction(async () => ({ config: { name: 'count', public: true }, handler: async () => ({ run: ++counted }) }));

async function run(args: string[], env: NodeJS.ProcessEnv, cwd?: string) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (t) => void out.push(t), err: (t) => void err.push(t), env, cwd });
  return { code, out: out.join(''), err: err.join('') };
}

let t: TestApp;
let server: Server;
let url: string;
beforeAll(async () => {
  t = await buildApp({ functions: [sum, count] });
  server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('bcms-ext call', () => {
  test('signs with BCMS_KEY_ID/BCMS_KEY_SECRET and prints the result', async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['sum']);
    const res = await run(['call', 'sum', '--data', '[1,2,3]'], { BCMS_URL: url, BCMS_KEY_ID: key.keyId, BCMS_KEY_SECRET: key.secret });
    expect(res).toEqual({ code: 0, out: '{\n  "total": 6\n}\n', err: '' });
  });

  test("the service and the key from a .env in the folder, as a project's other commands read them; the environment wins", async () => {
    const key = await hmacKey((await sharedTestDatabase()).knex, ['sum']);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-call-env-'));
    fs.writeFileSync(path.join(dir, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
    expect(await run(['call', 'sum', '--data', '[2,3]'], {}, dir)).toEqual({ code: 0, out: '{\n  "total": 5\n}\n', err: '' });
    const wrong = await run(['call', 'sum', '--data', '[2,3]'], { BCMS_KEY_SECRET: 'not-the-secret' }, dir);
    expect(wrong.err).toMatch(/^bcms-ext call: 401 SIGNATURE_INVALID/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("a project's .env naming its deploy key's file, and a caller's key in the environment: the environment's key signs", async () => {
    const deployer = await publicKeyKey((await sharedTestDatabase()).knex, 'ed25519', []);
    const caller = await hmacKey((await sharedTestDatabase()).knex, ['sum']);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-call-env-'));
    fs.writeFileSync(path.join(dir, 'bcms-deploy-key.pem'), deployer.privateKey, { mode: 0o600 });
    fs.writeFileSync(path.join(dir, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=${deployer.keyId}\nBCMS_PRIVATE_KEY_FILE=${path.join(dir, 'bcms-deploy-key.pem')}\n`);
    expect(await run(['call', 'sum', '--data', '[4,5]'], { BCMS_KEY_ID: caller.keyId, BCMS_KEY_SECRET: caller.secret }, dir)).toEqual({ code: 0, out: '{\n  "total": 9\n}\n', err: '' });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('an Ed25519 key from BCMS_PRIVATE_KEY_FILE, and --data @file', async () => {
    const key = await publicKeyKey((await sharedTestDatabase()).knex, 'ed25519', ['sum']);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-call-'));
    fs.writeFileSync(path.join(dir, 'key.pem'), key.privateKey);
    fs.writeFileSync(path.join(dir, 'data.json'), '[40, 2]');
    const res = await run(['call', 'sum', '--data', `@${path.join(dir, 'data.json')}`, '--url', url], { BCMS_KEY_ID: key.keyId, BCMS_PRIVATE_KEY_FILE: path.join(dir, 'key.pem') });
    expect(res).toMatchObject({ code: 0, out: '{\n  "total": 42\n}\n' });
  });

  test("a refusal: exit 1 with the service's code and message, and what to do next", async () => {
    const unsigned = await run(['call', 'sum', '--data', '[1]', '--url', url], {});
    expect(unsigned.code).toBe(1);
    expect(unsigned.err).toMatch(/^bcms-ext call: 401 SIGNATURE_REQUIRED: This function is private.*\nThe function is private: set BCMS_KEY_ID and BCMS_KEY_SECRET/);
    const key = await hmacKey((await sharedTestDatabase()).knex, ['other']);
    const forbidden = await run(['call', 'sum', '--url', url], { BCMS_KEY_ID: key.keyId, BCMS_KEY_SECRET: key.secret });
    expect(forbidden.err).toBe(
      'bcms-ext call: 403 KEY_FORBIDDEN: This API key may not call function "sum": it does not list it.\nThe key is blocked, or does not list this function: create a key with --functions NAME.\n',
    );
    const port = await freePort();
    const down = await run(['call', 'sum'], { BCMS_URL: `http://127.0.0.1:${port}` });
    expect(down.err).toMatch(/^bcms-ext call: NETWORK_ERROR: Could not reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\.\nIs the service running there\?/);
  });

  test('--idempotency-key: the same key and data get the first answer, not a second run; other data with it is refused, with what to do', async () => {
    const key = `order-${Date.now()}`;
    const first = await run(['call', 'count', '--data', '{"n":1}', '--url', url, '--idempotency-key', key], {});
    expect(first).toEqual({ code: 0, out: '{\n  "run": 1\n}\n', err: '' });
    expect(await run(['call', 'count', '--data', '{"n":1}', '--url', url, '--idempotency-key', key], {})).toEqual(first);
    expect(counted).toBe(1);
    const reused = await run(['call', 'count', '--data', '{"n":2}', '--url', url, '--idempotency-key', key], {});
    expect(reused.code).toBe(1);
    expect(reused.err).toMatch(/^bcms-ext call: 422 IDEMPOTENCY_KEY_REUSED: .*\nThis key was used with other data: give every different call a key of its own\.\n$/);
    const invalid = await run(['call', 'count', '--url', url, '--idempotency-key', 'not ascii ü'], {});
    expect(invalid.err).toMatch(/^bcms-ext call: 400 IDEMPOTENCY_KEY_INVALID: .*\nGive --idempotency-key 1 to 255 printable ASCII characters/);
    // Without it, each call runs.
    expect((await run(['call', 'count', '--url', url], {})).out).toBe('{\n  "run": 2\n}\n');
  });

  test('bad input: exit 1 naming it', async () => {
    expect((await run(['call'], {})).err).toBe('bcms-ext call: call takes one function name: bcms-ext call NAME [--data JSON]\n');
    expect((await run(['call', 'sum', '--data', '{nope'], {})).err).toBe('bcms-ext call: --data is not JSON: {nope\n');
    expect((await run(['call', 'sum'], { BCMS_KEY_ID: 'k' })).err).toBe('bcms-ext call: BCMS_KEY_ID is set: set BCMS_KEY_SECRET (hmac-sha256) or BCMS_PRIVATE_KEY_FILE (rsa-sha256, ed25519) too\n');
    expect((await run(['call', 'sum', '--url', 'nope'], {})).err).toBe('bcms-ext call: createFunctionClient: url must be a URL such as http://localhost:8080, got "nope"\n');
  });
});

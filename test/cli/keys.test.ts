import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { createHash } from 'node:crypto';
import request from 'supertest';
import { createBcmsFunction, listApiKeys } from '../../lib';
import { parseExpires } from '../../lib/cli/keys';
import { main } from '../../lib/cli/main';
import { openDatabase } from '../../lib/db/connection';
import { MIGRATIONS_DIRECTORY, MIGRATIONS_TABLE } from '../../lib/db/migrate';
import { buildApp, freePort, role, signToken, type TestApp } from '../support/app';
import { serverSchema } from '../support/database';

function capture(env: NodeJS.ProcessEnv = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env }, out: () => out.join(''), err: () => err.join('') };
}

/** Runs the CLI; resolves to its exit code and output. */
async function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  const c = capture(env);
  const code = await main(args, c.io);
  return { code, out: c.out(), err: c.err() };
}

const report = createBcmsFunction(async () => ({ config: { name: 'report', public: false }, handler: async () => 'ok' }));

describe("bcms-ext keys, through the running service (the embedded database is the service's)", () => {
  let t: TestApp;
  let server: Server;
  let url: string;
  const token = signToken([role('ADMIN', 'READ', 'WRITE', 'DELETE')]);

  beforeAll(async () => {
    t = await buildApp({ functions: [report] });
    server = t.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  test('create shows the secret once; list, block and delete by id', async () => {
    const created = await run(['keys', 'create', '--name', 'site form', '--functions', 'report,other'], { BCMS_URL: url, BCMS_TOKEN: token });
    expect(created).toMatchObject({ code: 0, err: '' });
    const id = /BCMS_KEY_ID=(\S+)/.exec(created.out)?.[1] as string;
    const secret = /BCMS_KEY_SECRET=(\S+)/.exec(created.out)?.[1] as string;
    expect(created.out).toContain(`Created API key ${id} (site form, hmac-sha256; functions: report, other).`);
    expect(created.out).toContain('Its secret is shown this once');
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const listed = await run(['keys', 'list', '--url', url, '--token', token]);
    expect(listed.code).toBe(0);
    expect(listed.out).toMatch(/^ID\s+NAME\s+ALGORITHM\s+STATE\s+FUNCTIONS\s+PLUGINS\s+DEPLOY\s+BCMS-CLIENT\s+CREATED\s+EXPIRES\n/);
    expect(listed.out).toMatch(new RegExp(`${id}\\s+site form\\s+hmac-sha256\\s+active\\s+report,other\\s+-\\s+no\\s+no\\s+\\d{4}-\\S+\\s+-\\n`));
    expect(listed.out).not.toContain(secret);

    expect(await run(['keys', 'block', id, '--url', url, '--token', token])).toMatchObject({ code: 0, out: `Blocked API key ${id}.\n` });
    const json = await run(['keys', 'list', '--json'], { BCMS_URL: url, BCMS_TOKEN: token });
    expect(JSON.parse(json.out)).toContainEqual(expect.objectContaining({ id, blocked: true }));
    expect(await run(['keys', 'delete', id, '--url', url, '--token', token])).toMatchObject({ code: 0, out: `Deleted API key ${id}.\n` });
    const gone = await run(['keys', 'delete', id, '--url', url, '--token', token]);
    expect(gone.code).toBe(1);
    expect(gone.err).toBe(`bcms-ext keys delete: no API key has the id "${id}" in the service at ${url} (see bcms-ext keys list).\n`);
  });

  test('--json create prints { id, secret }; a key that lists nothing gets a note', async () => {
    const created = await run(['keys', 'create', '--name', 'json', '--json', '--url', url, '--token', token]);
    expect(JSON.parse(created.out)).toEqual({ id: expect.any(String), secret: expect.any(String) });
    expect(created.err).toBe('Note: this key lists no function or plugin and may not deploy, so it can call nothing (--functions a,b, --plugins a,b).\n');
  });

  test('--plugins a,b: the plugins the key may call, in the output, the list and its JSON; a name that is not one is refused', async () => {
    const created = await run(['keys', 'create', '--name', 'plugin site', '--plugins', 'todo, forms', '--url', url, '--token', token]);
    expect(created).toMatchObject({ code: 0, err: '' }); // no "can call nothing" note: it lists plugins
    const id = /BCMS_KEY_ID=(\S+)/.exec(created.out)?.[1] as string;
    expect(created.out).toContain(`Created API key ${id} (plugin site, hmac-sha256; functions: none; plugins: todo, forms).`);
    const listed = await run(['keys', 'list', '--url', url, '--token', token]);
    expect(listed.out).toMatch(new RegExp(`${id}\\s+plugin site\\s+hmac-sha256\\s+active\\s+-\\s+todo,forms\\s+no\\s+no\\s+\\d{4}-`));
    const json = await run(['keys', 'list', '--json', '--url', url, '--token', token]);
    expect(JSON.parse(json.out)).toContainEqual(expect.objectContaining({ id, functions: [], plugins: ['todo', 'forms'] }));
    const refused = await run(['keys', 'create', '--name', 'x', '--plugins', 'todo,my plugin', '--url', url, '--token', token]);
    expect(refused).toMatchObject({ code: 1, err: 'bcms-ext keys: API key plugins: "my plugin" is not a plugin name (URL-safe, as in /api/plugin/<name>/)\n' });
    expect((await run(['keys', 'create', '--name', 'x', '--plugins'])).err).toBe('bcms-ext keys: --plugins needs a value\n');
  });

  test('--bcms-client: the key also accepts the BCMS client, and the list says so; only hmac-sha256 keys', async () => {
    const created = await run(['keys', 'create', '--name', 'bcms site', '--functions', 'report', '--bcms-client', '--url', url, '--token', token]);
    expect(created.code).toBe(0);
    const id = /BCMS_KEY_ID=(\S+)/.exec(created.out)?.[1] as string;
    expect(created.out).toContain(`Created API key ${id} (bcms site, hmac-sha256; functions: report; accepts the BCMS client).`);
    const listed = await run(['keys', 'list', '--url', url, '--token', token]);
    expect(listed.out).toMatch(new RegExp(`${id}\\s+bcms site\\s+hmac-sha256\\s+active\\s+report\\s+-\\s+no\\s+yes\\s+\\d{4}-`));
    const json = await run(['keys', 'list', '--json', '--url', url, '--token', token]);
    expect(JSON.parse(json.out)).toContainEqual(expect.objectContaining({ id, bcmsClient: true }));
    const publicKeyFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-')), 'key.pub');
    fs.writeFileSync(publicKeyFile, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }));
    const refused = await run(['keys', 'create', '--name', 'x', '--algorithm', 'ed25519', '--public-key', publicKeyFile, '--bcms-client', '--url', url, '--token', token]);
    expect(refused).toMatchObject({ code: 1, err: 'bcms-ext keys: bcmsClient needs an hmac-sha256 key: the BCMS client signs with a shared secret, and an ed25519 key has none\n' });
    expect((await run(['keys', 'create', '--name', 'x', '--bcms-client=yes'])).err).toBe('bcms-ext keys: --bcms-client takes no value\n');
  });

  test('--env prints only export lines, for eval', async () => {
    const created = await run(['keys', 'create', '--name', 'env', '--functions', 'report', '--env', '--url', url, '--token', token]);
    expect(created.out).toMatch(/^export BCMS_KEY_ID='[0-9a-f-]{36}'\nexport BCMS_KEY_SECRET='[A-Za-z0-9_-]{43}'\n$/);
  });

  test("--env-file .env: the key's lines in place of the empty ones .env.example gave, once each, and BCMS_URL read from that .env", async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-env-'));
    fs.writeFileSync(path.join(project, '.env'), `# the service\nBCMS_URL=${url}\nBCMS_KEY_ID=\nBCMS_KEY_SECRET=\nOTHER=kept\n`);
    const inProject = async (args: string[]) => {
      const c = capture({ BCMS_TOKEN: token });
      const code = await main(args, { ...c.io, cwd: project });
      return { code, out: c.out(), err: c.err() };
    };
    for (const round of [1, 2]) {
      const created = await inProject(['keys', 'create', '--name', `caller ${round}`, '--functions', 'report', '--env-file', '.env']);
      expect(created).toMatchObject({ code: 0, err: '' });
      expect(created.out).toMatch(/^Created API key [0-9a-f-]{36}; wrote BCMS_KEY_ID and BCMS_KEY_SECRET to \.env\.\n$/);
      const lines = fs.readFileSync(path.join(project, '.env'), 'utf8').split('\n');
      expect(lines.filter((line) => line.startsWith('BCMS_KEY_ID='))).toEqual([expect.stringMatching(/^BCMS_KEY_ID=[0-9a-f-]{36}$/)]);
      expect(lines.filter((line) => line.startsWith('BCMS_KEY_SECRET='))).toEqual([expect.stringMatching(/^BCMS_KEY_SECRET=\S{43}$/)]);
      expect(lines.filter((line) => line === '')).toEqual(['']); // the final newline, nothing more
      expect(lines.slice(0, 2)).toEqual(['# the service', `BCMS_URL=${url}`]);
      expect(lines).toContain('OTHER=kept');
    }
    // The service knows the key it wrote, under the last name.
    const keys = JSON.parse((await inProject(['keys', 'list', '--json'])).out) as { id: string; name: string; functions: string[] }[];
    const id = /BCMS_KEY_ID=(\S+)/.exec(fs.readFileSync(path.join(project, '.env'), 'utf8'))?.[1];
    expect(keys.find((key) => key.id === id)).toMatchObject({ name: 'caller 2', functions: ['report'] });
    expect((await inProject(['keys', 'create', '--name', 'x', '--env', '--env-file', '.env'])).err).toBe('bcms-ext keys: choose one of --env and --env-file\n');
    fs.rmSync(project, { recursive: true, force: true });
  });

  test('--deploy through a service that does not allow it (the default): exit 1 with why and how, and no private key file left', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-refused-'));
    const c = capture({ BCMS_URL: url, BCMS_TOKEN: signToken([role('SUDO', 'READ', 'WRITE')]) });
    const code = await main(['keys', 'create', '--name', 'deployer', '--deploy', '--env-file', '.env'], { ...c.io, cwd: project });
    expect(code).toBe(1);
    expect(c.err()).toMatch(/^bcms-ext keys: the service refused to create a deploy key \(403\): Deploy keys are not created over HTTP on this service .*keys: \{ deployOverHttp: true \}\.\n$/);
    expect(fs.readdirSync(project)).toEqual([]);
    fs.rmSync(project, { recursive: true, force: true });
  });

  test('--expires: a duration or a date; shown when created and by list; a mistake is exit 1 saying what to give', async () => {
    const before = Date.now();
    const created = await run(['keys', 'create', '--name', 'audit', '--functions', 'report', '--expires', '90d', '--url', url, '--token', token]);
    expect(created.code).toBe(0);
    const id = /BCMS_KEY_ID=(\S+)/.exec(created.out)?.[1] as string;
    const expires = /; expires (\S+)\)\./.exec(created.out)?.[1] as string;
    expect(Date.parse(expires) - before).toBeGreaterThanOrEqual(90 * 86_400_000);
    expect(Date.parse(expires) - Date.now()).toBeLessThanOrEqual(90 * 86_400_000);
    const dated = await run(['keys', 'create', '--name', 'until', '--functions', 'report', '--expires', '2099-06-30', '--json', '--url', url, '--token', token]);
    const listed = await run(['keys', 'list', '--url', url, '--token', token]);
    expect(listed.out).toMatch(new RegExp(`${id}\\s+audit\\s+hmac-sha256\\s+active\\s+report\\s+-\\s+no\\s+no\\s+\\S+\\s+${expires.replaceAll('.', '\\.')}\\n`));
    expect(listed.out).toMatch(new RegExp(`${JSON.parse(dated.out).id}\\s+until\\s+.*\\s+2099-06-30T00:00:00\\.000Z\\n`));
    const json = JSON.parse((await run(['keys', 'list', '--json', '--url', url, '--token', token])).out) as { id: string; expiresAt: number | null }[];
    expect(json.find((key) => key.id === id)?.expiresAt).toBe(Date.parse(expires));
    expect((await run(['keys', 'create', '--name', 'x', '--expires', '3 months'])).err).toBe(
      'bcms-ext keys: --expires takes a duration (90d, 12h, 30m: days, hours, minutes) or an ISO date (2027-01-31, or 2027-01-31T12:00:00Z), got "3 months"\n',
    );
    expect((await run(['keys', 'create', '--name', 'x', '--expires', '2020-01-01'])).err).toBe('bcms-ext keys: --expires: must be in the future; 2020-01-01T00:00:00.000Z has passed\n');
  });

  test('no token, a refused token, no service: exit 1 saying what to do', async () => {
    const none = await run(['keys', 'list'], { BCMS_URL: url });
    expect(none.code).toBe(1);
    expect(none.err).toMatch(/^bcms-ext keys: no DATABASE_URL, so the keys are managed through the service at http:\/\/127\.0\.0\.1:\d+, which needs a token: set BCMS_TOKEN/);
    const reader = await run(['keys', 'create', '--name', 'x', '--url', url, '--token', signToken([role('USER', 'READ')])]);
    expect(reader.code).toBe(1);
    expect(reader.err).toMatch(/the service refused the token \(403: Token is not authorized for this action\.\)/);
    const port = await freePort();
    const down = await run(['keys', 'list', '--url', `http://127.0.0.1:${port}`, '--token', token]);
    expect(down.code).toBe(1);
    expect(down.err).toContain(`cannot reach the service at http://127.0.0.1:${port} (ECONNREFUSED). Start it, or set BCMS_URL to where it listens`);
  });

  test('bad arguments: exit 1 naming the problem', async () => {
    expect((await run(['keys'])).err).toMatch(/^bcms-ext keys: expected create, list, block or delete, got ""/);
    expect((await run(['keys', 'create', '--functions', 'a'])).err).toBe('bcms-ext keys: keys create needs --name NAME\n');
    expect((await run(['keys', 'create', '--name', 'x', '--algorithm', 'ed25519'])).err).toBe('bcms-ext keys: an ed25519 key needs publicKey (PEM)\n');
    expect((await run(['keys', 'block'])).err).toBe('bcms-ext keys: keys block takes one key id (see bcms-ext keys list)\n');
    expect((await run(['keys', 'list', '--name', 'x'])).err).toMatch(/^bcms-ext keys: unknown option --name/);
    expect((await run(['keys', 'list', '--url'])).err).toBe('bcms-ext keys: --url needs a value\n');
    expect((await run(['keys', 'list', '--url', url, '--pglite', 'x'])).err).toBe('bcms-ext keys: choose one of --database, --pglite and --url, not --pglite and --url\n');
    expect((await run(['keys', 'create', '--name', 'x', '--functions', 'a', '--private-key-file', 'k.pem'])).err).toBe(
      'bcms-ext keys: --private-key-file is where keys create writes the private key of a deploy key pair it makes (--deploy, without --public-key or --algorithm hmac-sha256)\n',
    );
  });
});

describe('parseExpires: what --expires takes', () => {
  const now = Date.parse('2026-11-26T10:00:00Z');
  test.each([
    ['90d', '2027-02-24T10:00:00.000Z'],
    ['12h', '2026-11-26T22:00:00.000Z'],
    ['30m', '2026-11-26T10:30:00.000Z'],
    [' 1d ', '2026-11-27T10:00:00.000Z'],
    ['2027-01-31', '2027-01-31T00:00:00.000Z'],
    ['2027-01-31T12:00:00+01:00', '2027-01-31T11:00:00.000Z'],
  ])('%s', (text, iso) => {
    expect(parseExpires(text, now).toISOString()).toBe(iso);
  });

  test.each([
    ['0d', '--expires 0d: a key must live a while; give 1d or more'],
    ['90', '--expires takes a duration (90d, 12h, 30m: days, hours, minutes) or an ISO date (2027-01-31, or 2027-01-31T12:00:00Z), got "90"'],
    ['3w', '--expires takes a duration (90d, 12h, 30m: days, hours, minutes) or an ISO date (2027-01-31, or 2027-01-31T12:00:00Z), got "3w"'],
    ['2027-02-30', '--expires: must be a time: an ISO 8601 date ("2027-01-31", midnight UTC) or date-time with its offset ("2027-01-31T12:00:00Z"), or epoch milliseconds; got "2027-02-30"'],
    ['2026-11-26T09:00:00Z', '--expires: must be in the future; 2026-11-26T09:00:00.000Z has passed'],
  ])('refused: %s', (text, message) => {
    expect(() => parseExpires(text, now)).toThrow(message);
  });
});

describe('bcms-ext keys create --deploy: a key pair whose private key stays with its author', () => {
  let t: TestApp;
  let server: Server;
  let url: string;
  const sudo = signToken([role('SUDO', 'READ', 'WRITE', 'DELETE')]);

  beforeAll(async () => {
    t = await buildApp({}, { keys: { deployOverHttp: true } });
    server = t.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  async function inProject(project: string, args: string[], env: NodeJS.ProcessEnv = {}) {
    const c = capture(env);
    const code = await main(args, { ...c.io, cwd: project });
    return { code, out: c.out(), err: c.err() };
  }

  /** bcms-bundle/function-NAME.json: a public function answering `answer`. */
  function writeBundle(project: string, name: string, answer: string): void {
    const code = `const { createBcmsFunction } = require('bcms-extensions');\nexports.default = createBcmsFunction(async () => ({ config: { name: ${JSON.stringify(name)}, public: true }, handler: async () => ${JSON.stringify(answer)} }));`;
    fs.mkdirSync(path.join(project, 'bcms-bundle'), { recursive: true });
    const manifest = { kind: 'function', name, version: '1.0.0', sha256: createHash('sha256').update(code).digest('hex') };
    fs.writeFileSync(path.join(project, 'bcms-bundle', `function-${name}.json`), JSON.stringify({ manifest, code }));
  }

  test('--env-file .env: ed25519, the private key written 0600, BCMS_PRIVATE_KEY_FILE in place of BCMS_KEY_SECRET; deploy, list, rollback and undeploy sign with it', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-deploy-'));
    fs.writeFileSync(path.join(project, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=\nBCMS_KEY_SECRET=\n`);
    const created = await inProject(project, ['keys', 'create', '--name', 'deployer', '--deploy', '--env-file', '.env'], { BCMS_TOKEN: sudo });
    expect(created).toEqual({
      code: 0,
      out: expect.stringMatching(
        /^Created API key [0-9a-f-]{36}; wrote its private key to bcms-deploy-key\.pem \(mode 0600: the service has only the public key\) and BCMS_KEY_ID and BCMS_PRIVATE_KEY_FILE to \.env\.\n$/,
      ),
      err: '',
    });
    const file = path.join(project, 'bcms-deploy-key.pem');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const pem = fs.readFileSync(file, 'utf8');
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const env = fs.readFileSync(path.join(project, '.env'), 'utf8');
    expect(env).toMatch(new RegExp(`^BCMS_URL=${url}\nBCMS_KEY_ID=[0-9a-f-]{36}\nBCMS_PRIVATE_KEY_FILE=bcms-deploy-key\\.pem\n$`));
    const id = /BCMS_KEY_ID=(\S+)/.exec(env)?.[1];
    // The service keeps the public key of that private key, and nothing secret.
    const key = (await listApiKeys(t.router.db)).find((k) => k.id === id);
    expect(key).toMatchObject({ name: 'deployer', algorithm: 'ed25519', deploy: true, functions: [] });
    const { createPrivateKey, createPublicKey } = await import('node:crypto');
    expect(key?.publicKey).toBe(createPublicKey(createPrivateKey(pem)).export({ type: 'spki', format: 'pem' }).toString());
    expect(await t.router.db('bcms_api_keys').where({ id }).first('secret')).toEqual({ secret: null });

    writeBundle(project, 'pem-fn', 'one');
    const deployed = await inProject(project, ['deploy']);
    expect(deployed).toMatchObject({ code: 0, err: '', out: expect.stringMatching(/^Deploying function pem-fn 1\.0\.0 \([\d.]+ KB\) to http:\/\/127\.0\.0\.1:\d+\.\.\. live\.\n$/) });
    expect((await request(t.app).post('/api/function/pem-fn')).body.result).toBe('one');
    writeBundle(project, 'pem-fn', 'two');
    expect((await inProject(project, ['deploy', 'bcms-bundle/function-pem-fn.json'])).code).toBe(0);
    expect((await inProject(project, ['list'])).out).toMatch(/\*\s+function\s+pem-fn\s+1\.0\.0\s+\S+\s+running\s+\S+\s+deployer/);
    expect((await inProject(project, ['rollback', 'pem-fn'])).code).toBe(0);
    expect((await request(t.app).post('/api/function/pem-fn')).body.result).toBe('one');
    expect(await inProject(project, ['undeploy', 'pem-fn'])).toMatchObject({ code: 0, out: 'Undeployed: function pem-fn 1.0.0 is no longer served.\n' });

    // Again: the file is there, so nothing is overwritten, and no key is made.
    const keys = (await listApiKeys(t.router.db)).length;
    const again = await inProject(project, ['keys', 'create', '--name', 'deployer 2', '--deploy', '--env-file', '.env'], { BCMS_TOKEN: sudo });
    expect(again.code).toBe(1);
    expect(again.err).toBe(`bcms-ext keys: ${file} exists: it is not overwritten (it may be the private key of another key). Give another file with --private-key-file FILE, or move that one.\n`);
    expect(fs.readFileSync(file, 'utf8')).toBe(pem);
    expect((await listApiKeys(t.router.db)).length).toBe(keys);
    fs.rmSync(project, { recursive: true, force: true });
  });

  test('--private-key-file FILE, and --env: export lines naming the file, absolute; --algorithm hmac-sha256: a secret, as before', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-deploy-'));
    const created = await inProject(project, ['keys', 'create', '--name', 'ci', '--deploy', '--private-key-file', 'keys/ci.pem', '--env', '--url', url, '--token', sudo]);
    expect(created.code).toBe(1); // keys/ does not exist: nothing made
    expect(created.err).toMatch(/^bcms-ext keys: cannot write the private key to .*keys\/ci\.pem: ENOENT/);
    fs.mkdirSync(path.join(project, 'keys'));
    const made = await inProject(project, ['keys', 'create', '--name', 'ci', '--deploy', '--private-key-file', 'keys/ci.pem', '--env', '--url', url, '--token', sudo]);
    const file = path.join(project, 'keys', 'ci.pem');
    expect(made.out).toMatch(new RegExp(`^export BCMS_KEY_ID='[0-9a-f-]{36}'\nexport BCMS_PRIVATE_KEY_FILE='${file.replaceAll('.', '\\.')}'\n$`));
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(project)).toEqual(['keys']);

    const described = await inProject(project, ['keys', 'create', '--name', 'described', '--deploy', '--expires', '12h', '--url', url, '--token', sudo]);
    expect(described.out).toMatch(
      /^Created API key \S+ \(described, ed25519; functions: none; may deploy; expires \S+Z\)\.\nIts private key is in .*bcms-deploy-key\.pem \(mode 0600\); the service keeps only the public key\./,
    );

    const hmac = await inProject(project, ['keys', 'create', '--name', 'hmac', '--deploy', '--algorithm', 'hmac-sha256', '--json', '--url', url, '--token', sudo]);
    expect(JSON.parse(hmac.out)).toEqual({ id: expect.any(String), secret: expect.any(String) });
    expect((await listApiKeys(t.router.db)).find((key) => key.id === JSON.parse(hmac.out).id)).toMatchObject({ algorithm: 'hmac-sha256', deploy: true });
    fs.rmSync(project, { recursive: true, force: true });
  });

  test('an ADMIN token, on a service that allows deploy keys over HTTP: exit 1 naming the SUDO role; no file left', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-deploy-'));
    const refused = await inProject(project, ['keys', 'create', '--name', 'x', '--deploy', '--url', url, '--token', signToken([role('ADMIN', 'READ', 'WRITE')])]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/^bcms-ext keys: the service refused to create a deploy key \(403\): Only a token whose SUDO role holds WRITE may create a deploy key/);
    expect(fs.readdirSync(project)).toEqual([]);
    fs.rmSync(project, { recursive: true, force: true });
  });
});

describe('bcms-ext keys, on the database directly', () => {
  test('with DATABASE_URL (the server) or --pglite DIR: create a public-key key from a file, list, delete', async () => {
    const pair = generateKeyPairSync('ed25519');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-'));
    const publicKeyFile = path.join(dir, 'key.pub');
    fs.writeFileSync(publicKeyFile, pair.publicKey.export({ type: 'spki', format: 'pem' }));
    const server = process.env.DATABASE_URL ? await serverSchema('bcms_cli_keys') : undefined;
    const target = server ? { env: { DATABASE_URL: server.url }, args: [] } : { env: {}, args: ['--pglite', path.join(dir, 'data')] };
    try {
      const created = await run(['keys', 'create', '--name', 'deployer', '--algorithm', 'ed25519', '--public-key', publicKeyFile, '--deploy', ...target.args], target.env);
      expect(created.code).toBe(0);
      expect(created.out).toMatch(/^Created API key \S+ \(deployer, ed25519; functions: none; may deploy\)\.\n\nBCMS_KEY_ID=\S+\nSign with the private key/);
      const id = /BCMS_KEY_ID=(\S+)/.exec(created.out)?.[1];
      const listed = await run(['keys', 'list', '--json', ...target.args], target.env);
      expect(JSON.parse(listed.out)).toEqual([expect.objectContaining({ id, algorithm: 'ed25519', deploy: true, functions: [] })]);
      expect((await run(['keys', 'delete', id as string, ...target.args], target.env)).code).toBe(0);
      const database = openDatabase(server ? server.url : { pglite: path.join(dir, 'data') });
      expect(await listApiKeys(database.knex)).toEqual([]);
      await database.close();
    } finally {
      await server?.drop();
    }
  }, 60_000);

  test('--deploy on the database (no service asked, no token): an ed25519 pair, the private key written 0600 beside .env', async () => {
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-db-deploy-'));
    const server = process.env.DATABASE_URL ? await serverSchema('bcms_cli_deploy_keys') : undefined;
    const target = server ? { env: { DATABASE_URL: server.url }, args: [] } : { env: {}, args: ['--pglite', path.join(project, 'data')] };
    try {
      const c = capture(target.env);
      const code = await main(['keys', 'create', '--name', 'deployer', '--deploy', '--expires', '30d', '--env-file', '.env', ...target.args], { ...c.io, cwd: project });
      expect({ code, err: c.err() }).toEqual({ code: 0, err: '' });
      expect(fs.statSync(path.join(project, 'bcms-deploy-key.pem')).mode & 0o777).toBe(0o600);
      const env = fs.readFileSync(path.join(project, '.env'), 'utf8');
      expect(env).toMatch(/^BCMS_KEY_ID=[0-9a-f-]{36}\nBCMS_PRIVATE_KEY_FILE=bcms-deploy-key\.pem\n$/);
      const database = openDatabase(server ? server.url : { pglite: path.join(project, 'data') });
      const [key] = await listApiKeys(database.knex);
      expect(key).toMatchObject({ id: /BCMS_KEY_ID=(\S+)/.exec(env)?.[1], algorithm: 'ed25519', deploy: true, expiresAt: expect.any(Number) });
      expect(key!.expiresAt! - Date.now()).toBeGreaterThan(29 * 86_400_000);
      await database.close();
    } finally {
      await server?.drop();
      fs.rmSync(project, { recursive: true, force: true });
    }
  }, 60_000);

  test('list, block and delete leave a database never migrated as it is', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-empty-'));
    // A new embedded database is made migrated (from the template): taken back to one never migrated.
    const made = openDatabase({ pglite: dir });
    await made.knex.migrate.rollback({ directory: MIGRATIONS_DIRECTORY, tableName: MIGRATIONS_TABLE, loadExtensions: ['.js'] }, true);
    await made.knex.schema.dropTable(`${MIGRATIONS_TABLE}_lock`).dropTable(MIGRATIONS_TABLE);
    await made.close();
    expect(await run(['keys', 'list', '--pglite', dir])).toMatchObject({ code: 0, out: 'No API keys. Create one with: bcms-ext keys create --name NAME --functions FUNCTION\n' });
    const database = openDatabase({ pglite: dir });
    expect(await database.knex.schema.hasTable('bcms_migrations')).toBe(false);
    await database.close();
  }, 60_000);

  test('a PGlite directory another router holds: exit 1 with the reason, no stack trace', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-keys-locked-'));
    const holder = openDatabase({ pglite: dir }, {}, { info() {}, debug() {}, warn() {}, error() {} });
    try {
      const listed = await run(['keys', 'list', '--pglite', dir]);
      expect(listed.code).toBe(1);
      expect(listed.err).toMatch(
        /^bcms-ext keys: the PGlite data directory .* is in use by another router of this process \(close it first: router\.close\(\)\): an embedded database has one owner at a time\. Stop that one, or give this one another directory \(or a Postgres server through DATABASE_URL\)\n$/,
      );
      expect(listed.err).not.toMatch(/\n\s+at /);
    } finally {
      await holder.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an unreachable database: exit 1 and what to check', async () => {
    const down = await run(['keys', 'list', '--database', 'postgres://postgres@127.0.0.1:1/none']);
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/^bcms-ext keys: cannot reach postgres:\/\/127\.0\.0\.1:1\/none: .*Check that the database is running and reachable\.\n$/);
  });
});

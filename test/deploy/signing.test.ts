import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { main } from '../../lib/cli/main';
import { isTrusted, resolveTrustedKeys, signBundle, type BundleSignature } from '../../lib/deploy/signing';
import { DEPLOYMENTS_TABLE, recordDeployment } from '../../lib/deploy/store';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { bundle, functionSource, signed, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// Code signing (DESIGN.md "Trust"): with deploy.trustedKeys, a bundle runs only when a pinned key
// signed it, checked at upload and, by every instance, again before it runs a version.
// Every router gives loads and calls all the time a loaded machine may need (ROOMY): no limit is checked here.

const pair = () => {
  const keys = generateKeyPairSync('ed25519');
  return { privatePem: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), publicPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString() };
};
const author = pair();
const stranger = pair();

type Bundle = { manifest: ReturnType<typeof bundle>['manifest'] & { project?: string }; code: string; ui?: Record<string, string>; signature?: BundleSignature };
const signedBy = (b: Bundle, privatePem: string): Bundle => ({ ...b, signature: signBundle({ ...b.manifest, code: b.code, ui: b.ui ?? null }, privatePem) });

describe('signatures of bundles', () => {
  const trusted = resolveTrustedKeys([author.publicPem])!;
  const base = { ...bundle('plugin', 'stats', 'module.exports = 1;', { project: 'p-1' }), ui: { 'index.html': Buffer.from('<p>hi</p>').toString('base64') } };
  const content = (b: Bundle) => ({ ...b.manifest, code: b.code, ui: b.ui ?? null });

  test('a signature covers kind, name, version, project, code and every UI file', () => {
    const good = signedBy(base, author.privatePem);
    expect(isTrusted(content(good), good.signature, trusted)).toBe(true);
    const changes: Bundle[] = [
      { ...good, code: 'module.exports = 2;' },
      { ...good, manifest: { ...good.manifest, name: 'other' } },
      { ...good, manifest: { ...good.manifest, version: '9.9.9' } },
      { ...good, manifest: { ...good.manifest, project: 'p-2' } },
      { ...good, ui: { ...good.ui, 'index.html': Buffer.from('<p>changed</p>').toString('base64') } },
      { ...good, ui: { ...good.ui, 'extra.js': 'YQ==' } },
    ];
    for (const changed of changes) expect(isTrusted(content(changed), good.signature, trusted)).toBe(false);
    expect(isTrusted(content(base), signedBy(base, stranger.privatePem).signature, trusted)).toBe(false);
    expect(isTrusted(content(base), undefined, trusted)).toBe(false);
  });

  test('deploy.trustedKeys must be PEM public keys, Ed25519 or RSA of 2048 bits or more', () => {
    expect(() => resolveTrustedKeys([])).toThrow('option deploy.trustedKeys must be a non-empty array of PEM public keys');
    expect(() => resolveTrustedKeys([author.privatePem])).toThrow('option deploy.trustedKeys[0] is not a PEM public key');
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(() => resolveTrustedKeys([author.publicPem, small])).toThrow(/deploy\.trustedKeys\[1\] is not a PEM public key \(Ed25519, or RSA of 2048 bits or more\): a signing key must be/);
    expect(() => bcmsExtensions({}, { deploy: { trustedKey: [] } as never })).toThrow('unknown option "deploy.trustedKey"');
  });
});

describe.each(backends())('a service with deploy.trustedKeys (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  const log = memoryLogger();
  const fn = (name: string, answer: string, version = '1.0.0'): Bundle => bundle('function', name, functionSource(name, `async () => ${JSON.stringify(answer)}`), { version });
  const deployBundle = (b: Bundle) => signed(app, 'POST', '/api/extensions/deployments', deployer, b);

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    router = bcmsExtensions({}, { database: db.knex, logger: log.logger, deploy: { trustedKeys: [author.publicPem] }, ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
  });
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  test('an unsigned bundle, or one a stranger signed, is refused at upload (403 BUNDLE_UNTRUSTED); one the author signed goes live', async () => {
    const unsigned = await deployBundle(fn('greet', 'unsigned'));
    expect(unsigned.status).toBe(403);
    expect(unsigned.body.message).toMatch(/^The bundle is not signed: this service runs only bundles signed by a key in its deploy\.trustedKeys\. Sign with BCMS_SIGNING_KEY_FILE/);
    const foreign = await deployBundle(signedBy(fn('greet', 'foreign'), stranger.privatePem));
    expect(foreign.status).toBe(403);
    expect(foreign.body.message).toMatch(/^The bundle is signed by key [0-9a-f]{16}, which the service does not trust/);
    expect((await request(app).post('/api/function/greet')).status).toBe(404);
    expect((await deployBundle(signedBy(fn('greet', 'signed'), author.privatePem))).status).toBe(201);
    expect((await request(app).post('/api/function/greet')).body).toEqual({ success: true, result: 'signed' });
    expect(log.text()).not.toContain('deployed bundles are not signed');
  });

  test('a signature that does not match the bundle (code changed after signing) is refused', async () => {
    const good = signedBy(fn('tampered', 'good'), author.privatePem);
    const changed = { ...fn('tampered', 'evil'), signature: good.signature };
    const res = await deployBundle(changed);
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/^The bundle has a signature that does not match its content/);
  });

  test('a version put into bcms_deployments by hand never runs: another instance starting on the database refuses it, and says why', async () => {
    await recordDeployment(db.knex, {
      kind: 'function',
      name: 'by-hand',
      project: null,
      version: '1.0.0',
      sha256: 'x',
      code: functionSource('by-hand', 'async () => "pwned"'),
      ui: null,
      signature: null,
      deployedBy: 'nobody',
    });
    // A signed version whose code was then changed in the database: refused as well.
    expect((await deployBundle(signedBy(fn('edited', 'original'), author.privatePem))).status).toBe(201);
    await db
      .knex(DEPLOYMENTS_TABLE)
      .where({ name: 'edited', active: true })
      .update({ code: functionSource('edited', 'async () => "edited in the database"') });
    const instanceLog = memoryLogger();
    const instance = bcmsExtensions({}, { database: db.knex, logger: instanceLog.logger, deploy: { trustedKeys: [author.publicPem] }, ...ROOMY });
    try {
      const instanceApp = express().use(instance);
      await instance.ready;
      for (const name of ['by-hand', 'edited']) {
        const res = await request(instanceApp).post(`/api/function/${name}`);
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('FUNCTION_NOT_FOUND');
      }
      expect((await request(instanceApp).post('/api/function/greet')).body.result).toBe('signed');
      const failures = instanceLog.lines.filter((line) => line.msg === 'bcms-extensions: a deployment failed to load on this instance');
      // (Each at least once: a notification of the other instance's deploys makes it load them again.)
      expect([...new Set(failures.map((line) => String(line.extension).replace(/^function (.+)@.*$/, '$1')))].sort()).toEqual(['by-hand', 'edited']);
      expect(JSON.stringify(failures)).toContain('is not signed');
      expect(JSON.stringify(failures)).toContain('has a signature that does not match its content');
    } finally {
      await instance.close();
    }
  });

  test('rollback to a version no pinned key signed is refused, and nothing changes', async () => {
    // An unsigned version, as a service without trustedKeys took it, then a signed one over it.
    await recordDeployment(db.knex, {
      kind: 'function',
      name: 'roll',
      project: null,
      version: '1.0.0',
      sha256: 'x',
      code: functionSource('roll', 'async () => "old"'),
      ui: null,
      signature: null,
      deployedBy: 'before',
    });
    expect((await deployBundle(signedBy(fn('roll', 'new', '2.0.0'), author.privatePem))).status).toBe(201);
    const res = await signed(app, 'POST', '/api/extensions/deployments/function/roll/rollback', deployer);
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/^Version 1\.0\.0 of function "roll" is not signed/);
    expect((await request(app).post('/api/function/roll')).body.result).toBe('new');
  });

  test('the same code deployed signed over an unsigned live version is stored (not answered "unchanged")', async () => {
    const code = fn('resign', 'same');
    await recordDeployment(db.knex, {
      kind: 'function',
      name: 'resign',
      project: null,
      version: '1.0.0',
      sha256: code.manifest.sha256,
      code: code.code,
      ui: null,
      signature: null,
      deployedBy: 'before',
    });
    const res = await deployBundle(signedBy(code, author.privatePem));
    expect(res.status).toBe(201);
    expect((await request(app).post('/api/function/resign')).body.result).toBe('same');
  });
});

test('without deploy.trustedKeys: unsigned bundles deploy as before, and the start warns', async () => {
  const db = await openTestDatabase('pglite');
  const log = memoryLogger();
  const router = bcmsExtensions({}, { database: db.knex, logger: log.logger, ...ROOMY });
  try {
    const app = express().use(router);
    await router.ready;
    const deployer = await hmacKey(db.knex, [], { deploy: true });
    const res = await signed(app, 'POST', '/api/extensions/deployments', deployer, bundle('function', 'free', functionSource('free', 'async () => 1')));
    expect(res.status).toBe(201);
    expect(log.lines.some((line) => line.level === 40 && String(line.msg).startsWith('bcms-extensions: deployed bundles are not signed'))).toBe(true);
  } finally {
    await router.close();
    await db.close();
  }
}, 60_000);

test('bcms-ext signing-key writes the private key (0600, never over a file) and prints the public key; deploy signs with BCMS_SIGNING_KEY_FILE', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-signing-'));
  const out: string[] = [];
  const io = { out: (text: string) => void out.push(text), err: (text: string) => void out.push(text), env: {}, cwd: dir };
  expect(await main(['signing-key'], io)).toBe(0);
  const file = path.join(dir, 'bcms-signing-key.pem');
  expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  const publicPem = /-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----\n/.exec(out.join(''))?.[0];
  expect(publicPem).toBeDefined();
  out.length = 0;
  expect(await main(['signing-key'], io)).toBe(1);
  expect(out.join('')).toContain('it exists (a signing key is never overwritten: give --out another file)');

  // A service that trusts that key, and a bundle made before the key was set: signed on its way out.
  const db = await openTestDatabase('pglite');
  const router = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger, deploy: { trustedKeys: [publicPem!] }, ...ROOMY });
  const server = express().use(router).listen(0, '127.0.0.1');
  const listening = new Promise((resolve) => server.once('listening', resolve));
  try {
    await router.ready;
    await listening;
    const deployer = await hmacKey(db.knex, [], { deploy: true });
    fs.mkdirSync(path.join(dir, 'bcms-bundle'));
    const bundleFile = path.join(dir, 'bcms-bundle', 'function-inked.json');
    fs.writeFileSync(bundleFile, JSON.stringify(bundle('function', 'inked', functionSource('inked', 'async () => "signed by the CLI"'))));
    const env = { BCMS_URL: `http://127.0.0.1:${(server.address() as { port: number }).port}`, BCMS_KEY_ID: deployer.keyId, BCMS_KEY_SECRET: deployer.secret };
    out.length = 0;
    expect(await main(['deploy', bundleFile], { ...io, env })).toBe(1);
    expect(out.join('')).toContain('is not signed');
    out.length = 0;
    expect(await main(['deploy', bundleFile], { ...io, env: { ...env, BCMS_SIGNING_KEY_FILE: 'bcms-signing-key.pem' } })).toBe(0);
    expect(out.join('')).toMatch(/Deploying function inked 1\.0\.0 \([\d.]+ KB\) to http:\/\/127\.0\.0\.1:\d+\.\.\. live\./);
  } finally {
    server.close();
    await router.close();
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { createTestService, type TestService } from '../../lib/testing';
import { backends, serverSchema } from '../support/database';
import { bundle, functionSource } from '../support/deploy';

// The test kit as an extension's tests use it: a registry on a database of the service's own,
// tokens, signed calls, deployed bundles and seeded content, all over real HTTP.

const notes = createBcmsPlugin({
  name: 'notes',
  controllers: [
    createController({
      name: 'Notes',
      path: '/notes',
      methods: () => ({
        open: createControllerMethod({ path: '/open', type: 'get', handler: async () => ({ open: true }) }),
        mine: createControllerMethod({
          path: '/mine',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
          handler: async ({ accessToken, repo }) => ({
            userId: accessToken.payload.userId,
            templates: (await repo.template.findAll()).map((template) => template.name),
          }),
        }),
      }),
    }),
  ],
});

const countEntries = createBcmsFunction(async () => ({
  config: { name: 'count-entries', public: false },
  handler: async ({ request, repo, errorHandler }) => {
    const template = await repo.template.findByName(String(request.body?.template));
    if (template === null) throw errorHandler.occurred(404, 'No such template.');
    const entries = await repo.entry.findAllByTemplateId(template._id);
    return { count: entries.length, titles: entries.map((entry) => entry.meta[0]?.props[0]?.data) };
  },
}));

const registry = { plugins: [notes], functions: [countEntries] };
const bundles = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-kit-bundles-'));
afterAll(() => fs.rmSync(bundles, { recursive: true, force: true }));

/** A bundle file as `bcms-ext bundle` writes one. */
function writeBundle(file: string, kind: 'plugin' | 'function', name: string, code: string): string {
  const target = path.join(bundles, file);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, JSON.stringify(bundle(kind, name, code)));
  return target;
}

describe.each(backends())('createTestService on %s', (backend) => {
  let service: TestService;
  let drop = async (): Promise<void> => {};
  beforeAll(async () => {
    let database: string | undefined;
    if (backend === 'postgres') ({ url: database, drop } = await serverSchema('bcms_kit'));
    service = await createTestService(registry, database === undefined ? {} : { database });
  }, 60_000);
  afterAll(async () => {
    await service.close();
    await drop();
  });

  test('app is the router on an Express app, for supertest; url is the same app listening', async () => {
    expect((await request(service.app).get('/api/plugin/notes/notes/open')).body).toEqual({ open: true });
    expect(service.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const answer = await fetch(`${service.url}/api/plugin/notes/notes/open`);
    expect([answer.status, await answer.json()]).toEqual([200, { open: true }]);
  });

  test('token({ roles }): a role name holds every permission; the detailed forms hold what they list', async () => {
    const mine = (token?: string) =>
      request(service.app)
        .get('/api/plugin/notes/notes/mine')
        .set(token === undefined ? {} : { Authorization: `Bearer ${token}` });
    expect((await mine()).status).toBe(401);
    expect((await mine(service.token({ roles: ['ADMIN'] }))).body).toEqual({ userId: 'test-user', templates: expect.any(Array) });
    expect((await mine(service.token({ roles: [{ name: 'USER', permissions: ['READ'] }], userId: 'ada' }))).body).toMatchObject({ userId: 'ada' });
    expect((await mine(service.token({ roles: [{ name: 'USER', permissions: [{ name: 'READ' }] }] }))).status).toBe(200);
    // Roles the guard does not list, or without its permission, or none: 403.
    for (const roles of [['EDITOR'], [{ name: 'ADMIN', permissions: ['WRITE', 'DELETE'] }], []] as const) {
      const refused = await mine(service.token({ roles }));
      expect([refused.status, refused.body]).toEqual([403, { message: 'Token is not authorized for this action.' }]);
    }
    const expired = await mine(service.token({ roles: ['ADMIN'], expiresIn: -10 }));
    expect([expired.status, expired.body]).toEqual([401, { message: 'Token has expired.' }]);
  });

  test('token(): BCMS payload shape, all four permissions for a role name, props passed on', () => {
    const [, payload] = service.token({ roles: ['SUDO'], props: { email: 'a@example.com' } }).split('.');
    expect(JSON.parse(Buffer.from(payload as string, 'base64url').toString())).toEqual({
      userId: 'test-user',
      rls: [{ name: 'SUDO', permissions: [{ name: 'READ' }, { name: 'WRITE' }, { name: 'DELETE' }, { name: 'EXECUTE' }] }],
      props: { email: 'a@example.com' },
      iat: expect.any(Number),
      exp: expect.any(Number),
    });
  });

  test('seed.template and seed.entry write BCMS shapes that handlers read; signedCall calls a private function signed', async () => {
    const blog = await service.seed.template({ label: 'Blog posts', props: [] });
    expect(blog).toMatchObject({ _id: expect.any(String), name: 'blog_posts', label: 'Blog posts', desc: '', singleEntry: false, props: [] });
    const first = await service.seed.entry(blog, { meta: [{ lng: 'en', props: [{ id: 'title', data: ['First'] }] }] });
    expect(first).toMatchObject({ templateId: blog._id, status: '', meta: [{ lng: 'en', props: [{ id: 'title', data: ['First'] }] }], content: [] });
    await service.seed.entry(blog._id, { meta: [{ lng: 'en', props: [{ id: 'title', data: ['Second'] }] }], status: 'draft' });

    const answer = await service.signedCall('count-entries', { template: 'blog_posts' });
    expect([answer.status, answer.body]).toEqual([200, { success: true, result: { count: 2, titles: [['First'], ['Second']] } }]);
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    // The same call unsigned is refused: the signature is what let it through.
    const unsigned = await fetch(`${service.url}/api/function/count-entries`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect([unsigned.status, ((await unsigned.json()) as { error: { code: string } }).error.code]).toEqual([401, 'SIGNATURE_REQUIRED']);
    // Errors come back as the service answered them.
    expect(await service.signedCall('count-entries', { template: 'nothing' })).toMatchObject({ status: 404, body: { success: false, error: { code: 'HANDLER_ERROR', message: 'No such template.' } } });
    expect(await service.signedCall('no-such-function')).toMatchObject({ status: 404, body: { success: false, error: { code: 'FUNCTION_NOT_FOUND' } } });
    // What was seeded, the guarded plugin endpoint lists too.
    const listed = await request(service.app)
      .get('/api/plugin/notes/notes/mine')
      .set('Authorization', `Bearer ${service.token({ roles: ['USER'] })}`);
    expect(listed.body.templates).toContain('blog_posts');
  });

  test('deploy(file) deploys a bundle as bcms-ext deploy does; it is live at once, and a second deploy is unchanged', async () => {
    const file = writeBundle(`${backend}/one/function-kit-greet.json`, 'function', 'kit-greet', functionSource('kit-greet', 'async ({ request }) => ({ greeting: "Hi, " + request.body.name })'));
    expect(await service.deploy(file)).toEqual([{ kind: 'function', name: 'kit-greet', version: '1.0.0', unchanged: false }]);
    const called = await service.signedCall('kit-greet', { name: 'Ada' });
    expect(called.body).toEqual({ success: true, result: { greeting: 'Hi, Ada' } });
    expect(await service.deploy(file)).toEqual([{ kind: 'function', name: 'kit-greet', version: '1.0.0', unchanged: true }]);
  }, 60_000);

  test('deploy(folder) deploys every bundle in it, as bcms-ext deploy deploys bcms-bundle/', async () => {
    writeBundle(`${backend}/many/function-kit-a.json`, 'function', 'kit-a', functionSource('kit-a', 'async () => "a"'));
    writeBundle(`${backend}/many/function-kit-b.json`, 'function', 'kit-b', functionSource('kit-b', 'async () => "b"'));
    const folder = path.join(bundles, backend, 'many');
    expect((await service.deploy(folder)).map(({ name }) => name)).toEqual(['kit-a', 'kit-b']);
    expect((await service.signedCall('kit-b')).body).toEqual({ success: true, result: 'b' });
  }, 60_000);

  test('deploy() rejects with the reason: a bundle that does not load, a file that is not a bundle, no file', async () => {
    const broken = writeBundle(`${backend}/broken/function-kit-broken.json`, 'function', 'kit-broken', `${functionSource('kit-broken', 'async () => 1')}\nthrow new Error('missing configuration');`);
    await expect(service.deploy(broken)).rejects.toThrow('deploy(): the service refused function-kit-broken.json (422 The bundle did not load: missing configuration)');
    expect((await service.signedCall('kit-broken')).status).toBe(404);
    const notBundle = path.join(bundles, backend, 'broken', 'package.json');
    fs.writeFileSync(notBundle, '{"name":"x"}');
    await expect(service.deploy(notBundle)).rejects.toThrow(`deploy(): ${notBundle} is not a bundle (no manifest)`);
    fs.writeFileSync(notBundle, 'not json');
    await expect(service.deploy(notBundle)).rejects.toThrow(`deploy(): cannot read the bundle ${notBundle}: Unexpected token`);
    const missing = path.join(bundles, backend, 'nowhere');
    await expect(service.deploy(missing)).rejects.toThrow(`deploy(): ${missing} does not exist: run bcms-ext bundle first (npm run bundle), which writes bcms-bundle/`);
    fs.mkdirSync(path.join(bundles, backend, 'empty'));
    await expect(service.deploy(path.join(bundles, backend, 'empty'))).rejects.toThrow('deploy(): no bundle in');
  }, 60_000);

  test('bad input to token, signedCall, deploy and seed: a TypeError that says what to give', async () => {
    const token = (input: unknown) => () => service.token(input as never);
    expect(token(undefined)).toThrow("token({ roles }) takes an object, such as token({ roles: ['ADMIN'] })");
    expect(token({})).toThrow("token({ roles }): roles must be an array, such as ['ADMIN'] or [{ name: 'USER', permissions: ['READ'] }]; got undefined");
    expect(token({ roles: ['ADMNI'] })).toThrow('token({ roles }): roles[0]: "ADMNI" is not a role name (one of SUDO, DEV, ADMIN, OWNER, MANAGER, SERVICE, EDITOR, SUPPORT, USER, GUEST)');
    expect(token({ roles: [{ name: 'USER' }] })).toThrow("token({ roles }): roles[0].permissions must be an array, such as ['READ', 'WRITE'] ([] for none); got undefined");
    expect(token({ roles: [{ name: 'USER', permissions: ['READ', 'RUN'] }] })).toThrow(
      'token({ roles }): roles[0].permissions[1]: "RUN" is not a permission name (one of READ, WRITE, DELETE, EXECUTE)',
    );
    expect(token({ roles: [{ name: 'USER', permissions: [], extra: 1 }] })).toThrow('token({ roles }): roles[0] has "extra": a role is { name, permissions }');
    expect(token({ roles: [42] })).toThrow('token({ roles }): roles[0] must be a role name or { name, permissions }; got 42');
    expect(token({ roles: [], role: 'ADMIN' })).toThrow('token(): unknown option "role" (known: roles, userId, props, expiresIn)');
    expect(token({ roles: [], userId: 7 })).toThrow('token(): userId must be a non-empty string; got 7');
    expect(token({ roles: [], expiresIn: {} })).toThrow("token(): expiresIn must be seconds or a span such as '1h'; got {}");

    await expect(service.signedCall('../keys')).rejects.toThrow('signedCall(name, body): name must be a function\'s name (letters, digits, "-", "_", ".", "~"); got "../keys"');
    await expect(service.signedCall(undefined as never)).rejects.toThrow(TypeError);
    await expect(service.signedCall('count-entries', { n: 1n })).rejects.toThrow('signedCall("count-entries", body): body cannot be sent as JSON (Do not know how to serialize a BigInt)');
    await expect(service.signedCall('count-entries', () => 1)).rejects.toThrow('signedCall("count-entries", body): body cannot be sent as JSON (a function)');
    await expect(service.deploy(42 as never)).rejects.toThrow('deploy(file): file must be the path of a bundle (bcms-bundle/<kind>-<name>.json) or of its folder; got 42');

    await expect(service.seed.template({} as never)).rejects.toThrow('seed.template(): label must be a non-empty string; got undefined');
    await expect(service.seed.template({ lable: 'Blog' } as never)).rejects.toThrow('seed.template(): unknown field "lable" (known: label, name, desc, singleEntry, props)');
    await expect(service.seed.template({ label: '!!!' })).rejects.toThrow('seed.template(): label "!!!" makes no template name (lower-case letters, digits and "_"): give a name');
    await expect(service.seed.template({ label: 'Pages', props: {} as never })).rejects.toThrow('seed.template(): props must be an array of BCMS props; got {}');
    await service.seed.template({ label: 'Pages' });
    await expect(service.seed.template({ label: 'Pages' })).rejects.toThrow('seed.template(): a template named "pages" exists');
    await expect(service.seed.entry(undefined as never)).rejects.toThrow('seed.entry(): the first argument must be a template or its _id (what seed.template() resolves to); got undefined');
    await expect(service.seed.entry('not-an-id')).rejects.toThrow('seed.entry(): templateId "not-an-id" is not a template id');
    await expect(service.seed.entry('00000000-0000-4000-8000-000000000000')).rejects.toThrow('seed.entry(): no template with id "00000000-0000-4000-8000-000000000000"');
    const pages = (await service.router.repo.template.findByName('pages'))!;
    await expect(service.seed.entry(pages, { meta: [{ props: [] }] } as never)).rejects.toThrow("seed.entry(): meta[0].lng must be a language code such as 'en'; got undefined");
    await expect(service.seed.entry(pages, { meta: [{ lng: 'en', props: [{ data: [] }] }] } as never)).rejects.toThrow(
      'seed.entry(): meta[0].props[0] must be { id, data } with id a string; got {"data":[]}',
    );
    await expect(service.seed.entry(pages, { meta: { lng: 'en' } } as never)).rejects.toThrow('seed.entry(): meta must be [{ lng: \'en\', props: [{ id, data }] }]; got {"lng":"en"}');
    await expect(service.seed.entry(pages, { title: 'x' } as never)).rejects.toThrow('seed.entry(): unknown field "title" (known: meta, content, status, userId)');
  });
});

describe('createTestService: its defaults and its own options', () => {
  test('an in-memory PGlite database even when DATABASE_URL is set, a temporary files.dir; close() gives everything back', async () => {
    const before = process.env.DATABASE_URL;
    process.env.DATABASE_URL = 'postgres://nobody@127.0.0.1:1/never';
    let service: TestService;
    try {
      service = await createTestService();
    } finally {
      if (before === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = before;
    }
    expect(service.router.db.client.config.client).not.toBe('pg');
    expect((await service.seed.template({ label: 'Kept in memory' })).name).toBe('kept_in_memory');
    await service.close();
    await service.close(); // twice: the same
    await expect(fetch(`${service.url}/api/function/x`, { method: 'POST' })).rejects.toThrow();
    expect(() => service.token({ roles: ['ADMIN'] })).toThrow('token(): this test service is closed');
    await expect(service.signedCall('x')).rejects.toThrow('signedCall(): this test service is closed');
    await expect(service.deploy('x')).rejects.toThrow('deploy(): this test service is closed');
    await expect(service.seed.template({ label: 'Late' })).rejects.toThrow('seed: this test service is closed');
  }, 60_000);

  test('the files.dir it made is removed by close(), one given is left', async () => {
    const own = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-kit-files-'));
    const given = await createTestService({}, { files: { dir: own } });
    await given.close();
    expect(fs.existsSync(own)).toBe(true);
    fs.rmSync(own, { recursive: true });
    const tmpBefore = new Set(fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith('bcms-test-service-')));
    const made = await createTestService();
    const mine = fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith('bcms-test-service-') && !tmpBefore.has(name));
    expect(mine).toHaveLength(1);
    await made.close();
    expect(fs.existsSync(path.join(os.tmpdir(), mine[0] as string))).toBe(false);
  }, 60_000);

  test('jwt options the service verifies with: issuer and audience go into its tokens; a key it cannot sign with is said at token()', async () => {
    const service = await createTestService(registry, { jwt: { secret: 'a-secret-of-the-tests-own-123456', algorithms: ['HS512'], issuer: 'kit', audience: 'site' } });
    try {
      const token = service.token({ roles: ['ADMIN'] });
      expect(JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString())).toEqual({ alg: 'HS512', typ: 'JWT' });
      expect((await request(service.app).get('/api/plugin/notes/notes/mine').set('Authorization', `Bearer ${token}`)).status).toBe(200);
    } finally {
      await service.close();
    }
    const callback = await createTestService({}, { jwt: { secret: () => 'from-a-callback' } });
    try {
      expect(() => callback.token({ roles: ['ADMIN'] })).toThrow(
        "token(): the kit signs tokens with a shared secret, and this service verifies them otherwise: give createTestService { jwt: { secret: '<a string>' } } with an HS256, HS384 or HS512 algorithm, or sign the tokens yourself",
      );
    } finally {
      await callback.close();
    }
  }, 60_000);

  test('a registry or options that cannot work are refused, and leave nothing open', async () => {
    await expect(createTestService(null as never)).rejects.toThrow('createTestService(registry, options?): registry must be { plugins?, functions? }; got null');
    await expect(createTestService([] as never)).rejects.toThrow('registry must be { plugins?, functions? }; got []');
    await expect(createTestService({}, 'memory' as never)).rejects.toThrow('createTestService(registry, options?): options must be the router\'s options object; got "memory"');
    await expect(createTestService({}, { databse: 'x' } as never)).rejects.toThrow('unknown option "databse"');
    // (Its own logger: the router logs why it could not start, which is this test's doing.)
    await expect(createTestService({ functions: [countEntries, countEntries] }, { logger: pino({ level: 'silent' }) })).rejects.toThrow(
      'duplicate function name "count-entries" in registry.functions',
    );
  }, 60_000);
});

import { BCMSRouteProtection, createBcmsPlugin, createController, createControllerMethod, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, type TestApp } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { expireKey, hmacKey, inAnHour, signedPost } from '../support/signature';

// Written in BCMS v3's idiom: a route guarded by BCMS's createJwtApiPreRequestHandler refuses a key
// past its expiry with 401 KEY_EXPIRED, as functions and deploys do (test/security/key-expiry.test.ts).

const todo = createBcmsPlugin({
  name: 'todo',
  controllers: [
    createController({
      name: 'Todo',
      path: '/todo',
      methods: () => ({
        list: createControllerMethod({
          type: 'post',
          preRequestHandler: BCMSRouteProtection.createJwtApiPreRequestHandler({ roleNames: [JWTRoleName.ADMIN], permissionName: JWTPermissionName.READ }),
          handler: async ({ key }) => ({ by: key?.name }),
        }),
      }),
    }),
  ],
});

const SIGNATURE_CHALLENGE = 'Signature realm="bcms",headers="(request-target) date digest"';

describe.each(backends())('a key-guarded plugin route and an expired key (%s)', (backend) => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await openTestDatabase(backend);
    t = await buildApp({ plugins: [todo] }, { database: db.knex });
  });
  afterAll(async () => {
    await t.router.close();
    await db.close();
  });

  /** Time passes for a key: createApiKey takes no expiry in the past. Resolves to when it expired. */
  const expire = (id: string): Promise<string> => expireKey(db.knex, id);

  test('a plugin route guarded by createJwtApiPreRequestHandler: 401 { message }', async () => {
    const key = await hmacKey(db.knex, [], { plugins: ['todo'], expiresAt: inAnHour() });
    const before = await signedPost(t.app, '/api/plugin/todo/todo', key, {});
    expect([before.status, before.body]).toEqual([200, { by: 'test key' }]);
    const fresh = await hmacKey(db.knex, [], { plugins: ['todo'], expiresAt: inAnHour() });
    const when = await expire(fresh.keyId);
    const res = await signedPost(t.app, '/api/plugin/todo/todo', fresh, {});
    expect([res.status, res.body]).toEqual([401, { message: `This API key expired at ${when}: sign with a key that has not (bcms-ext keys create).` }]);
    expect(res.headers['www-authenticate']).toBe(SIGNATURE_CHALLENGE);
  });
});

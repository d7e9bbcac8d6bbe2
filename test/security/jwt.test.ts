import { generateKeyPairSync } from 'node:crypto';
import request from 'supertest';
import jwt from 'jsonwebtoken';
import { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from '../../lib';
import { buildApp, JWT_SECRET, role, signToken, type TestApp } from '../support/app';

const guarded = createBcmsPlugin({
  name: 'secure',
  controllers: [
    createController({
      name: 'Me',
      path: '/me',
      methods: () => ({
        read: createControllerMethod({
          path: '/',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
          handler: async ({ accessToken }) => ({ userId: accessToken.payload.userId, alg: accessToken.header.alg }),
        }),
      }),
    }),
  ],
});

const UNDEFINED_BODY = '{"message":"Token is `undefined`."}';

describe('JWT guard on a plugin endpoint', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildApp({ plugins: [guarded] });
  });

  test('no token: 401, exact body, JSON, WWW-Authenticate: Bearer, CORS', async () => {
    const res = await request(t.app).get('/api/plugin/secure/me');
    expect(res.status).toBe(401);
    expect(res.text).toBe(UNDEFINED_BODY);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['www-authenticate']).toBe('Bearer');
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  test('another scheme than Bearer counts as no token', async () => {
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', 'Basic dXNlcjpwYXNz');
    expect(res.status).toBe(401);
    expect(res.text).toBe(UNDEFINED_BODY);
  });

  test('valid token with a listed role holding the permission: 200 and accessToken in the handler', async () => {
    const res = await request(t.app)
      .get('/api/plugin/secure/me')
      .set('Authorization', `Bearer ${signToken([role('USER', 'READ')])}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ userId: 'user-1', alg: 'HS256' });
  });

  test.each([
    ['malformed', 'not.a.token'],
    ['garbage', 'abc'],
    ['wrong secret', signToken(undefined, { secret: 'another-secret-of-enough-length' })],
    ['unsigned (alg none)', jwt.sign({ userId: 'u', rls: [role('ADMIN', 'READ')] }, '', { algorithm: 'none' })],
    ['wrong algorithm (HS512)', jwt.sign({ userId: 'u', rls: [role('ADMIN', 'READ')] }, JWT_SECRET, { algorithm: 'HS512' })],
  ])('%s token: 401 Invalid token.', async (_name, token) => {
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Invalid token.' });
    expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  test('"Bearer" with no token after it is an invalid header: 401 Invalid token.', async () => {
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', 'Bearer');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Invalid token.' });
  });

  test('expired token: 401 Token has expired.', async () => {
    const token = signToken(undefined, { payload: { exp: Math.floor(Date.now() / 1000) - 60 } });
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Token has expired.' });
    expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
  });

  test.each([
    ['listed role without the permission', [role('ADMIN', 'WRITE')]],
    ['permission on an unlisted role', [role('EDITOR', 'READ')]],
    ['no roles', []],
  ])('%s: 403 Token is not authorized for this action.', async (_name, rls) => {
    const res = await request(t.app)
      .get('/api/plugin/secure/me')
      .set('Authorization', `Bearer ${signToken(rls)}`);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: 'Token is not authorized for this action.' });
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  test('payload without a usable rls: 403, not a crash', async () => {
    const token = jwt.sign({ userId: 'u', rls: 'ADMIN' }, JWT_SECRET, { algorithm: 'HS256' });
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(403);
  });
});

describe('JWT options', () => {
  test('issuer and audience are checked when set', async () => {
    const t = await buildApp({ plugins: [guarded] }, { jwt: { secret: JWT_SECRET, issuer: 'cms', audience: 'api' } });
    const good = signToken(undefined, { issuer: 'cms', audience: 'api' });
    const bad = signToken(undefined, { issuer: 'elsewhere', audience: 'api' });
    expect((await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${good}`)).status).toBe(200);
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${bad}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Invalid token.' });
  });

  test('only the configured algorithms are accepted', async () => {
    const t = await buildApp({ plugins: [guarded] }, { jwt: { secret: JWT_SECRET, algorithms: ['HS512'] } });
    const hs512 = jwt.sign({ userId: 'u', rls: [role('ADMIN', 'READ')] }, JWT_SECRET, { algorithm: 'HS512' });
    expect((await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${hs512}`)).status).toBe(200);
    expect((await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${signToken()}`)).status).toBe(401);
  });

  test('"none" among the algorithms is refused when the router is built', async () => {
    await expect(buildApp({}, { jwt: { secret: JWT_SECRET, algorithms: ['none'] } })).rejects.toThrow(/must not contain "none"/);
  });

  test('RS256 with a PEM public key as jwt.secret', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const t = await buildApp({ plugins: [guarded] }, { jwt: { secret: pem, algorithms: ['RS256'] } });
    const token = jwt.sign({ userId: 'rsa-user', rls: [role('ADMIN', 'READ')] }, privateKey, { algorithm: 'RS256', expiresIn: '1m' });
    const res = await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${token}`);
    expect(res.body).toEqual({ userId: 'rsa-user', alg: 'RS256' });
    // An HS256 token signed with the public key text as an HMAC secret (key confusion) is refused.
    const confused = jwt.sign({ userId: 'x', rls: [role('ADMIN', 'READ')] }, pem, { algorithm: 'HS256' });
    expect((await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${confused}`)).status).toBe(401);
  });

  test('a secret callback (express-jwt) works', async () => {
    const t = await buildApp({ plugins: [guarded] }, { jwt: { secret: async () => JWT_SECRET } });
    expect((await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${signToken()}`)).status).toBe(200);
  });

  test('without jwt.secret a guarded endpoint answers 401, with or without a token', async () => {
    const t = await buildApp({ plugins: [guarded] }, { jwt: {} });
    const none = await request(t.app).get('/api/plugin/secure/me');
    expect(none.status).toBe(401);
    expect(none.text).toBe(UNDEFINED_BODY);
    const some = await request(t.app).get('/api/plugin/secure/me').set('Authorization', `Bearer ${signToken()}`);
    expect(some.status).toBe(401);
    expect(some.body).toEqual({ message: 'Invalid token.' });
    expect(some.headers['www-authenticate']).toMatch(/^Bearer\b/);
  });

  test('the guard refuses unknown roles or permissions when it is created', () => {
    expect(() => createJwtProtectionPreRequestHandler([], JWTPermissionName.READ)).toThrow(/non-empty array/);
    expect(() => createJwtProtectionPreRequestHandler(['ROOT' as JWTRoleName], JWTPermissionName.READ)).toThrow(/unknown role name "ROOT"/);
    expect(() => createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], 'ALL' as JWTPermissionName)).toThrow(/unknown permission name "ALL"/);
  });
});

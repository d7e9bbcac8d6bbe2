import request from 'supertest';
import { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName, type JWT } from '../../lib';
import { bearerToken, VerifiedTokenCache } from '../../lib/security/token-cache';
import { buildApp, JWT_SECRET, signToken } from '../support/app';

const plugin = createBcmsPlugin({
  name: 'cache',
  controllers: [
    createController({
      name: 'Me',
      path: '/me',
      methods: () => ({
        read: createControllerMethod({
          path: '/',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ),
          handler: async ({ accessToken, request }) => {
            seenAuth.push((request as { auth?: { userId?: string } }).auth?.userId);
            let mutated = true;
            try {
              (accessToken.payload as { userId: string }).userId = 'someone-else';
            } catch {
              mutated = false;
            }
            return { userId: accessToken.payload.userId, mutated };
          },
        }),
      }),
    }),
  ],
});

const seenAuth: (string | undefined)[] = [];

describe('verified-token cache', () => {
  afterEach(() => jest.restoreAllMocks());

  test('a remembered token still expires at its exp: 401 Token has expired.', async () => {
    const t = await buildApp({ plugins: [plugin] });
    const now = Date.now();
    const token = signToken(undefined, { payload: { exp: Math.floor(now / 1000) + 60 } });
    expect((await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`)).status).toBe(200);
    expect((await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`)).status).toBe(200);
    jest.spyOn(Date, 'now').mockReturnValue(now + 61_000);
    const res = await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Token has expired.' });
  });

  test('the shared token is frozen: one handler cannot change what the next request sees', async () => {
    const t = await buildApp({ plugins: [plugin] });
    const token = signToken();
    for (let i = 0; i < 2; i++) {
      const res = await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`);
      expect(res.body).toEqual({ userId: 'user-1', mutated: false });
    }
  });

  test('req.auth holds the payload on every call, as express-jwt sets it, remembered or not', async () => {
    const t = await buildApp({ plugins: [plugin] });
    const token = signToken();
    seenAuth.length = 0;
    for (let i = 0; i < 2; i++) await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`).expect(200);
    expect(seenAuth).toEqual(['user-1', 'user-1']);
  });

  test('a token with a changed signature is verified anew and refused', async () => {
    const t = await buildApp({ plugins: [plugin] });
    const token = signToken();
    expect((await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`)).status).toBe(200);
    const tampered = `${token.slice(0, -2)}${token.endsWith('AA') ? 'BB' : 'AA'}`;
    expect((await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${tampered}`)).status).toBe(401);
  });

  test('with a secret callback nothing is remembered: the callback is asked every time', async () => {
    let asked = 0;
    const t = await buildApp(
      { plugins: [plugin] },
      {
        jwt: {
          secret: async () => {
            asked++;
            return JWT_SECRET;
          },
        },
      },
    );
    const token = signToken();
    for (let i = 0; i < 3; i++) await request(t.app).get('/api/plugin/cache/me').set('Authorization', `Bearer ${token}`).expect(200);
    expect(asked).toBe(3);
  });

  test('holds at most its capacity, dropping the oldest first', () => {
    const cache = new VerifiedTokenCache(2);
    const jwt = (userId: string): JWT => ({ header: { alg: 'HS256' }, payload: { userId, rls: [], iat: 0, exp: 100 }, signature: 's' });
    cache.set('a', jwt('a'));
    cache.set('b', jwt('b'));
    cache.set('c', jwt('c'));
    expect(cache.size).toBe(2);
    expect(cache.get('a', 50)).toBeUndefined();
    expect(cache.get('c', 50)?.payload.userId).toBe('c');
    expect(cache.get('c', 100)).toBeUndefined(); // now >= exp
  });
});

describe('bearerToken: the token of an Authorization header, split as express-jwt splits it', () => {
  const of = (authorization?: string) => bearerToken({ headers: authorization === undefined ? {} : { authorization } } as never);
  test.each([
    ['Bearer abc.def.ghi', 'abc.def.ghi'],
    ['bearer abc', 'abc'],
    ['BEARER abc', 'abc'],
    ['BeArEr x', 'x'],
  ])('%s', (header, token) => expect(of(header)).toBe(token));
  test.each([[undefined], ['Bearer'], ['Bearer '], ['Bearer  abc'], ['Bearer abc def'], ['Basic abc'], ['Bearerabc'], ['Bearer\tabc'], ['Beare abc'], ['Bearex abc'], ['Bearer_abc']])(
    'no token in %p',
    (header) => expect(of(header)).toBeUndefined(),
  );
});

import { BCMSRouteProtection, createBcmsPlugin, createController, createControllerMethod, JWTPermissionName, JWTRoleName } from '../../lib';
import request from 'supertest';
import { listeningTestApp, role, signToken } from '../support/app';
import { postHead, rawClient } from '../support/raw-http';

// Written in BCMS v3's idiom: BCMS's own body-checking guard decides on the token before the body
// is read, as the core's JWT guard does (test/plugin/body.test.ts; issue 23, item 5).

const MB = 1024 * 1024;

const plugin = createBcmsPlugin({
  name: 'inbox',
  controllers: [
    createController({
      name: 'Inbox',
      path: '/inbox',
      methods: () => ({
        checked: createControllerMethod({
          path: '/checked',
          type: 'post',
          preRequestHandler: BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler({
            roleNames: [JWTRoleName.ADMIN],
            permissionName: JWTPermissionName.WRITE,
            bodySchema: { text: { __type: 'string', __required: true } },
          }),
          handler: async ({ body }) => ({ got: body }),
        }),
      }),
    }),
  ],
});

describe("BCMS's guards answer before the body is read", () => {
  // The body's own time limit is not what is checked: the default's ten seconds, far past a few bytes' time.
  const running = listeningTestApp({ plugins: [plugin] }, { bodyLimit: '2mb' });

  test('BCMSRouteProtection.createJwtAndBodyCheckPreRequestHandler checks the token first too', async () => {
    const client = rawClient(running.port);
    client.write(`${postHead('/api/plugin/inbox/inbox/checked', MB)}{"text":`);
    const answer = await client.next();
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual({ message: 'Token is `undefined`.' });
    client.destroy();
  });

  test('with a good token the body is read, checked against its schema and given to the handler', async () => {
    const writer = signToken([role('ADMIN', 'WRITE')]);
    const checked = await request(running.t.app).post('/api/plugin/inbox/inbox/checked').set('Authorization', `Bearer ${writer}`).send({ text: 'hi' });
    expect(checked.status).toBe(200);
    expect(checked.body).toEqual({ got: { text: 'hi' } });
  });
});

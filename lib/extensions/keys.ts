import type { ContentStore } from '../db/store';
import { BcmsHttpError } from '../http/errors';
import { createController, createControllerMethod } from '../plugin/create';
import type { BcmsController } from '../plugin/types';
import { blockApiKey, checkNewApiKey, createApiKey, deleteApiKey, listApiKeys } from '../security/api-keys';
import { createJwtProtectionPreRequestHandler } from '../plugin/guard';
import { JWTPermissionName, JWTRoleName, tokenAllows, type JWT } from '../security/token';

const admin = (permission: JWTPermissionName) => createJwtProtectionPreRequestHandler([JWTRoleName.SUDO, JWTRoleName.ADMIN], permission);

/**
 * A deploy key runs code on every instance, so an ADMIN token is not enough to make one: only a
 * service that allows it (`keys.deployOverHttp`), and then only a token whose SUDO role holds
 * WRITE. Throws the 403 that says why, and how to get one otherwise.
 */
function checkDeployRight(deployOverHttp: boolean, accessToken: JWT): void {
  const onTheDatabase = 'create it on the database instead: DATABASE_URL=<the database> npx --no bcms-ext keys create --name deployer --deploy';
  if (!deployOverHttp) {
    throw new BcmsHttpError(
      'DEPLOY_KEY_FORBIDDEN',
      `Deploy keys are not created over HTTP on this service (a deploy key runs code on every instance): ${onTheDatabase}. ` +
        'Or let SUDO tokens create them here with the option keys: { deployOverHttp: true }.',
    );
  }
  if (!tokenAllows(accessToken.payload, [JWTRoleName.SUDO], JWTPermissionName.WRITE)) {
    throw new BcmsHttpError('DEPLOY_KEY_FORBIDDEN', `Only a token whose SUDO role holds WRITE may create a deploy key, and this one has none: sign in as a SUDO user, or ${onTheDatabase}.`);
  }
}

/**
 * API key management over HTTP, for `bcms-ext keys` when the service holds the database (embedded
 * PGlite cannot be opened by a second process): `/api/extensions/keys`, for a JWT whose SUDO or
 * ADMIN role holds READ (list), WRITE (create, block) or DELETE (delete). Deploy keys only with
 * `keys.deployOverHttp`, and a SUDO role holding WRITE.
 */
export function createKeysController(store: ContentStore, options: { deployOverHttp: boolean }): BcmsController {
  const knex = store.database.knex;
  const notFound = (id: string) => new BcmsHttpError('KEY_NOT_FOUND', `No API key has the id "${id}".`);
  return createController({
    name: 'API keys',
    path: '/keys',
    methods: () => ({
      list: createControllerMethod({
        path: '/',
        type: 'get',
        preRequestHandler: admin(JWTPermissionName.READ),
        handler: async () => ({ keys: await store.run(() => listApiKeys(knex)) }),
      }),
      create: createControllerMethod({
        path: '/',
        type: 'post',
        preRequestHandler: admin(JWTPermissionName.WRITE),
        handler: async ({ request, response, accessToken }) => {
          const input: unknown = request.body;
          if ((input as { deploy?: unknown } | null)?.deploy === true) checkDeployRight(options.deployOverHttp, accessToken);
          try {
            checkNewApiKey(input);
          } catch (error) {
            throw new BcmsHttpError('BAD_REQUEST', (error as Error).message);
          }
          const created = await store.run(() => createApiKey(knex, input));
          response.status(201);
          return created;
        },
      }),
      block: createControllerMethod({
        path: '/:id/block',
        type: 'post',
        preRequestHandler: admin(JWTPermissionName.WRITE),
        handler: async ({ request }) => {
          const id = request.params.id as string;
          if (!(await store.run(() => blockApiKey(knex, id)))) throw notFound(id);
          return { id, blocked: true };
        },
      }),
      remove: createControllerMethod({
        path: '/:id',
        type: 'delete',
        preRequestHandler: admin(JWTPermissionName.DELETE),
        handler: async ({ request }) => {
          const id = request.params.id as string;
          if (!(await store.run(() => deleteApiKey(knex, id)))) throw notFound(id);
          return { id, deleted: true };
        },
      }),
    }),
  });
}

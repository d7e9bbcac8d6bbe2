import type { ContentStore } from '../db/store';
import { BcmsHttpError } from '../http/errors';
import { createController, createControllerMethod } from '../plugin/create';
import type { BcmsController } from '../plugin/types';
import { blockApiKey, checkNewApiKey, createApiKey, deleteApiKey, listApiKeys } from '../security/api-keys';
import { createJwtProtectionPreRequestHandler } from '../plugin/guard';
import { JWTPermissionName, JWTRoleName } from '../security/token';


const admin = (permission: JWTPermissionName) => createJwtProtectionPreRequestHandler([JWTRoleName.SUDO, JWTRoleName.ADMIN], permission);

/**
 * API key management over HTTP, for `bcms-ext keys` when the service holds the database (embedded
 * PGlite cannot be opened by a second process): `/api/extensions/keys`, for a JWT whose SUDO or
 * ADMIN role holds READ (list), WRITE (create, block) or DELETE (delete).
 */
export function createKeysController(store: ContentStore): BcmsController {
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
        handler: async ({ request, response }) => {
          const input: unknown = request.body;
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

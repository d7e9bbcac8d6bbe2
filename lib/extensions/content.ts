import type { BcmsRepo } from '../db/repository';
import type { BcmsFunction } from '../function/types';
import { BcmsHttpError } from '../http/errors';
import { createController, createControllerMethod } from '../plugin/create';
import type { BcmsController, BcmsPlugin } from '../plugin/types';
import { createJwtProtectionPreRequestHandler } from '../plugin/guard';
import { JWTPermissionName, JWTRoleName } from '../security/token';
import { pluginLabel } from '../ui/assets';

/** Any signed-in user whose role holds READ: what `window.bcms.sdk` reads in a plugin UI. */
const reader = createJwtProtectionPreRequestHandler(Object.values(JWTRoleName), JWTPermissionName.READ);

/**
 * What `window.bcms.sdk` reads: the plugins (with their UI's URL), the functions, and templates
 * and entries in BCMS shapes, for a JWT whose role holds READ.
 */
export function createSdkController(options: {
  /** The registry's plugins and the deployed ones, as they are now. */
  plugins: () => readonly BcmsPlugin[];
  hasUi: (name: string) => boolean;
  functions: () => ReadonlyMap<string, BcmsFunction>;
  repo: BcmsRepo;
}): BcmsController {
  const { plugins, hasUi, functions, repo } = options;
  const notFound = (what: string) => new BcmsHttpError('NOT_FOUND', `${what} not found.`);
  return createController({
    name: 'SDK',
    path: '/',
    methods: () => ({
      plugins: createControllerMethod({
        path: '/plugins',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => ({
          plugins: plugins().map((plugin) => ({ name: plugin.name, label: pluginLabel(plugin), uiUrl: hasUi(plugin.name) ? `${request.baseUrl}/plugin/${plugin.name}/` : null })),
        }),
      }),
      functions: createControllerMethod({
        path: '/functions',
        type: 'get',
        preRequestHandler: reader,
        handler: async () => ({ functions: [...functions().values()].map(({ config }) => ({ name: config.name, public: config.public })) }),
      }),
      templates: createControllerMethod({
        path: '/templates',
        type: 'get',
        preRequestHandler: reader,
        handler: async () => ({ templates: await repo.template.findAll() }),
      }),
      template: createControllerMethod({
        path: '/templates/:id',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => {
          const template = await repo.template.findById(request.params.id as string);
          if (template === null) throw notFound('Template');
          return template;
        },
      }),
      entries: createControllerMethod({
        path: '/templates/:templateId/entries',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => ({ entries: await repo.entry.findAllByTemplateId(request.params.templateId as string) }),
      }),
      entry: createControllerMethod({
        path: '/templates/:templateId/entries/:entryId',
        type: 'get',
        preRequestHandler: reader,
        handler: async ({ request }) => {
          const entry = await repo.entry.findById(request.params.entryId as string);
          if (entry === null || entry.templateId !== request.params.templateId) throw notFound('Entry');
          return entry;
        },
      }),
    }),
  });
}

'use strict';
// A plugin: entry counts per template (open to anyone) and the latest form submissions (signed-in
// readers only), and a UI (Vue 3, .tsx, in content-stats-ui/) listed under "Plugins" in the admin
// shell at /bcms. `npm run build:example-ui` builds it into content-stats-ui/dist.
const path = require('node:path');
const { createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } = require('bcms-extensions');
const { SUBMISSIONS_TEMPLATE } = require('../seed');

const StatsController = createController({
  name: 'Stats',
  path: '/stats',
  methods: () => ({
    counts: createControllerMethod({
      path: '/counts',
      type: 'get',
      // BCMS's doc object: what the OpenAPI document (GET /api/extensions/openapi.json) says of it.
      doc: {
        summary: 'How many entries each template has.',
        response: {
          jsonSchema: {
            counts: {
              __type: 'array',
              __required: true,
              __child: {
                __type: 'object',
                __content: { template: { __type: 'string', __required: true }, label: { __type: 'string', __required: true }, entries: { __type: 'number', __required: true } },
              },
            },
          },
        },
      },
      handler: async ({ repo }) => {
        const templates = await repo.template.findAll();
        const counts = await Promise.all(templates.map(async (template) => ({ template: template.name, label: template.label, entries: await repo.entry.countByTemplateId(template._id) })));
        return { counts };
      },
    }),
    submissions: createControllerMethod({
      path: '/submissions',
      type: 'get',
      doc: {
        summary: 'The latest form submissions, newest first.',
        params: [{ type: 'query', name: 'limit', description: 'How many (1 to 100; 10 when left out).' }],
      },
      preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN, JWTRoleName.USER], JWTPermissionName.READ),
      handler: async ({ repo, request }) => {
        const limit = Math.min(Math.max(Number.parseInt(String(request.query.limit ?? '10'), 10) || 10, 1), 100);
        const template = await repo.template.findByName(SUBMISSIONS_TEMPLATE);
        const entries = await repo.entry.findAllByTemplateId(template._id);
        const recent = entries.slice(-limit).reverse();
        return {
          submissions: recent.map((entry) => ({
            _id: entry._id,
            createdAt: entry.createdAt,
            ...Object.fromEntries(entry.meta[0].props.map((prop) => [prop.id, prop.data[0]])),
          })),
        };
      },
    }),
  }),
});

module.exports = createBcmsPlugin({
  name: 'content-stats',
  controllers: [StatsController],
  ui: { dir: path.join(__dirname, 'content-stats-ui', 'dist'), label: 'Content stats' },
});

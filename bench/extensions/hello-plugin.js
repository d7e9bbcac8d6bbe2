'use strict';
// Deployed by the plugin-get-deployed server (apps.js): this file's text is the bundle's code, as
// `bcms-ext bundle` would write it (CommonJS, bcms-extensions left external). Its handler is the
// one of the registry's `bench` plugin in apps.js: GET /api/plugin/bench/hello/world.
const { createBcmsPlugin, createController, createControllerMethod } = require('bcms-extensions');

module.exports = createBcmsPlugin({
  name: 'bench',
  controllers: [
    createController({
      name: 'Hello',
      path: '/hello',
      methods: () => ({
        world: createControllerMethod({
          path: '/world',
          type: 'get',
          handler: async () => ({ message: 'Hello' }),
        }),
      }),
    }),
  ],
});

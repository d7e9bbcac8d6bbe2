'use strict';
// Deployed by the function-post-deployed server (apps.js): the registry's `echo` of apps.js, as a bundle.
const { createBcmsFunction } = require('bcms-extensions');

exports.default = createBcmsFunction(async () => ({
  config: { name: 'echo', public: true },
  handler: async ({ request }) => request.body,
}));

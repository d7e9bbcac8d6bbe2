'use strict';
// BCMS's documented example function, reading through the handler's `repo` (BCMS's own form, with
// `BCMSRepo.entry.methods`, works too: see the BCMS layer in the README).
const { createBcmsFunction } = require('bcms-extensions');
const { BLOG_TEMPLATE_ID } = require('../seed');

module.exports = createBcmsFunction(async () => {
  return {
    config: {
      name: 'get-all-blogs-titles',
      public: true,
    },
    handler: async ({ repo }) => {
      const blogs = await repo.entry.findAllByTemplateId(BLOG_TEMPLATE_ID);
      return blogs.map((blog) => {
        return {
          _id: blog._id,
          title: blog.meta[0].props[0].data[0],
        };
      });
    },
  };
});

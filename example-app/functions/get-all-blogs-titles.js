'use strict';
// Written as the BCMS documentation writes its example function; only the require line differs.
const { BCMSRepo, createBcmsFunction } = require('bcms-extensions');
const { BLOG_TEMPLATE_ID } = require('../seed');

module.exports = createBcmsFunction(async () => {
  return {
    config: {
      name: 'get-all-blogs-titles',
      public: true,
    },
    handler: async () => {
      const blogs = await BCMSRepo.entry.methods.findAllByTemplateId(BLOG_TEMPLATE_ID);
      return blogs.map((blog) => {
        return {
          _id: blog._id,
          title: blog.meta[0].props[0].data[0],
        };
      });
    },
  };
});

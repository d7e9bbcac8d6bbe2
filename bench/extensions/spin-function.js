'use strict';
// `spin`: a public function that never returns (a loop that does not yield). Deployed by the
// plugin-get-while-spinning server with functionTimeoutMs 1000: every call is answered 504 after
// a second, and its isolate ended and replaced.
const { createBcmsFunction } = require('bcms-extensions');

exports.default = createBcmsFunction(async () => ({
  config: { name: 'spin', public: true },
  handler: async () => {
    while (true) {}
  },
}));

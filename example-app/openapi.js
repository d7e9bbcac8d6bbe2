'use strict';
// The example app's OpenAPI document, as GET /api/extensions/openapi.json serves it: written to
// docs/example-app.openapi.json by `npm run openapi:example` (test/openapi/example-app.test.ts keeps
// the committed copy current). Built on an in-memory database: no data is needed to describe it.
const fs = require('node:fs');
const path = require('node:path');
const { bcmsExtensions } = require('bcms-extensions');
const getAllBlogsTitles = require('./functions/get-all-blogs-titles');
const submitForm = require('./functions/submit-form');
const contentStats = require('./plugins/content-stats');

const FILE = path.join(__dirname, '..', 'docs', 'example-app.openapi.json');

/** The document, as text (two-space JSON and a final newline, as committed). */
async function exampleOpenApi() {
  const router = bcmsExtensions({ plugins: [contentStats], functions: [getAllBlogsTitles, submitForm] }, { database: { pglite: 'memory://' }, logger: silent() });
  try {
    await router.ready;
    return `${JSON.stringify(router.openapi(), null, 2)}\n`;
  } finally {
    await router.close();
  }
}

function silent() {
  const none = () => {};
  const logger = { info: none, warn: none, error: none, debug: none, trace: none, fatal: none, level: 'silent' };
  logger.child = () => logger;
  return logger;
}

if (require.main === module) {
  exampleOpenApi().then(
    (text) => {
      fs.writeFileSync(FILE, text);
      process.stdout.write(`wrote ${path.relative(process.cwd(), FILE)}\n`);
    },
    (error) => {
      process.stderr.write(`${error.stack}\n`);
      process.exitCode = 1;
    },
  );
}

module.exports = { exampleOpenApi, FILE };

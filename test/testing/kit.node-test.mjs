// The test kit under node:test, against the built package (dist/), as an extension's own tests use
// it: run by test/testing/node-test.test.ts through `node --test`. Not a Jest file (.mjs).
// TEST_DATABASE: a Postgres URL to run on instead of the kit's in-memory PGlite.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, createJwtProtectionPreRequestHandler, JWTPermissionName, JWTRoleName } from 'bcms-extensions';
import { createTestService } from 'bcms-extensions/testing';

const shelf = createBcmsPlugin({
  name: 'shelf',
  controllers: [
    createController({
      name: 'Shelf',
      path: '/shelf',
      methods: () => ({
        books: createControllerMethod({
          path: '/books',
          type: 'get',
          preRequestHandler: createJwtProtectionPreRequestHandler([JWTRoleName.EDITOR], JWTPermissionName.READ),
          handler: async ({ repo }) => {
            const books = await repo.template.findByName('book');
            return { titles: books === null ? [] : (await repo.entry.findAllByTemplateId(books._id)).map((entry) => entry.meta[0].props[0].data[0]) };
          },
        }),
      }),
    }),
  ],
});

const lend = createBcmsFunction(async () => ({
  config: { name: 'lend', public: false },
  handler: async ({ request }) => ({ lent: request.body.title }),
}));

let service;
const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-kit-node-test-'));
before(async () => {
  service = await createTestService({ plugins: [shelf], functions: [lend] }, process.env.TEST_DATABASE ? { database: process.env.TEST_DATABASE } : {});
});
after(async () => {
  await service.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

test('a guarded plugin endpoint reads seeded entries with a token from the kit', async () => {
  const book = await service.seed.template({ label: 'Book' });
  await service.seed.entry(book, { meta: [{ lng: 'en', props: [{ id: 'title', data: ['Dune'] }] }] });
  const url = `${service.url}/api/plugin/shelf/shelf/books`;
  assert.equal((await fetch(url)).status, 401);
  const refused = await fetch(url, { headers: { Authorization: `Bearer ${service.token({ roles: ['USER'] })}` } });
  assert.equal(refused.status, 403);
  const answer = await fetch(url, { headers: { Authorization: `Bearer ${service.token({ roles: [{ name: 'EDITOR', permissions: ['READ'] }] })}` } });
  assert.deepEqual([answer.status, await answer.json()], [200, { titles: ['Dune'] }]);
});

test('signedCall calls a private function with a key that lists it', async () => {
  assert.deepEqual(await service.signedCall('lend', { title: 'Dune' }).then(({ status, body }) => ({ status, body })), {
    status: 200,
    body: { success: true, result: { lent: 'Dune' } },
  });
});

test('deploy() takes a bundle as bcms-ext bundle writes it, and the service runs it at once', async () => {
  const code = `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'isolated', public: true }, handler: async () => ({ deployed: true }) }));`;
  const file = path.join(folder, 'function-isolated.json');
  const manifest = { kind: 'function', name: 'isolated', version: '0.1.0', sha256: createHash('sha256').update(code).digest('hex') };
  fs.writeFileSync(file, JSON.stringify({ manifest, code }));
  assert.deepEqual(await service.deploy(file), [{ kind: 'function', name: 'isolated', version: '0.1.0', unchanged: false }]);
  const { status, body } = await service.signedCall('isolated');
  assert.deepEqual([status, body], [200, { success: true, result: { deployed: true } }]);
});

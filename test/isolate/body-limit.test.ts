import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { memoryLogger } from '../support/app';
import { deploy, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// A deployed function's config.bodyLimit and a deployed method's bodyLimit cross from the isolate
// to the service, which holds the body to them, as it does the registry's.

const functionCode = `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
exports.default = createBcmsFunction(async () => ({ config: { name: 'tiny', public: true, bodyLimit: '1kb' }, handler: async ({ request }) => request.body }));`;

const pluginCode = `"use strict";
const { createBcmsPlugin, createController, createControllerMethod } = require('bcms-extensions');
exports.default = createBcmsPlugin({ name: 'tiny', controllers: [createController({ name: 'Tiny', path: '/tiny', methods: () => ({
  add: createControllerMethod({ type: 'post', bodyLimit: 1024, handler: async ({ request }) => request.body }),
}) })] });`;

describe('deployed code: its own bodyLimit', () => {
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  beforeAll(async () => {
    // Loads and calls have all the time a loaded machine may need: what is checked is sizes, not time.
    router = bcmsExtensions({}, { database: { pglite: 'memory://' }, logger: memoryLogger().logger, ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(router.db, [], { deploy: true, name: 'deployer' });
    await deploy(app, deployer, 'function', 'tiny', functionCode);
    await deploy(app, deployer, 'plugin', 'tiny', pluginCode);
  }, 120_000);
  afterAll(() => router.close(), 60_000);

  test.each([
    ['a function', '/api/function/tiny', { success: false, error: { code: 'BODY_TOO_LARGE', message: 'Request body is larger than the limit of 1024 bytes.' } }],
    ['a plugin method', '/api/plugin/tiny/tiny', { message: 'Request body is larger than the limit of 1024 bytes.' }],
  ])(
    '%s: 413 past it, answered below it',
    async (_what, path, refused) => {
      const big = await request(app)
        .post(path)
        .send({ text: 'x'.repeat(2048) });
      expect(big.status).toBe(413);
      expect(big.body).toEqual(refused);
      const fits = await request(app).post(path).send({ text: 'fits' });
      expect(fits.status).toBe(200);
    },
    60_000,
  );
});

import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter, type BcmsPlugin } from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { bundleFile, deploy } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// The example app's plugin (example-app/plugins/content-stats.js), bundled as `bcms-ext bundle`
// bundles a back end and deployed, so that it runs isolated: it answers as the same plugin does
// from the app's own registry, on the same database.
const EXAMPLE = path.resolve(__dirname, '..', '..', 'example-app');
const contentStats = require(path.join(EXAMPLE, 'plugins', 'content-stats.js')) as BcmsPlugin;

describe.each(backends())("the example app's plugin, deployed (%s)", (backend) => {
  let db: TestDatabase;
  let inProcess: BcmsExtensionsRouter;
  let isolated: BcmsExtensionsRouter;
  let registryApp: express.Express;
  let deployedApp: express.Express;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    // Loads and calls have all the time a loaded machine may need: no limit is checked here.
    const options = { database: db.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger, admin: false as const, ...ROOMY };
    isolated = bcmsExtensions({}, options);
    deployedApp = express().use(isolated);
    await isolated.ready;
    inProcess = bcmsExtensions({ plugins: [contentStats] }, options);
    registryApp = express().use(inProcess);
    await inProcess.ready;
    const deployer = await hmacKey(db.knex, [], { deploy: true });
    await deploy(deployedApp, deployer, 'plugin', 'content-stats', bundleFile(EXAMPLE, path.join(EXAMPLE, 'plugins', 'content-stats.js')));
    const submissions = await inProcess.repo.template.add({ name: 'form-submissions', label: 'Form submissions' });
    for (const email of ['a@example.com', 'b@example.com']) {
      await inProcess.repo.entry.add({ templateId: submissions._id, meta: [{ lng: 'en', props: [{ id: 'email', data: [email] }] }] });
    }
  }, 60_000);
  afterAll(async () => {
    await inProcess?.close();
    await isolated?.close();
    await db.close();
  });

  test('its open and its guarded endpoint answer as the registry plugin does', async () => {
    const counts = await request(deployedApp).get('/api/plugin/content-stats/stats/counts');
    expect(counts.status).toBe(200);
    expect(counts.body.counts).toContainEqual({ template: 'form-submissions', label: 'Form submissions', entries: 2 });
    expect(counts.body).toEqual((await request(registryApp).get('/api/plugin/content-stats/stats/counts')).body);

    const reader = `Bearer ${signToken([role('USER', 'READ')])}`;
    const deployed = await request(deployedApp).get('/api/plugin/content-stats/stats/submissions?limit=1').set('Authorization', reader);
    expect(deployed.status).toBe(200);
    expect(deployed.body.submissions).toEqual([{ _id: expect.any(String), createdAt: expect.any(Number), email: 'b@example.com' }]);
    expect(deployed.body).toEqual((await request(registryApp).get('/api/plugin/content-stats/stats/submissions?limit=1').set('Authorization', reader)).body);
    const refused = await request(deployedApp).get('/api/plugin/content-stats/stats/submissions');
    expect([refused.status, refused.body]).toEqual([401, { message: 'Token is `undefined`.' }]);
  });
});

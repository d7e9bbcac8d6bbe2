import { randomBytes } from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { deploy, functionSource, type DeployKey } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// What is too large for the database, asked from deployed code in an isolate: the same 400
// TOO_LARGE as in the service's process, whether the isolate refuses it before the query or the
// database refuses it across the bridge, with no SQL and no value in the message, and no outage.

describe.each(backends())('too large for the database, from an isolate (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let log: ReturnType<typeof memoryLogger>;

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    log = memoryLogger();
    // Loads and calls have all the time a loaded machine may need: what is checked is sizes, not time.
    router = bcmsExtensions({}, { database: db.knex, logger: log.logger, bodyLimit: '2mb', ...ROOMY });
    app = express().use(router);
    await router.ready;
    deployer = await hmacKey(db.knex, [], { deploy: true, name: 'deployer' });
    // `repo.template.add` with the request's body, and `BCMSRepo.template.add`, which checks no length.
    await deploy(app, deployer, 'function', 'repo-add', functionSource('repo-add', 'async ({ repo, request }) => repo.template.add(request.body)'));
    await deploy(app, deployer, 'function', 'bcms-add', functionSource('bcms-add', 'async ({ request }) => BCMSRepo.template.add(request.body)', "const { BCMSRepo } = require('bcms-extensions');"));
  });
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  const noOutageLogged = () => {
    const messages = log.lines.map((line) => line.msg);
    expect(messages).not.toContain('bcms-extensions: database unreachable');
    expect(messages).not.toContain('bcms-extensions: unexpected error');
  };

  test('a 1 MB label given to repo.template.add in an isolate: 400 naming label', async () => {
    const res = await request(app)
      .post('/api/function/repo-add')
      .send({ name: 'big', label: 'x'.repeat(1_000_000) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'TOO_LARGE', message: 'repo.template.add: label is longer than 200 characters (it has 1000000).' } });
    noOutageLogged();
  });

  test("a name past the database's index row limit, refused by Postgres across the bridge: 400 naming name, without the query", async () => {
    // Random hex, which Postgres cannot compress into the index's 2,704 bytes.
    const res = await request(app)
      .post('/api/function/bcms-add')
      .send({ name: randomBytes(1500).toString('hex') });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'TOO_LARGE', message: 'Field "name" is too large for the database: make it shorter.' } });
    noOutageLogged();
    const fine = await request(app).post('/api/function/bcms-add').send({ name: 'blog' });
    expect(fine.status).toBe(200);
    expect(fine.body.result).toMatchObject({ name: 'blog' });
  });
});

import express from 'express';
import request from 'supertest';
import { bcmsExtensions, createBcmsEvent, createBcmsFunction, createBcmsJob, type BcmsExtensionsRouter } from '../../lib';
import { JWT_SECRET, memoryLogger, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { type Deployable, type DeployKey, deploy, functionSource, startDeployable } from '../support/deploy';
import { until } from '../support/events';
import { hmacKey, signedPost } from '../support/signature';

// The `metrics` option (issue 37, item 4): GET /api/extensions/metrics in Prometheus's text format,
// for an ADMIN token or the option's token, with counters that move on a deploy, a crash, a refused
// signature, an outage, an event delivery and a job run.

const TOKEN = 'scraper-token-0123456789';

/** The value of one series in Prometheus's text (labels as written, in prom-client's order), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((each) => each.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe.each(backends())('metrics (%s)', (backend) => {
  let db: TestDatabase;
  let service: Deployable;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  const handled: string[] = [];

  const scrape = async (): Promise<string> => {
    const res = await request(app).get('/api/extensions/metrics').set('Authorization', `Bearer ${TOKEN}`);
    expect(res.status).toBe(200);
    return res.text;
  };

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hi' }));
    const secret = createBcmsFunction(async () => ({ config: { name: 'secret', public: false }, handler: async () => 'signed' }));
    const seen = createBcmsEvent(async () => ({ name: 'seen', config: { scope: 'ENTRY', method: 'ALL' }, handler: async ({ method }) => void handled.push(method) }));
    const ticking = createBcmsJob(async () => ({ name: 'ticking', cron: { second: '*', minute: '*', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' }, handler: async () => {} }));
    service = await startDeployable(db.knex, { functions: [hello, secret], events: [seen], jobs: [ticking] }, { jwt: { secret: JWT_SECRET }, metrics: { token: TOKEN } });
    ({ router, app, deployer } = service);
  });
  afterAll(async () => {
    await service.close();
    await db.close();
  });

  test('read with the token or an ADMIN token; refused without, with another token, or to another role', async () => {
    expect((await request(app).get('/api/extensions/metrics')).status).toBe(401);
    expect((await request(app).get('/api/extensions/metrics').set('Authorization', 'Bearer not-the-scraper-token')).status).toBe(401);
    const user = signToken([{ name: 'USER', permissions: [{ name: 'READ' }] }]);
    expect((await request(app).get('/api/extensions/metrics').set('Authorization', `Bearer ${user}`)).status).toBe(403);
    const admin = await request(app).get('/api/extensions/metrics').set('Authorization', `Bearer ${signToken()}`);
    expect(admin.status).toBe(200);
    expect(admin.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(admin.text).toContain('# TYPE bcms_requests_total counter');
    expect(router.metrics?.contentType).toMatch(/^text\/plain/);
  });

  test("requests by family and status; each served function's calls and latency; made-up names are not labels", async () => {
    for (let i = 0; i < 3; i++) expect((await request(app).post('/api/function/hello')).body.result).toBe('hi');
    expect((await request(app).post('/api/function/made-up-name-1')).status).toBe(404);
    const text = await scrape();
    expect(sample(text, 'bcms_extension_calls_total{kind="function",extension="hello",outcome="ok"}')).toBe(3);
    expect(sample(text, 'bcms_extension_call_duration_seconds_count{kind="function",extension="hello"}')).toBe(3);
    expect(text).not.toContain('made-up-name-1');
    expect(sample(text, 'bcms_requests_total{family="function",status="404"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'bcms_errors_total{code="FUNCTION_NOT_FOUND"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'bcms_requests_total{family="service",status="200"}')).toBeGreaterThanOrEqual(1);
  });

  test('a refused signature, by its code', async () => {
    const before = sample(await scrape(), 'bcms_signature_refusals_total{code="SIGNATURE_REQUIRED"}') ?? 0;
    expect((await request(app).post('/api/function/secret')).status).toBe(401);
    const key = await hmacKey(db.knex, ['secret']);
    const forged = await signedPost(app, '/api/function/secret', { ...key, secret: 'not-the-secret' }, {});
    expect(forged.body.error.code).toBe('SIGNATURE_INVALID');
    const text = await scrape();
    expect(sample(text, 'bcms_signature_refusals_total{code="SIGNATURE_REQUIRED"}')).toBe(before + 1);
    expect(sample(text, 'bcms_signature_refusals_total{code="SIGNATURE_INVALID"}')).toBe(1);
  });

  test('a deploy, the isolate it started, and a crash of it', async () => {
    await deploy(app, deployer, 'function', 'fragile', functionSource('fragile', 'async ({ request }) => { if (request.body.crash) process.exit(1); return "ok"; }'));
    let text = await scrape();
    expect(sample(text, 'bcms_deploys_total{action="deploy",outcome="ok"}')).toBe(1);
    const started = sample(text, 'bcms_isolate_starts_total{kind="function"}') ?? 0;
    expect(started).toBeGreaterThanOrEqual(1);
    expect((await request(app).post('/api/function/fragile').send({ crash: true })).body.error.code).toBe('EXTENSION_CRASHED');
    await until(async () => sample(await scrape(), 'bcms_isolate_crashes_total{kind="function"}') === 1, 'the crash counted');
    // Its replacement: one more start.
    await until(async () => (sample(await scrape(), 'bcms_isolate_starts_total{kind="function"}') ?? 0) > started, 'the replacement counted');
    expect((await request(app).post('/api/function/fragile').send({})).body.result).toBe('ok');
    text = await scrape();
    expect(sample(text, 'bcms_extension_calls_total{kind="function",extension="fragile",outcome="error"}')).toBe(1);
    // A deploy refused: counted with its code.
    expect((await request(app).post('/api/extensions/deployments').send({})).status).toBe(401);
    text = await scrape();
    expect(text.split('\n').filter((line) => line.startsWith('bcms_deploys_total{'))).toEqual([
      'bcms_deploys_total{action="deploy",outcome="ok"} 1',
      'bcms_deploys_total{action="deploy",outcome="SIGNATURE_INVALID"} 1',
    ]);
  }, 60_000);

  test('event deliveries and job runs, by handler and outcome', async () => {
    const [{ id: templateId }] = await router.db('bcms_templates').insert({ name: 'metrics_template' }).returning('id');
    await router.repo.entry.add({ templateId, status: 'draft', meta: [{ lng: 'en', props: [] }] });
    await until(() => handled.includes('ADD'), 'the event delivered');
    await until(async () => (sample(await scrape(), 'bcms_event_deliveries_total{handler="seen",outcome="delivered"}') ?? 0) >= 1, 'the delivery counted');
    await until(async () => (sample(await scrape(), 'bcms_job_runs_total{job="ticking",outcome="succeeded"}') ?? 0) >= 1, 'a job run counted');
  }, 30_000);
});

describe('metrics off, and a database that cannot be reached', () => {
  test('off by default: no route (the host answers), and router.metrics is undefined', async () => {
    const db = await openTestDatabase('pglite');
    const router = bcmsExtensions({}, { database: db.knex, logger: memoryLogger().logger });
    const app = express()
      .use(router)
      .use((_req, res) => void res.status(404).json({ host404: true }));
    await router.ready;
    expect((await request(app).get('/api/extensions/metrics')).body).toEqual({ host404: true });
    expect(router.metrics).toBeUndefined();
    await router.close();
    await db.close();
  });

  test('an outage: bcms_database_up 0, one outage however many requests found it', async () => {
    const router = bcmsExtensions({}, { database: 'postgres://postgres@127.0.0.1:1/none', logger: memoryLogger().logger, jwt: { secret: JWT_SECRET }, metrics: true });
    const app = express().use(router);
    await router.ready.catch(() => {});
    const admin = `Bearer ${signToken()}`;
    for (let i = 0; i < 3; i++) expect((await request(app).get('/api/extensions/templates').set('Authorization', admin)).status).toBe(503);
    const text = (await request(app).get('/api/extensions/metrics').set('Authorization', admin)).text;
    expect(sample(text, 'bcms_database_up')).toBe(0);
    expect(sample(text, 'bcms_database_outages_total')).toBe(1);
    expect(() => bcmsExtensions({}, { metrics: { token: 'short' } })).toThrow('option metrics.token must be a string of 16 characters or more');
    await router.close();
  });
});

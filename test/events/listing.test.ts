import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter } from '../../lib';
import { signRequest } from '../../lib/client';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { backends, openTestDatabase, type TestDatabase } from '../support/database';
import { signed, type DeployKey } from '../support/deploy';
import { LATER, seedEventsAndJobs as seed } from '../support/events';
import { hmacKey } from '../support/signature';

const DELIVERIES = '/api/extensions/event-deliveries';
const JOBS = '/api/extensions/jobs';
describe.each(backends())('the event and job lists over HTTP (%s)', (backend) => {
  let db: TestDatabase;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  let deployer: DeployKey;
  let caller: DeployKey;
  const admin = signToken([role('ADMIN', 'READ')]);

  beforeAll(async () => {
    db = await openTestDatabase(backend);
    router = bcmsExtensions({}, { database: db.knex, jwt: { secret: JWT_SECRET }, logger: memoryLogger().logger });
    app = express().use(router);
    await router.ready;
    await seed(router.db);
    deployer = await hmacKey(router.db, [], { deploy: true, name: 'deployer' });
    caller = await hmacKey(router.db, ['some-function'], { name: 'caller' });
  }, 60_000);
  afterAll(async () => {
    await router.close();
    await db.close();
  });

  const get = (url: string, token = admin) => request(app).get(url).set('Authorization', `Bearer ${token}`);

  describe('who may read them', () => {
    test.each([DELIVERIES, JOBS])('%s without credentials: 401 naming both schemes', async (path) => {
      const res = await request(app).get(path);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ message: 'Token is `undefined`.' });
      expect(res.headers['www-authenticate']).toBe('Bearer, Signature realm="bcms",headers="(request-target) date digest"');
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.headers['access-control-allow-origin']).toBe('*');
    });

    test('a token that does not verify, or expired: 401 invalid_token', async () => {
      const bad = await get(DELIVERIES, signToken([role('ADMIN', 'READ')], { secret: 'another-secret-of-enough-length-000' }));
      expect(bad.status).toBe(401);
      expect(bad.body).toEqual({ message: 'Invalid token.' });
      expect(bad.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
      const expired = await get(JOBS, signToken([role('ADMIN', 'READ')], { payload: { exp: Math.floor(Date.now() / 1000) - 60 } }));
      expect(expired.status).toBe(401);
      expect(expired.body).toEqual({ message: 'Token has expired.' });
    });

    test.each([
      ['a USER role', [role('USER', 'READ', 'WRITE')]],
      ['an ADMIN role without READ', [role('ADMIN', 'WRITE')]],
    ])('a token with %s: 403', async (_, roles) => {
      for (const path of [DELIVERIES, JOBS]) {
        const res = await get(path, signToken(roles));
        expect(res.status).toBe(403);
        expect(res.body).toEqual({ message: 'Token is not authorized for this action.' });
      }
    });

    test('a SUDO token holding READ may read them', async () => {
      expect((await get(JOBS, signToken([role('SUDO', 'READ')]))).status).toBe(200);
    });

    test('a deploy key may read them; a key that may not deploy: 403; a replayed signature: 401', async () => {
      const ok = await signed(app, 'GET', `${DELIVERIES}?handler=audit`, deployer);
      expect(ok.status).toBe(200);
      expect(ok.body.handlers.map((h: { name: string }) => h.name)).toEqual(['audit']);
      expect((await signed(app, 'GET', JOBS, deployer)).status).toBe(200);
      const refused = await signed(app, 'GET', JOBS, caller);
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ message: 'This API key may not deploy.' });
      // The same signed request twice: its signature is accepted once.
      const headers = signRequest({ ...deployer, method: 'GET', url: JOBS, body: '' });
      expect((await request(app).get(JOBS).set(headers)).status).toBe(200);
      const again = await request(app).get(JOBS).set(headers);
      expect(again.status).toBe(401);
      expect(again.headers['www-authenticate']).toMatch(/^Signature /);
    });

    test('other methods: 405 with Allow; OPTIONS: the preflight', async () => {
      const res = await request(app).post(DELIVERIES).set('Authorization', `Bearer ${admin}`);
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
      expect(res.body).toEqual({ message: 'POST is not allowed here.' });
      const preflight = await request(app).options(JOBS).set('Access-Control-Request-Headers', 'authorization');
      expect(preflight.status).toBe(204);
      expect(preflight.headers['access-control-allow-methods']).toBe('GET, HEAD, OPTIONS');
    });
  });

  describe('GET /api/extensions/event-deliveries', () => {
    test('each handler by name, its counts, its 20 most recent deliveries, newest first', async () => {
      const res = await get(DELIVERIES);
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const { handlers } = res.body as { handlers: Record<string, unknown>[] };
      expect(handlers.map((h) => [h.name, h.scope, h.method, h.source, h.active])).toEqual([
        ['audit', 'ALL', 'ALL', 'deployed', true],
        ['entry-log', 'ENTRY', 'ALL', 'registry', true],
        ['gone', 'TEMPLATE', 'DELETE', 'deployed', false],
      ]);
      const [audit, entryLog, gone] = handlers as { counts: unknown; deliveries: Record<string, unknown>[] }[];
      expect(entryLog?.counts).toEqual({ pending: 5, running: 5, retrying: 5, delivered: 10, failed: 5 });
      expect(audit?.counts).toEqual({ pending: 0, running: 0, retrying: 0, delivered: 0, failed: 3 });
      expect(gone).toMatchObject({ counts: { pending: 0, running: 0, retrying: 0, delivered: 0, failed: 0 }, deliveries: [] });
      const deliveries = entryLog?.deliveries ?? [];
      expect(deliveries).toHaveLength(20);
      expect(deliveries.map((d) => d.doc)).toEqual(Array.from({ length: 20 }, (_, i) => `ENTRY:e${29 - i}`));
      const ids = deliveries.map((d) => Number(d.id));
      expect(ids).toEqual([...ids].sort((a, b) => b - a));
      // e29: i % 6 === 5, delivered; e28: retrying (due later, its error kept).
      expect(deliveries[0]).toEqual({
        id: expect.stringMatching(/^\d+$/),
        eventId: expect.stringMatching(/^\d+$/),
        scope: 'ENTRY',
        method: 'UPDATE',
        doc: 'ENTRY:e29',
        status: 'delivered',
        attempts: 1,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        startedAt: expect.stringMatching(/Z$/),
        finishedAt: expect.stringMatching(/Z$/),
        durationMs: 39,
        runAt: expect.stringMatching(/Z$/),
        error: null,
      });
      expect(deliveries[1]).toMatchObject({ doc: 'ENTRY:e28', method: 'ADD', status: 'running', finishedAt: null, durationMs: null, error: null });
      expect(deliveries[3]).toMatchObject({ doc: 'ENTRY:e26', status: 'pending', attempts: 0, startedAt: null, runAt: LATER.toISOString() });
      expect(deliveries[4]).toMatchObject({ doc: 'ENTRY:e25', status: 'failed', attempts: 5, error: 'Error: boom 25', durationMs: 35 });
    });

    test('?limit= per handler, 0 to 200; ?handler= narrows; ?status= filters the deliveries, not the counts', async () => {
      const three = (await get(`${DELIVERIES}?limit=3`)).body.handlers as { name: string; deliveries: unknown[] }[];
      expect(three.map((h) => h.deliveries.length)).toEqual([3, 3, 0]);
      const all = (await get(`${DELIVERIES}?limit=200&handler=entry-log`)).body.handlers;
      expect(all).toHaveLength(1);
      expect(all[0].deliveries).toHaveLength(30);
      const none = (await get(`${DELIVERIES}?limit=0`)).body.handlers;
      expect(none.map((h: { deliveries: unknown[] }) => h.deliveries)).toEqual([[], [], []]);
      expect(none[1].counts.delivered).toBe(10);
      const failed = (await get(`${DELIVERIES}?status=failed`)).body.handlers;
      expect(failed[1].deliveries.map((d: { doc: string }) => d.doc)).toEqual(['ENTRY:e25', 'ENTRY:e19', 'ENTRY:e13', 'ENTRY:e7', 'ENTRY:e1']);
      expect(failed[1].deliveries.every((d: { status: string; error: string }) => d.status === 'failed' && d.error.startsWith('Error: boom'))).toBe(true);
      expect(failed[1].counts).toEqual({ pending: 5, running: 5, retrying: 5, delivered: 10, failed: 5 });
      expect(failed[0].deliveries.map((d: { error: string }) => d.error)).toEqual(['TypeError: audit 2', 'TypeError: audit 1', 'TypeError: audit 0']);
      const failedOne = (await get(`${DELIVERIES}?status=failed&handler=entry-log&limit=2`)).body.handlers;
      expect(failedOne[0].deliveries.map((d: { doc: string }) => d.doc)).toEqual(['ENTRY:e25', 'ENTRY:e19']);
      expect((await get(`${DELIVERIES}?handler=nobody`)).body).toEqual({ handlers: [] });
    });

    test.each([
      ['limit=201', 'limit must be a whole number from 0 to 200, got "201".'],
      ['limit=-1', 'limit must be a whole number from 0 to 200, got "-1".'],
      ['limit=abc', 'limit must be a whole number from 0 to 200, got "abc".'],
      ['limit=1.5', 'limit must be a whole number from 0 to 200, got "1.5".'],
      ['limit=', 'limit must be a whole number from 0 to 200, got "".'],
      ['limit=1&limit=2', 'Query parameter "limit" is given twice: give it once.'],
      ['status=done', 'status must be one of pending, running, retrying, delivered, failed, got "done".'],
      ['handler=', 'handler must name a handler.'],
      ['hanlder=audit', 'Unknown query parameter "hanlder": this route takes limit, handler, status.'],
      ['job=nightly', 'Unknown query parameter "job": this route takes limit, handler, status.'],
    ])('?%s: 400 saying what is wrong', async (query, message) => {
      const res = await get(`${DELIVERIES}?${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ message });
    });

    test('a bad query from someone without credentials: 401 first', async () => {
      expect((await request(app).get(`${DELIVERIES}?limit=abc`)).status).toBe(401);
    });
  });

  describe('GET /api/extensions/jobs', () => {
    test('each job by name, its next tick (from its cron, in the service time zone; null when inactive), its runs newest first', async () => {
      const before = Date.now();
      const res = await get(JOBS);
      expect(res.status).toBe(200);
      const { jobs } = res.body as { jobs: Record<string, unknown>[] };
      expect(jobs.map((j) => [j.name, j.cron, j.source, j.active])).toEqual([
        ['nightly', '0 3 * * *', 'deployed', true],
        ['paused', '*/5 * * * *', 'registry', false],
      ]);
      const [nightly, paused] = jobs as { nextTickAt: string | null; runs: Record<string, unknown>[] }[];
      const next = new Date(nightly?.nextTickAt as string);
      expect(next.getHours()).toBe(3);
      expect(next.getMinutes()).toBe(0);
      expect(next.getTime()).toBeGreaterThan(before);
      expect(next.getTime()).toBeLessThanOrEqual(before + 86_400_000);
      expect(paused).toMatchObject({ nextTickAt: null, runs: [] });
      expect(nightly?.runs.map((r) => [r.tickAt, r.status, r.instance])).toEqual([
        ['2026-11-24T03:00:00.000Z', 'running', 'a'],
        ['2026-11-23T03:00:00.000Z', 'skipped', 'b'],
        ['2026-11-22T03:00:00.000Z', 'timed_out', 'a'],
        ['2026-11-21T03:00:00.000Z', 'failed', 'b'],
        ['2026-11-20T03:00:00.000Z', 'succeeded', 'a'],
      ]);
      expect(nightly?.runs[0]).toEqual({
        id: expect.stringMatching(/^\d+$/),
        tickAt: '2026-11-24T03:00:00.000Z',
        status: 'running',
        instance: 'a',
        startedAt: '2026-11-24T03:00:00.000Z',
        finishedAt: null,
        durationMs: null,
        error: null,
      });
      expect(nightly?.runs[3]).toMatchObject({ status: 'failed', durationMs: 20, finishedAt: '2026-11-21T03:00:00.020Z', error: 'Error: no network' });
    });

    test('?limit= and ?job=; bad values: 400', async () => {
      const two = (await get(`${JOBS}?limit=2&job=nightly`)).body.jobs;
      expect(two).toHaveLength(1);
      expect(two[0].runs.map((r: { status: string }) => r.status)).toEqual(['running', 'skipped']);
      expect((await get(`${JOBS}?job=nobody`)).body).toEqual({ jobs: [] });
      for (const [query, message] of [
        ['limit=1000', 'limit must be a whole number from 0 to 200, got "1000".'],
        ['status=failed', 'Unknown query parameter "status": this route takes limit, job.'],
        ['job=', 'job must name a job.'],
      ]) {
        const res = await get(`${JOBS}?${query}`);
        expect([res.status, res.body]).toEqual([400, { message }]);
      }
    });
  });

  test('the OpenAPI document lists both, for a bearer token or a signature', () => {
    const paths = router.openapi().paths as Record<string, { get?: { security?: unknown; parameters?: { name: string }[] } }>;
    expect(paths[DELIVERIES]?.get?.security).toEqual([{ bearer: [] }, { httpSignature: [] }]);
    expect(paths[DELIVERIES]?.get?.parameters?.map((p) => p.name)).toEqual(['limit', 'handler', 'status']);
    expect(paths[JOBS]?.get?.parameters?.map((p) => p.name)).toEqual(['limit', 'job']);
  });
});

import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import type express from 'express';
import request from 'supertest';
import { createBcmsFunction, type BcmsExtensionsRouter } from '../../lib';
import { openTestDatabase, type TestDatabase } from '../support/database';
import { type Deployable, type DeployKey, deploy, functionSource, startDeployable } from '../support/deploy';

// OpenTelemetry (issue 37, item 4): with an SDK registered by the app, a request the router owns is
// a server span (the caller's child, from its traceparent), and its database calls and isolate
// crossings are spans of their own under it. Without an SDK the API's spans are no-ops.

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

let db: TestDatabase;
let service: Deployable;
let router: BcmsExtensionsRouter;
let app: express.Express;
let deployer: DeployKey;

beforeAll(async () => {
  provider.register();
  db = await openTestDatabase('pglite');
  const count = createBcmsFunction(async () => ({ config: { name: 'count', public: true }, handler: async ({ repo }) => (await repo.template.findAll()).length }));
  const broken = createBcmsFunction(async () => ({
    config: { name: 'broken', public: true },
    handler: async () => {
      throw new Error('internal detail');
    },
  }));
  service = await startDeployable(db.knex, { functions: [count, broken] });
  ({ router, app, deployer } = service);
});
afterAll(async () => {
  await service.close();
  await db.close();
  await provider.shutdown();
  trace.disable();
});
beforeEach(() => exporter.reset());

const spansOf = (traceId: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId);
const parentOf = (span: ReadableSpan): string | undefined => span.parentSpanContext?.spanId;

test("a request is a server span, the caller's child; its database calls are its children", async () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const callerSpan = '00f067aa0ba902b7';
  const res = await request(app).post('/api/function/count').set('traceparent', `00-${traceId}-${callerSpan}-01`);
  expect(res.body).toEqual({ success: true, result: 0 });
  const spans = spansOf(traceId);
  const served = spans.find((span) => span.name === 'bcms function');
  expect(served).toBeDefined();
  expect(served?.kind).toBe(SpanKind.SERVER);
  expect(parentOf(served as ReadableSpan)).toBe(callerSpan);
  expect(served?.attributes).toMatchObject({ 'http.request.method': 'POST', 'url.path': '/api/function/count', 'http.response.status_code': 200, 'bcms.request_id': res.headers['x-request-id'] });
  const database = spans.filter((span) => span.name === 'bcms db');
  expect(database.length).toBeGreaterThanOrEqual(1);
  for (const span of database) expect(parentOf(span)).toBe(served?.spanContext().spanId);
});

test('a 500 marks its span an error', async () => {
  const res = await request(app).post('/api/function/broken');
  expect(res.status).toBe(500);
  const served = exporter.getFinishedSpans().find((span) => span.name === 'bcms function');
  expect(served?.status.code).toBe(SpanStatusCode.ERROR);
  expect(served?.attributes['http.response.status_code']).toBe(500);
});

test("a deployed function's call crosses into its isolate: a span of its own, under the request's", async () => {
  // Its handler queries the database from the isolate, which the deploy request started.
  await deploy(app, deployer, 'function', 'traced', functionSource('traced', 'async ({ repo }) => "from the isolate, " + (await repo.template.findAll()).length'));
  exporter.reset();
  expect((await request(app).post('/api/function/traced')).body.result).toBe('from the isolate, 0');
  const spans = exporter.getFinishedSpans();
  // The isolate's queries are not spans of the deploy request that started it (they would be, had its
  // pipes been made in that request's context), nor yet of this one.
  expect(spans.filter((span) => span.name === 'bcms db')).toEqual([]);
  const served = spans.find((span) => span.name === 'bcms function');
  const crossing = spans.find((span) => span.name === 'bcms isolate call');
  expect(crossing?.attributes['bcms.extension']).toBe('function traced@1.0.0');
  expect(parentOf(crossing as ReadableSpan)).toBe(served?.spanContext().spanId);
  expect(crossing?.spanContext().traceId).toBe(served?.spanContext().traceId);
}, 30_000);

test('background work (deliveries, polls) opens no spans of its own', async () => {
  exporter.reset();
  await router.repo.template.findAll();
  expect(exporter.getFinishedSpans()).toEqual([]);
});

import request from 'supertest';
import express from 'express';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type BcmsExtensionsRouter } from '../../lib';
import { memoryLogger } from '../support/app';
import { backends, serverSchema } from '../support/database';
import { TcpProxy } from '../support/proxy';

const countTemplates = createBcmsFunction(async () => ({
  config: { name: 'count-templates', public: true },
  handler: async ({ repo }) => (await repo.template.findAll()).length,
}));
const addTemplate = createBcmsFunction(async () => ({
  config: { name: 'add-template', public: true },
  handler: async ({ repo, request }) => (await repo.template.add({ name: request.body.name }))._id,
}));
const templatesPlugin = createBcmsPlugin({
  name: 'templates',
  controllers: [
    createController({
      name: 'Templates',
      path: '/all',
      methods: () => ({ list: createControllerMethod({ path: '/', type: 'get', handler: async ({ repo }) => ({ templates: await repo.template.findAll() }) }) }),
    }),
  ],
});

interface Backend {
  host: string;
  port: number;
  /** The URL through the proxy: with a schema of its own on a shared server. */
  url(proxyPort: number): string;
  close(): Promise<void>;
}

/** PGlite served over TCP (pglite-socket), or the Postgres server with a schema of the test's own. */
async function startBackend(kind: string): Promise<Backend> {
  if (kind === 'pglite') {
    const db = await PGlite.create('memory://');
    const probe = await TcpProxy.reserve({ host: '127.0.0.1', port: 0 });
    const server = new PGLiteSocketServer({ db, port: probe.port, host: '127.0.0.1', maxConnections: 10 });
    await server.start();
    return {
      host: '127.0.0.1',
      port: probe.port,
      url: (proxyPort) => `postgres://postgres@127.0.0.1:${proxyPort}/postgres`,
      close: async () => {
        await server.stop();
        await db.close();
      },
    };
  }
  const { url, drop } = await serverSchema('bcms_outage');
  const base = new URL(process.env.DATABASE_URL as string);
  return {
    host: base.hostname,
    port: Number(base.port || 5432),
    url: (proxyPort) => {
      const through = new URL(url);
      through.hostname = '127.0.0.1';
      through.port = String(proxyPort);
      return through.toString();
    },
    close: drop,
  };
}

describe.each(backends())('the database going away and coming back (%s)', (kind) => {
  let backend: Backend;
  let proxy: TcpProxy;
  let router: BcmsExtensionsRouter;
  let app: express.Express;
  const log = memoryLogger();

  beforeAll(async () => {
    backend = await startBackend(kind);
    proxy = await TcpProxy.reserve({ host: backend.host, port: backend.port });
    // Unreachable at start: nothing listens on the proxy's port yet.
    router = bcmsExtensions({ plugins: [templatesPlugin], functions: [countTemplates, addTemplate] }, { database: backend.url(proxy.port), logger: log.logger });
    app = express().use(router);
  });
  afterAll(async () => {
    await router.close();
    await proxy.stop();
    await backend.close();
  });

  test('unreachable at start: ready still resolves, and the failure is logged', async () => {
    await expect(router.ready).resolves.toBeUndefined();
    expect(log.lines.some((line) => line.msg === 'bcms-extensions: database unreachable')).toBe(true);
  });

  test('while unreachable: 503 DATABASE_UNAVAILABLE (function) and { message } 503 (plugin), with CORS', async () => {
    const fn = await request(app).post('/api/function/count-templates');
    expect(fn.status).toBe(503);
    expect(fn.body).toEqual({ success: false, error: { code: 'DATABASE_UNAVAILABLE', message: 'Database is unavailable; try again shortly.' } });
    expect(fn.headers['access-control-allow-origin']).toBe('*');
    const plugin = await request(app).get('/api/plugin/templates/all');
    expect(plugin.status).toBe(503);
    expect(plugin.body).toEqual({ message: 'Database is unavailable; try again shortly.' });
  });

  test('once it is back, the next request migrates and succeeds', async () => {
    await proxy.start();
    const added = await request(app).post('/api/function/add-template').send({ name: 'survivor' });
    expect(added.status).toBe(200);
    expect((await request(app).post('/api/function/count-templates')).body).toEqual({ success: true, result: 1 });
  });

  test('lost again later: 503, and back again: the data is all there', async () => {
    await proxy.stop();
    expect((await request(app).post('/api/function/count-templates')).status).toBe(503);
    await proxy.start();
    const res = await request(app).post('/api/function/count-templates');
    expect(res.body).toEqual({ success: true, result: 1 });
    expect((await request(app).get('/api/plugin/templates/all')).body.templates.map((t: { name: string }) => t.name)).toEqual(['survivor']);
  });
});

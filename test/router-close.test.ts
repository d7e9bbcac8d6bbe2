import request from 'supertest';
import { createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type BcmsExtensionsOptions } from '../lib';
import { buildApp, type TestApp } from './support/app';
import { backends, serverSchema } from './support/database';

// router.close() while requests arrive: those under way finish (their database still open), and
// those that arrive once it began are answered 503 SERVICE_CLOSING with Connection: close, never a
// 500 from a closed pool. The router opens its own database here (PGlite in memory, or a URL), as
// a service does, so that close() really closes it.

let openGate: () => void = () => {};
let gate = new Promise<void>((resolve) => (openGate = resolve));
let entered = 0;

const slow = createBcmsFunction(async () => ({
  config: { name: 'slow', public: true },
  handler: async ({ repo }) => {
    entered++;
    await gate;
    // After close() began: the database must still be there for a call under way.
    return { templates: (await repo.template.findAll()).length };
  },
}));
const hello = createBcmsFunction(async () => ({ config: { name: 'hello', public: true }, handler: async () => 'hello' }));
const notes = createBcmsPlugin({
  name: 'notes',
  controllers: [createController({ name: 'Notes', path: '/notes', methods: () => ({ list: createControllerMethod({ type: 'get', handler: async () => ({ notes: [] }) }) }) })],
});
const registry = { functions: [slow, hello], plugins: [notes] };

const CLOSING = { success: false, error: { code: 'SERVICE_CLOSING', message: 'The service is shutting down: send the request again (it will reach an instance that is up).' } };

describe.each(backends())('router.close() while requests arrive (%s)', (backend) => {
  let drop: (() => Promise<void>) | undefined;
  let database: BcmsExtensionsOptions['database'];
  beforeAll(async () => {
    if (backend === 'pglite') database = { pglite: 'memory://' };
    else {
      const schema = await serverSchema('bcms_close');
      database = schema.url;
      drop = schema.drop;
    }
  });
  afterAll(async () => drop?.());

  test('calls under way finish with their database; new ones get 503 SERVICE_CLOSING with Connection: close; none a 500', async () => {
    entered = 0;
    gate = new Promise<void>((resolve) => (openGate = resolve));
    const t: TestApp = await buildApp(registry, { database });
    const underWay = [1, 2, 3].map(() =>
      request(t.app)
        .post('/api/function/slow')
        .then((res) => res),
    );
    while (entered < 3) await new Promise((resolve) => setTimeout(resolve, 10));

    let closed = false;
    const closing = t.router.close().then(() => (closed = true));
    const refused = await request(t.app).post('/api/function/hello');
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual(CLOSING);
    expect(refused.headers.connection).toBe('close');
    expect(refused.headers['x-request-id']).toBeDefined();
    const plugin = await request(t.app).get('/api/plugin/notes/notes');
    expect(plugin.status).toBe(503);
    expect(plugin.body).toEqual({ message: CLOSING.error.message });
    // The host's own routes are the host's: still answered.
    expect((await request(t.app).get('/host/health')).body).toEqual({ host: true });
    expect(closed).toBe(false); // waiting for the calls under way

    openGate();
    for (const res of await Promise.all(underWay)) {
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, result: { templates: 0 } });
    }
    await closing;
    // Closed: still 503, not a 500 from the closed database.
    const after = await request(t.app).post('/api/function/slow');
    expect(after.status).toBe(503);
    expect(after.body).toEqual(CLOSING);
    expect(t.log.lines.filter((line) => (line.level as number) >= 50)).toEqual([]);
    const statuses = t.log.lines.filter((line) => line.msg === 'request').map((line) => line.status);
    expect(statuses.filter((status) => status === 500)).toEqual([]);
  }, 60_000);
});

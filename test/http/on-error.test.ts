import type { Request } from 'express';
import request from 'supertest';
import { BcmsHttpError, bcmsExtensions, createBcmsFunction, createBcmsPlugin, createController, createControllerMethod, type ErrorReport } from '../../lib';
import { buildApp, type TestApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { deploy, functionSource, startDeployable } from '../support/deploy';

// The onError option: every 5xx the router answers reaches the app's error reporting first.

const boom = new Error('boom');
const plugin = createBcmsPlugin({
  name: 'shop',
  controllers: [
    createController({
      name: 'Orders',
      path: '/orders',
      methods: () => ({
        crash: createControllerMethod({
          path: '/crash',
          type: 'get',
          handler: async () => {
            throw boom;
          },
        }),
        refused: createControllerMethod({
          path: '/refused',
          type: 'get',
          handler: async ({ errorHandler }) => {
            throw errorHandler.occurred(409, 'Taken.');
          },
        }),
        unavailable: createControllerMethod({
          path: '/unavailable',
          type: 'get',
          handler: async ({ errorHandler }) => {
            throw errorHandler.occurred(503, 'Come back later.');
          },
        }),
        string: createControllerMethod({
          path: '/string',
          type: 'get',
          handler: async () => {
            throw 'not an error';
          },
        }),
      }),
    }),
  ],
});
const functions = [
  createBcmsFunction(async () => ({
    config: { name: 'fails', public: true },
    handler: async () => {
      throw new TypeError('cannot read it');
    },
  })),
  createBcmsFunction(async () => ({ config: { name: 'hangs', public: true }, handler: () => new Promise(() => {}) })),
];

interface Reported {
  error: Error;
  req: Request;
  report: ErrorReport;
}

describe('onError', () => {
  let t: TestApp;
  const reported: Reported[] = [];
  /** What the hook does besides recording (throw, reject, never settle), per test. */
  let behaviour: () => unknown = () => undefined;
  beforeAll(async () => {
    t = await buildApp(
      { plugins: [plugin], functions },
      {
        functionTimeoutMs: 100,
        onError: (error, req, report) => {
          reported.push({ error, req, report });
          return behaviour();
        },
      },
    );
  });
  beforeEach(() => {
    reported.length = 0;
    behaviour = () => undefined;
  });

  test("a plugin handler's throw: the error itself and the request, before the 500 is answered", async () => {
    const res = await request(t.app).get('/api/plugin/shop/orders/crash?x=1');
    expect(res.status).toBe(500);
    const requestId = res.headers['x-request-id'];
    expect(res.body).toEqual({ message: `Internal error. Request id: ${requestId}.` });
    expect(reported).toHaveLength(1);
    const [{ error, req, report }] = reported as [Reported];
    expect(error).toBe(boom);
    expect([req.method, req.originalUrl]).toEqual(['GET', '/api/plugin/shop/orders/crash?x=1']);
    expect(report).toEqual({ requestId, status: 500, code: 'INTERNAL_ERROR' });
  });

  test("a function's throw, and its time-out (504): an Error describing it", async () => {
    const failed = await request(t.app).post('/api/function/fails');
    expect(failed.status).toBe(500);
    const timedOut = await request(t.app).post('/api/function/hangs');
    expect(timedOut.status).toBe(504);
    expect(reported.map(({ error, report }) => [error.name, error.message, report.status, report.code])).toEqual([
      ['TypeError', 'cannot read it', 500, 'INTERNAL_ERROR'],
      ['BcmsHttpError', 'Function "hangs" ran past its time-out of 100 ms.', 504, 'FUNCTION_TIMEOUT'],
    ]);
    expect(reported[1]?.error).toBeInstanceOf(BcmsHttpError);
  });

  test('a 5xx a handler chose is reported; a 4xx is not', async () => {
    expect((await request(t.app).get('/api/plugin/shop/orders/refused')).status).toBe(409);
    expect(reported).toEqual([]);
    const res = await request(t.app).get('/api/plugin/shop/orders/unavailable');
    expect([res.status, res.body]).toEqual([503, { message: 'Come back later.' }]);
    expect(reported.map(({ error, report }) => [error.message, report.code])).toEqual([['Come back later.', 'HANDLER_ERROR']]);
  });

  test('something thrown that is not an Error arrives as an Error whose cause it is', async () => {
    expect((await request(t.app).get('/api/plugin/shop/orders/string')).status).toBe(500);
    const [{ error }] = reported as [Reported];
    expect(error).toBeInstanceOf(Error);
    expect(error.cause).toBe('not an error');
    expect(error.message).toMatch(/not an Error was thrown \(string\); answered 500 INTERNAL_ERROR/);
  });

  test('its own throw, rejection, or a promise that never settles changes nothing of the answer; the first two are logged', async () => {
    for (const [what, hook] of [
      [
        'threw',
        () => {
          throw new Error('reporter down');
        },
      ],
      ['rejected', () => Promise.reject(new Error('reporter down'))],
      ['hangs', () => new Promise(() => {})],
    ] as const) {
      behaviour = hook;
      const res = await request(t.app).get('/api/plugin/shop/orders/crash');
      expect([what, res.status, res.body]).toEqual([what, 500, { message: `Internal error. Request id: ${res.headers['x-request-id']}.` }]);
    }
    await new Promise((resolve) => setImmediate(resolve));
    const lines = t.log.lines.filter((line) => String(line.msg).startsWith('bcms-extensions: the onError option'));
    expect(lines.map((line) => [line.msg, (line.err as { message: string }).message])).toEqual([
      ['bcms-extensions: the onError option threw (the answer is unchanged)', 'reporter down'],
      ['bcms-extensions: the onError option rejected (the answer is unchanged)', 'reporter down'],
    ]);
  });

  test('a deployed function (in its isolate) that throws: its message and the isolate stack, never the service', async () => {
    // A service of its own, with the default time-outs: a call into an isolate on a busy machine takes more than this file's 100 ms.
    const seen: Reported[] = [];
    const service = await startDeployable((await sharedTestDatabase()).knex, {}, { onError: (error, req, report) => void seen.push({ error, req, report }) });
    try {
      await deploy(service.app, service.deployer, 'function', 'isolated-fails', functionSource('isolated-fails', "async () => { throw new RangeError('out of range'); }"));
      const res = await request(service.app).post('/api/function/isolated-fails');
      expect(res.status).toBe(500);
      expect(seen.map(({ error, report }) => [error.name, error.message, report.code])).toEqual([['RangeError', 'out of range (in extension function isolated-fails@1.0.0)', 'INTERNAL_ERROR']]);
      expect(seen[0]?.error.stack).not.toMatch(/http[/\\]exchange/);
    } finally {
      await service.close();
    }
  }, 60_000);

  test('a hook that is not a function is refused at start', () => {
    expect(() => bcmsExtensions({}, { onError: 'sentry' as never })).toThrow('option onError must be a function');
  });
});

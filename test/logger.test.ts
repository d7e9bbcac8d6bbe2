import { spawn } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { redactUrl } from '../lib/logger';
import { sharedTestDatabase } from './support/database';

const SERVER = path.join(__dirname, 'fixtures', 'servers', 'default-logger.js');

/** Starts the fixture server; resolves once it listens, with what it printed and how it ended. */
async function start(mode: string[]) {
  const child = spawn(process.execPath, [SERVER, ...mode], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise<number>((resolve, reject) => {
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      const found = /listening (\d+)/.exec(stderr);
      if (found) resolve(Number(found[1]));
    });
    child.on('exit', () => reject(new Error(`the server ended before listening: ${stderr}`)));
  });
  return { child, port, exited, stdout: () => stdout };
}

/**
 * Keeps 20 keep-alive connections busy until `before` requests were answered (however long that
 * takes on a loaded machine), then sends the signal while requests are still arriving, so some
 * answered requests' lines are waiting for the end of the turn. Resolves to the request ids of
 * every 200 the clients received.
 */
async function hammerThenSignal(port: number, child: ReturnType<typeof spawn>, signal: NodeJS.Signals, before: number): Promise<string[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
  const answered: string[] = [];
  let signalled = false;
  const one = () =>
    new Promise<void>((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/api/plugin/ping/ping', agent }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) answered.push(String(res.headers['x-request-id']));
          resolve();
        });
        res.on('error', () => resolve());
      });
      req.on('error', () => resolve()); // cut by the stop: no answer, so no line is owed
    });
  const loop = async () => {
    while (!signalled) await one();
  };
  const workers = Array.from({ length: 20 }, loop);
  while (answered.length < before) await new Promise((resolve) => setTimeout(resolve, 10));
  signalled = true;
  child.kill(signal);
  await Promise.all(workers);
  agent.destroy();
  return answered;
}

describe('the default logger: a line for every answered request, none lost when the app stops through router.close()', () => {
  test.each([
    ['SIGTERM', 'the host stops itself and exits 0', ['own-handler']],
    ['SIGINT', 'the host stops itself and exits 0', ['own-handler']],
    ['SIGTERM', 'the host stops itself with a once-listener added before the router, and exits 0', ['once-before']],
  ] as const)(
    '%s, %s',
    async (signal, _how, mode) => {
      const server = await start([...mode]);
      const answered = await hammerThenSignal(server.port, server.child, signal, 60);
      expect(await server.exited).toEqual({ code: 0, signal: null });

      const lines = server
        .stdout()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { msg: string; requestId?: string; status?: number });
      const logged = new Set(lines.filter((line) => line.msg === 'request').map((line) => line.requestId));
      expect(answered.length).toBeGreaterThanOrEqual(60);
      const missing = answered.filter((id) => !logged.has(id));
      expect(missing).toEqual([]);
    },
    60_000,
  );

  test.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)(
    '%s with no handler of the host: the process ends by it, as it would without the router (the library listens to no signal)',
    async (signal) => {
      const server = await start([]);
      expect((await fetch(`http://127.0.0.1:${server.port}/api/plugin/ping/ping`)).status).toBe(200);
      server.child.kill(signal);
      expect(await server.exited).toEqual({ code: null, signal });
    },
    60_000,
  );

  test("requiring the package, building a router (the default logger) and closing it adds no signal or error listener; at exit, only pino's own flush of its destination", async () => {
    const events = ['beforeExit', 'SIGTERM', 'SIGINT', 'SIGHUP', 'uncaughtException', 'unhandledRejection', 'warning'] as const;
    const counts = (): Record<string, number> => Object.fromEntries(events.map((event) => [event, process.listenerCount(event)]));
    const before = counts();
    const exitBefore = process.listeners('exit');
    // Required here, after the count: what requiring it adds is counted too.
    const { bcmsExtensions } = require('../lib') as typeof import('../lib/index.js');
    const { knex } = await sharedTestDatabase();
    const router = bcmsExtensions({}, { database: knex });
    await router.ready;
    const exitAdded = (): string[] =>
      process
        .listeners('exit')
        .filter((listener) => !exitBefore.includes(listener))
        .map((listener) => listener.name);
    expect(counts()).toEqual(before);
    // pino.destination registers one (on-exit-leak-free's `onExit`, shared by every asynchronous pino destination) to flush at exit.
    expect(exitAdded().filter((name) => name !== 'onExit')).toEqual([]);
    expect(exitAdded().length).toBeLessThanOrEqual(1);
    await router.close();
    expect(counts()).toEqual(before);
  });

  test('a reader that closes stdout (node server.js | head) does not take the server down', async () => {
    const server = await start([]);
    server.child.stdout.destroy();
    for (let i = 0; i < 30; i++) {
      const res = await fetch(`http://127.0.0.1:${server.port}/api/plugin/ping/ping`);
      expect(res.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(server.child.exitCode).toBeNull();
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: null, signal: 'SIGTERM' });
  }, 60_000);

  test('the request line is the line pino writes for the same fields, byte for byte', async () => {
    const server = await start([]);
    for (const url of ['/api/plugin/ping/ping', '/api/plugin/ping/ping?token=secret', '/api/plugin/ping/nope%22%C3%A9']) {
      await fetch(`http://127.0.0.1:${server.port}${url}`);
    }
    // A client's request id and a trace, in the line too.
    await fetch(`http://127.0.0.1:${server.port}/api/plugin/ping/ping`, { headers: { 'X-Request-Id': 'edge-42', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } });
    // Written at the end of their turn, asynchronously: read once out (nothing flushes them at a signal the host does not handle).
    // (However long that takes on a loaded machine: the test's own time-out bounds it.)
    while (
      server
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"msg":"request"')).length < 3
    )
      await new Promise((resolve) => setTimeout(resolve, 20));
    server.child.kill('SIGTERM');
    await server.exited;
    const raw = server
      .stdout()
      .split('\n')
      .filter((line) => line.includes('"msg":"request"'));
    expect(raw).toHaveLength(3); // the third path is not the router's: the host's 404, not logged
    expect(JSON.parse(raw[2] ?? '{}')).toMatchObject({ requestId: 'edge-42', traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    for (const line of raw) {
      const fields = JSON.parse(line) as { time: number; pid: number; requestId: string; traceId?: string; method: string; path: string; status: number; ms: number };
      let written = '';
      const reference = pino(
        { name: 'bcms-extensions', base: { pid: fields.pid, hostname: os.hostname() }, timestamp: () => `,"time":${fields.time}` },
        {
          write: (text: string) => {
            written += text;
          },
        },
      );
      reference.info(
        { requestId: fields.requestId, ...(fields.traceId === undefined ? {} : { traceId: fields.traceId }), method: fields.method, path: fields.path, status: fields.status, ms: fields.ms },
        'request',
      );
      expect(line).toBe(written.trimEnd());
      expect(fields).toMatchObject({ pid: server.child.pid, method: 'GET', path: '/api/plugin/ping/ping', status: 200 });
    }
  }, 60_000);
});

describe('redactUrl: a URL fit for a log line', () => {
  test("the BCMS client's signed query and credential-looking parameters are [redacted]; the path and other parameters stay", () => {
    expect(redactUrl('/api/function/f?key=k1&nonce=a1b2c3&timestamp=1700000000000&signature=00a7&page=2')).toBe(
      '/api/function/f?key=[redacted]&nonce=[redacted]&timestamp=[redacted]&signature=[redacted]&page=2',
    );
    expect(redactUrl('/x?access_token=t&sig=s&apiKey=a&client_secret=c&X-Amz-Signature=z&password=p&q=hello')).toBe(
      '/x?access_token=[redacted]&sig=[redacted]&apiKey=[redacted]&client_secret=[redacted]&X-Amz-Signature=[redacted]&password=[redacted]&q=hello',
    );
  });

  test('names are read as a server reads them (percent-encoded, any case); a URL without a query is as it was', () => {
    expect(redactUrl('/x?sig%6Eature=s&SIGNATURE=t&Token=u#signature=v')).toBe('/x?sig%6Eature=[redacted]&SIGNATURE=[redacted]&Token=[redacted]#signature=v');
    expect(redactUrl('/api/function/f')).toBe('/api/function/f');
    expect(redactUrl('/x?flag&page=1')).toBe('/x?flag&page=1');
  });
});

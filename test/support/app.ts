import { Writable } from 'node:stream';
import express, { type Express } from 'express';
import jwt from 'jsonwebtoken';
import pino from 'pino';
import { sharedTestDatabase } from './database';
import { listen } from './raw-http';
import { bcmsExtensions, type BcmsExtensionsOptions, type BcmsExtensionsRouter, type BcmsRegistry } from '../../lib';

export const JWT_SECRET = 'test-secret-with-enough-length-123';

/** A pino logger whose lines are kept, parsed, for assertions. */
export function memoryLogger(): { logger: pino.Logger; lines: Record<string, unknown>[]; text: () => string } {
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      raw.push(String(chunk));
      done();
    },
  });
  const logger = pino({ level: 'debug' }, stream);
  return {
    logger,
    get lines() {
      return raw
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    text: () => raw.join(''),
  };
}

/** Routers buildApp made that are still open. */
const built = new Set<BcmsExtensionsRouter>();

/**
 * Closes the routers buildApp made that their test file left open (test/support/setup.ts, after
 * each file): a deployed extension's isolates and the pool would keep Jest's process alive.
 */
export async function closeBuiltApps(): Promise<void> {
  const open = [...built];
  built.clear();
  await Promise.all(open.map((router) => router.close()));
}

export interface TestApp {
  app: Express;
  router: BcmsExtensionsRouter;
  log: ReturnType<typeof memoryLogger>;
}

/** A host app with its own route and 404, and the router mounted next to them. */
export async function buildApp(registry: BcmsRegistry, options: BcmsExtensionsOptions = {}): Promise<TestApp> {
  const log = memoryLogger();
  const database = options.database ?? (await sharedTestDatabase()).knex;
  const router = bcmsExtensions(registry, { jwt: { secret: JWT_SECRET }, logger: log.logger, ...options, database });
  built.add(router);
  const close = router.close;
  Object.assign(router, {
    close: () => {
      built.delete(router);
      return close();
    },
  });
  const app = express();
  app.get('/host/health', (_req, res) => {
    res.json({ host: true });
  });
  app.use(router);
  app.use((_req, res) => {
    res.status(404).json({ host404: true });
  });
  await router.ready;
  return { app, router, log };
}

type Role = { name: string; permissions: { name: string }[] };

/** Signs a BCMS-shaped token (HS256 with the test secret unless told otherwise). */
export function signToken(rls: Role[] = [{ name: 'ADMIN', permissions: [{ name: 'READ' }] }], options: jwt.SignOptions & { secret?: string; payload?: Record<string, unknown> } = {}): string {
  const { secret = JWT_SECRET, payload = {}, ...signOptions } = options;
  // A payload that sets `exp` itself (an expired token) must not also get `expiresIn`.
  const lifetime = 'exp' in payload ? {} : { expiresIn: '1h' as const };
  return jwt.sign({ userId: 'user-1', rls, ...payload }, secret, { algorithm: 'HS256', ...lifetime, ...signOptions });
}

export const role = (name: string, ...permissions: string[]): Role => ({ name, permissions: permissions.map((p) => ({ name: p })) });

/** A local port nobody listens on: to start a server on, or to find nothing at (fetch refuses some well-known ports, such as 1, outright). */
export async function freePort(): Promise<number> {
  const net = await import('node:net');
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as import('node:net').AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * `buildApp`, also listening on a local port (for the raw-socket clients of test/support/raw-http),
 * for the tests of the describe it is called in: made before them, closed after.
 */
export function listeningTestApp(registry: BcmsRegistry, options: BcmsExtensionsOptions = {}): { readonly t: TestApp; readonly port: number } {
  const running = {} as { t: TestApp; port: number; close?: () => Promise<void> };
  beforeAll(async () => {
    running.t = await buildApp(registry, options);
    const server = await listen(running.t.app);
    running.port = server.port;
    running.close = server.close;
  }, 60_000);
  afterAll(async () => {
    await running.close?.();
    await running.t?.router.close();
  });
  return running;
}

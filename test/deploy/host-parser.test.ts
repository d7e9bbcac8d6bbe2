import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { bcmsExtensions, type BcmsExtensionsRouter, keepRawBody } from '../../lib';
import { JWT_SECRET, memoryLogger, role, signToken } from '../support/app';
import { runCli } from '../support/cli';
import { sharedTestDatabase } from '../support/database';
import { functionSource } from '../support/deploy';
import { hmacKey } from '../support/signature';

// The app's own body parser mounted before the router, as the README allows for signed calls:
// `bcms-ext deploy` and the router's other routes that read a body work over the bytes it kept.

interface Served {
  router: BcmsExtensionsRouter;
  url: string;
  log: ReturnType<typeof memoryLogger>;
  close(): Promise<void>;
}

/** The router behind `parser`, listening; its files folder its own. */
async function serve(parser: express.RequestHandler): Promise<Served> {
  const filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-host-parser-'));
  const log = memoryLogger();
  const router = bcmsExtensions({}, { database: (await sharedTestDatabase()).knex, logger: log.logger, jwt: { secret: JWT_SECRET }, files: { dir: filesDir } });
  const server: Server = express().use(parser).use(router).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  await router.ready;
  return {
    router,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    log,
    close: async () => {
      await new Promise((resolve) => server.close(resolve));
      await router.close();
      fs.rmSync(filesDir, { recursive: true, force: true });
    },
  };
}

/** A project folder for `url`: a .env with a new deploy key, and bcms-bundle/function-NAME.json answering `answer`; `padding` bytes of comment make it larger. */
async function project(url: string, name: string, answer: string, version: string, padding = 0): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-host-parser-project-'));
  const key = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true, name: 'deployer' });
  fs.writeFileSync(path.join(dir, '.env'), `BCMS_URL=${url}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
  writeBundle(dir, name, answer, version, padding);
  return dir;
}

function writeBundle(dir: string, name: string, answer: string, version: string, padding = 0): void {
  const code = `${functionSource(name, `async () => ${JSON.stringify(answer)}`)}\n// ${'x'.repeat(padding)}\n`;
  const bundle = { manifest: { kind: 'function', name, version, sha256: createHash('sha256').update(code).digest('hex') }, code };
  fs.mkdirSync(path.join(dir, 'bcms-bundle'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'bcms-bundle', `function-${name}.json`), JSON.stringify(bundle));
}

describe('express.json({ verify: keepRawBody }) before the router', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serve(express.json({ limit: '20mb', verify: keepRawBody }));
  });
  afterAll(() => served.close());

  test('bcms-ext deploy, list, rollback, undeploy and events are checked over the bytes the parser kept', async () => {
    const dir = await project(served.url, 'parsed-first', 'one', '1.0.0');
    expect(await runCli(['deploy'], {}, dir)).toMatchObject({ status: 0, err: '' });
    expect((await request(served.url).post('/api/function/parsed-first')).body.result).toBe('one');
    // Large enough that a body parser reads it in many chunks.
    writeBundle(dir, 'parsed-first', 'two', '2.0.0', 300_000);
    expect(await runCli(['deploy'], {}, dir)).toMatchObject({ status: 0, err: '' });
    expect((await request(served.url).post('/api/function/parsed-first')).body.result).toBe('two');
    expect((await runCli(['list'], {}, dir)).out).toMatch(/\n\*\s+function\s+parsed-first\s+2\.0\.0\s/);
    expect(await runCli(['rollback', 'parsed-first'], {}, dir)).toMatchObject({ status: 0, err: '' });
    expect((await request(served.url).post('/api/function/parsed-first')).body.result).toBe('one');
    expect(await runCli(['events', '--json'], {}, dir)).toMatchObject({ status: 0, err: '' });
    expect(await runCli(['undeploy', 'parsed-first'], {}, dir)).toMatchObject({ status: 0, err: '' });
  }, 90_000); // three versions loaded in isolates: long on a loaded machine

  test('the keys routes and the SDK’s writes take the body the parser made', async () => {
    const admin = `Bearer ${signToken([role('SUDO', 'READ', 'WRITE', 'DELETE')])}`;
    const created = await request(served.url)
      .post('/api/extensions/keys')
      .set('Authorization', admin)
      .send({ name: 'from a parsed body', functions: ['report'] });
    expect([created.status, typeof created.body.id]).toEqual([201, 'string']);
    const template = await request(served.url).post('/api/extensions/templates').set('Authorization', admin).send({ label: 'Parsed first' });
    expect([template.status, template.body.name]).toEqual([200, 'parsed_first']);
  });
});

describe('express.json() without keepRawBody before the router', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serve(express.json({ limit: '20mb' }));
  });
  afterAll(() => served.close());

  test('a deploy is refused with what to change (BODY_ALREADY_PARSED), not a digest mismatch; list still works', async () => {
    const dir = await project(served.url, 'parsed-unkept', 'one', '1.0.0');
    const refused = await runCli(['deploy'], {}, dir);
    expect(refused.status).toBe(1);
    expect(refused.err).toMatch(
      /^bcms-ext deploy: the service answered 500: A body parser ran before the router, so the signed body cannot be checked: mount the router first, or give the parser verify: keepRawBody\. Request id: \S+\.\n$/,
    );
    expect(served.log.lines.find((line) => line.level === 50 && String(line.msg).includes('a body parser ran before the router'))).toMatchObject({ path: '/api/extensions/deployments' });
    expect((await request(served.url).post('/api/function/parsed-unkept')).status).toBe(404);
    expect(await runCli(['list'], {}, dir)).toMatchObject({ status: 0, err: '' });
  });
});

describe("the app's parser refuses a bundle past its limit (express.json's 100kb by default)", () => {
  let served: Served;
  beforeAll(async () => {
    served = await serve(express.json({ verify: keepRawBody }));
  });
  afterAll(() => served.close());

  test('bcms-ext deploy says which parser refused it, and how to let bundles through', async () => {
    const dir = await project(served.url, 'parsed-large', 'one', '1.0.0', 200_000);
    const refused = await runCli(['deploy'], {}, dir);
    expect(refused.status).toBe(1);
    expect(refused.err).toBe(
      `bcms-ext deploy: ${served.url}/api/extensions/deployments answered 413 without JSON: a body parser of the app refused the bundle before bcms-extensions read it. ` +
        "Mount the router before the app's body parsers, or give them a limit that fits bundles: express.json({ limit: '20mb', verify: keepRawBody }).\n",
    );
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { listeningTestApp } from '../support/app';
import { builtCli, runCli } from '../support/cli';
import { sharedTestDatabase } from '../support/database';
import { linkProjectModules } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { ROOMY } from '../support/wait';

// A functions project's events and jobs through the CLI: `create event`, `create job`, `bundle`
// (one bundle per file of src/events and src/jobs, named after it), `deploy` (with the
// functions), `list`, and `undeploy NAME --kind event|job`, against a service over HTTP.

const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

// Loads and runs have all the time a loaded machine may need: no limit is checked here.
const service = listeningTestApp({}, ROOMY);

test('create event and create job write src/events/NAME.ts and src/jobs/NAME.ts; bundle, deploy, list, undeploy --kind', async () => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-cli-'));
  made.push(parent);
  expect((await runCli(['create', 'functions', 'site-hooks'], {}, parent)).status).toBe(0);
  const dir = path.join(parent, 'site-hooks');
  expect(await runCli(['create', 'event', 'on-entry'], {}, dir)).toEqual({
    status: 0,
    out: 'Created src/events/on-entry.ts (the event "on-entry"). Bundle and deploy it with the project\'s functions: npm run bundle && npm run deploy\n',
    err: '',
  });
  expect((await runCli(['create', 'job', 'tick'], {}, dir)).out).toBe(
    'Created src/jobs/tick.ts (the job "tick"). Bundle and deploy it with the project\'s functions: npm run bundle && npm run deploy\n',
  );
  // BCMS's enums, from this package, as a BCMS event file imports them from BCMS's.
  expect(fs.readFileSync(path.join(dir, 'src', 'events', 'on-entry.ts'), 'utf8')).toContain('config: { scope: BCMSEventConfigScope.ENTRY, method: BCMSEventConfigMethod.ALL },');
  expect(fs.readFileSync(path.join(dir, 'src', 'jobs', 'tick.ts'), 'utf8')).toContain("cron: { minute: '*/15', hour: '*', dayOfMonth: '*', month: '*', dayOfWeek: '*' },");

  linkProjectModules(dir);
  const bundled = builtCli(['bundle'], dir);
  expect(bundled.all).toMatch(
    /^Type-checking src\/\.\.\. ok\nBundling src\/functions\/hello\.ts\.\.\. [\d.]+ KB\nBundling src\/events\/on-entry\.ts\.\.\. [\d.]+ KB\nBundling src\/jobs\/tick\.ts\.\.\. [\d.]+ KB\n/,
  );
  expect(bundled.out).toMatch(
    /\nWrote bcms-bundle\/event-on-entry\.json \(event on-entry 0\.1\.0, sha256 [0-9a-f]{12}\.\.\.\)\nWrote bcms-bundle\/job-tick\.json \(job tick 0\.1\.0, sha256 [0-9a-f]{12}\.\.\.\)\n$/,
  );
  expect(bundled.status).toBe(0);
  const written = JSON.parse(fs.readFileSync(path.join(dir, 'bcms-bundle', 'job-tick.json'), 'utf8')) as { manifest: Record<string, string>; code: string };
  expect(written.manifest).toMatchObject({ kind: 'job', name: 'tick', version: '0.1.0', project: 'site-hooks' });
  expect(written.code).toContain('require("bcms-extensions")');

  const key = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true, name: 'hooks deployer' });
  fs.writeFileSync(path.join(dir, '.env'), `BCMS_URL=http://127.0.0.1:${service.port}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
  const deployed = await runCli(['deploy'], {}, dir);
  expect(deployed).toMatchObject({ status: 0, err: '' });
  // The files of bcms-bundle/ in order: events, functions, jobs.
  expect(deployed.out).toMatch(
    /^Deploying event on-entry 0\.1\.0 \([\d.]+ KB\) to http:\/\/127\.0\.0\.1:\d+\.\.\. live\.\nDeploying function hello 0\.1\.0 .*\.\.\. live\.\nDeploying job tick 0\.1\.0 .*\.\.\. live\.\n$/,
  );

  const list = (await runCli(['list'], {}, dir)).out;
  expect(list).toMatch(/\n\*\s+event\s+on-entry\s+0\.1\.0\s+[0-9a-f]{12}\s+running\s/);
  expect(list).toMatch(/\n\*\s+job\s+tick\s+0\.1\.0\s+[0-9a-f]{12}\s+running\s/);

  expect(await runCli(['undeploy', 'tick', '--kind', 'job'], {}, dir)).toEqual({ status: 0, out: 'Undeployed: job tick 0.1.0 is no longer served.\n', err: '' });
  // Without --kind, the kind the service lists under the name.
  expect(await runCli(['undeploy', 'on-entry'], {}, dir)).toEqual({ status: 0, out: 'Undeployed: event on-entry 0.1.0 is no longer served.\n', err: '' });
  expect((await runCli(['undeploy', 'tick', '--kind', 'job'], {}, dir)).err).toBe(
    'bcms-ext undeploy: the service answered 404: No job named "tick" is deployed. See what is deployed: bcms-ext list.\n',
  );
  expect(await runCli(['rollback', 'tick', '--kind', 'job'], {}, dir)).toMatchObject({ status: 0, out: expect.stringMatching(/^Rolled back: job tick 0\.1\.0 \([0-9a-f]{12}\) is live again\.\n$/) });
}, 240_000);

test('a name two kinds go by: undeploy without --kind says which to add', async () => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-cli-'));
  made.push(parent);
  const key = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true, name: 'twin deployer' });
  fs.writeFileSync(path.join(parent, '.env'), `BCMS_URL=http://127.0.0.1:${service.port}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
  const { createHash } = await import('node:crypto');
  const write = (kind: string, code: string): void => {
    fs.mkdirSync(path.join(parent, 'bcms-bundle'), { recursive: true });
    const manifest = { kind, name: 'twin', version: '1.0.0', sha256: createHash('sha256').update(code).digest('hex') };
    fs.writeFileSync(path.join(parent, 'bcms-bundle', `${kind}-twin.json`), JSON.stringify({ manifest, code }));
  };
  write('event', "\"use strict\";\nexports.default = require('bcms-extensions').createBcmsEvent(async () => ({ config: { scope: 'ENTRY', method: 'ALL' }, handler: async () => {} }));");
  write(
    'job',
    "\"use strict\";\nexports.default = require('bcms-extensions').createBcmsJob(async () => ({ cron: { minute: '0', hour: '3', dayOfMonth: '*', month: '*', dayOfWeek: '*' }, handler: async () => {} }));",
  );
  expect((await runCli(['deploy'], {}, parent)).status).toBe(0);
  expect(await runCli(['undeploy', 'twin'], {}, parent)).toEqual({ status: 1, out: '', err: 'bcms-ext undeploy: an event and a job are named "twin": add --kind event or --kind job\n' });
  expect((await runCli(['undeploy', 'twin', '--kind', 'event'], {}, parent)).status).toBe(0);
  expect((await runCli(['undeploy', 'twin'], {}, parent)).out).toBe('Undeployed: job twin 1.0.0 is no longer served.\n');
}, 60_000);

test('create event and create job: refused outside a functions project, over a file that exists, and with --public', async () => {
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-events-none-'));
  made.push(outside);
  expect(await runCli(['create', 'event', 'x'], {}, outside)).toEqual({
    status: 1,
    out: '',
    err: 'bcms-ext create: no src/functions here: run it in a functions project (bcms-ext create functions NAME)\n',
  });
  expect((await runCli(['create', 'functions', 'p'], {}, outside)).status).toBe(0);
  const dir = path.join(outside, 'p');
  expect((await runCli(['create', 'job', 'nightly'], {}, dir)).status).toBe(0);
  expect(await runCli(['create', 'job', 'nightly'], {}, dir)).toEqual({ status: 1, out: '', err: 'bcms-ext create: src/jobs/nightly.ts exists already\n' });
  expect((await runCli(['create', 'event', 'e', '--public'], {}, dir)).err).toBe('bcms-ext create: --public is for create function FN\n');
  expect((await runCli(['create', 'event', 'not a name'], {}, dir)).err).toBe('bcms-ext create: "not a name" is not a URL-safe name (letters, digits, "-", "_", ".", "~")\n');
  expect((await runCli(['create', 'widget', 'w'], {}, dir)).err).toBe(
    'bcms-ext create: expected create plugin NAME, create functions NAME, create function FN [--public], create event NAME or create job NAME\n',
  );
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { rewriteBcmsImports } from '../../lib/bcms/port/imports';
import { listeningTestApp } from '../support/app';
import { builtCli, runCli } from '../support/cli';
import { sharedTestDatabase } from '../support/database';
import { linkProjectModules, signed } from '../support/deploy';
import { hmacKey } from '../support/signature';
import { copyBcmsV3Fixture } from './support/bcms-v3';
import { ROOMY, until } from '../support/wait';

// BCMS's documentation: "Custom features can be added ... by creating functions, events and/or
// jobs." Its customization example (a function, an event and a job in one project, in BCMS's
// layout and with BCMS's import paths; here a fixture written in that idiom) is ported with
// bcms-ext port, bundled and deployed with no hand edits.

const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

// Loads and calls have all the time a loaded machine may need: no limit is checked here.
const service = listeningTestApp({}, ROOMY);

test("BCMS's import paths of events and jobs become bcms-extensions", () => {
  const source = [
    "import { createBcmsEvent, useBcmsEventManager } from '@becomes/cms-backend/src/event';",
    "import { createBcmsJob } from '@becomes/cms-backend/src/job';",
    "import { BCMSEventConfigMethod, BCMSEventConfigScope } from '@becomes/cms-backend/src/types';",
    "import type { BCMSEvent, BCMSJob } from '@becomes/cms-backend/src/types/event';",
  ].join('\n');
  const { text, replaced } = rewriteBcmsImports(source);
  expect(text).toBe(
    [
      "import { createBcmsEvent, useBcmsEventManager } from 'bcms-extensions';",
      "import { createBcmsJob } from 'bcms-extensions';",
      "import { BCMSEventConfigMethod, BCMSEventConfigScope } from 'bcms-extensions';",
      "import type { BCMSEvent, BCMSJob } from 'bcms-extensions';",
    ].join('\n'),
  );
  expect(replaced).toEqual(['@becomes/cms-backend/src/event', '@becomes/cms-backend/src/job', '@becomes/cms-backend/src/types', '@becomes/cms-backend/src/types/event']);
});

test("BCMS's customization example (a function, an event and a job): port, bundle and deploy with no hand edits", async () => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-customization-'));
  made.push(parent);
  const dir = copyBcmsV3Fixture('site-customization', parent);
  const before = (file: string): string => fs.readFileSync(path.join(dir, file), 'utf8');
  const sources = ['src/functions/site-status.ts', 'src/events/entry-audit.ts', 'src/jobs/nightly-report.ts'];
  const original = Object.fromEntries(sources.map((file) => [file, before(file)]));

  const ported = builtCli(['port'], dir);
  expect(ported.all).toMatch(/^Ported \. \(a BCMS v3 functions project\) to bcms-extensions:\n/);
  expect(ported.out).toContain('  src/events/entry-audit.ts: 2 imports of @becomes/cms-backend/src/event, @becomes/cms-backend/src/types → bcms-extensions\n');
  expect(ported.out).toContain('  src/jobs/nightly-report.ts: 1 import of @becomes/cms-backend/src/job → bcms-extensions\n');
  expect(ported.out).toContain('  src/functions/site-status.ts: 1 import of @becomes/cms-backend/src/function → bcms-extensions\n');
  // BCMS's tsconfig has no skipLibCheck, and the project no @types/express: port adds the first.
  expect(ported.out).toMatch(/tsconfig\.json: .*skipLibCheck: true/);
  // Nothing bcms-extensions lacks: no warning.
  expect(ported.all).not.toMatch(/Warning/);
  expect(ported.status).toBe(0);
  // Only the import lines changed.
  for (const file of sources) {
    const changed = before(file)
      .split('\n')
      .filter((line, index) => line !== original[file]?.split('\n')[index]);
    expect(changed.every((line) => /from 'bcms-extensions';$/.test(line))).toBe(true);
  }

  linkProjectModules(dir);
  const bundled = builtCli(['bundle'], dir);
  expect(bundled.all).toMatch(
    /^Type-checking src\/\.\.\. ok\nBundling src\/functions\/site-status\.ts\.\.\. [\d.]+ KB\nBundling src\/events\/entry-audit\.ts\.\.\. [\d.]+ KB\nBundling src\/jobs\/nightly-report\.ts\.\.\. [\d.]+ KB\n/,
  );
  expect(bundled.status).toBe(0);
  expect(fs.readdirSync(path.join(dir, 'bcms-bundle')).sort()).toEqual(['event-entry-audit.json', 'function-site-status.json', 'job-nightly-report.json']);

  const key = await hmacKey((await sharedTestDatabase()).knex, [], { deploy: true, name: 'customization deployer' });
  fs.writeFileSync(path.join(dir, '.env'), `BCMS_URL=http://127.0.0.1:${service.port}\nBCMS_KEY_ID=${key.keyId}\nBCMS_KEY_SECRET="${key.secret}"\n`);
  const { status, out, err } = await runCli(['deploy'], {}, dir);
  expect(err).toBe('');
  expect(out).toMatch(
    /^Deploying event entry-audit 1\.0\.0 \([\d.]+ KB\) to http:\/\/127\.0\.0\.1:\d+\.\.\. live\.\nDeploying function site-status 1\.0\.0 .*\.\.\. live\.\nDeploying job nightly-report 1\.0\.0 .*\.\.\. live\.\n$/,
  );
  expect(status).toBe(0);

  // The function answers over HTTP; the event and the job are live, as the deployments list says.
  const called = await request(service.t.app).post('/api/function/site-status');
  expect(called.body).toEqual({ success: true, result: { up: true, uptimeSeconds: expect.any(Number) } });
  const listed = (await signed(service.t.app, 'GET', '/api/extensions/deployments', key)).body.deployments as { kind: string; name: string; active: boolean; state?: string; project: string }[];
  expect(listed.filter((d) => d.project === 'site-customization' && d.active).map(({ kind, name, state }) => ({ kind, name, state }))).toEqual([
    { kind: 'event', name: 'entry-audit', state: 'running' },
    { kind: 'function', name: 'site-status', state: 'running' },
    { kind: 'job', name: 'nightly-report', state: 'running' },
  ]);
  // The event handler runs, in its isolate, for an entry written afterwards.
  const [{ id: templateId }] = await service.t.router
    .db('bcms_templates')
    .insert({ name: `customization_${Date.now()}` })
    .returning('id');
  const entry = await service.t.router.repo.entry.add({ templateId });
  const delivered = async () =>
    service.t.router
      .db('bcms_event_deliveries')
      .where({ handler: 'entry-audit', doc: `ENTRY:${entry._id}`, status: 'delivered' })
      .first();
  // Delivered when it is delivered: a busy machine takes longer, and the test's own time-out is the limit.
  await until(async () => (await delivered()) !== undefined, 100);
  expect(await delivered()).toEqual(expect.objectContaining({ attempts: 1, error: null }));
}, 240_000);

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createBcmsFunction } from '../../lib';
import { buildApp } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { hmacKey } from '../support/signature';

/** The Python signing example of docs/signed-calls.md, between its markers. */
function readmePython(): string {
  const page = fs.readFileSync(path.resolve(__dirname, '..', '..', 'docs', 'signed-calls.md'), 'utf8');
  const block = /<!-- python-signing:start -->\s*```python\n([\s\S]*?)```\s*<!-- python-signing:end -->/.exec(page);
  if (!block) throw new Error('docs/signed-calls.md has no python-signing block');
  return block[1] as string;
}

let received: unknown;
const submitForm = createBcmsFunction(async () => ({
  config: { name: 'submit-form', public: false },
  handler: async ({ request, auth }) => {
    received = { body: request.body, auth };
    return { submissionId: 'from-python' };
  },
}));

let server: Server;
afterAll(() => new Promise((resolve) => server?.close(resolve)));

test("the docs' Python example signs a call the router accepts", async () => {
  const t = await buildApp({ functions: [submitForm] });
  server = t.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const key = await hmacKey((await sharedTestDatabase()).knex, ['submit-form']);
  const env = { ...process.env, BCMS_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, BCMS_KEY_ID: key.keyId, BCMS_KEY_SECRET: key.secret };
  const output = await new Promise<string>((resolve, reject) => {
    const child = execFile('python3', ['-'], { env, encoding: 'utf8' }, (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout)));
    child.stdin?.end(readmePython());
  });
  expect(output.trim()).toBe("{'submissionId': 'from-python'}");
  expect(received).toEqual({
    body: { name: 'Ada', email: 'ada@example.com', message: 'Hi' },
    auth: {
      type: 'signature',
      key: { id: key.keyId, name: 'test key', algorithm: 'hmac-sha256', functions: ['submit-form'], plugins: [] },
      // BCMS's shape of the key, beside ours
      _id: key.keyId,
      name: 'test key',
      blocked: false,
      access: { templates: [], functions: [{ name: 'submit-form' }], plugins: [] },
    },
  });
});

test("the Python example, refused, exits non-zero with the service's code and message", async () => {
  const { port } = server.address() as AddressInfo;
  const env = { ...process.env, BCMS_URL: `http://127.0.0.1:${port}`, BCMS_KEY_ID: '2b1c5a40-0000-4000-8000-000000000000', BCMS_KEY_SECRET: 'wrong' };
  const failure = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile('python3', ['-'], { env, encoding: 'utf8' }, (error, _stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stderr }));
    child.stdin?.end(readmePython());
  });
  expect(failure.code).toBe(1);
  expect(failure.stderr.trim()).toBe("401 {'code': 'SIGNATURE_INVALID', 'message': 'Unknown keyId.'}");
});

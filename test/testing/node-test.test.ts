import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { backends, serverSchema } from '../support/database';

// The kit under node:test: `node --test` runs test/testing/kit.node-test.mjs against the built
// package (dist/; `npm test` builds it first), in a process of its own, which must also end by
// itself once the file's `after` has closed the service: nothing the kit opened keeps it alive.

const FILE = path.join(__dirname, 'kit.node-test.mjs');
const ROOT = path.resolve(__dirname, '..', '..');

/** The runs still going when the file ends (a test that timed out): ended then. */
const running = new Set<ChildProcess>();
afterAll(() => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Runs `node --test` on the file; resolves to its exit code and output once it ends. It is not
 * killed after a time: a process that never ends by itself is a test that never ends, which Jest's
 * time-out fails, while a slow machine only takes longer.
 */
function nodeTest(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const clean: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete clean.NODE_OPTIONS; // Jest's --experimental-vm-modules: not what a user's node runs with
  delete clean.DATABASE_URL; // the kit never reads it; TEST_DATABASE says what to use
  const child = spawn(process.execPath, ['--test', '--test-reporter=tap', FILE], { cwd: ROOT, env: clean, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  return new Promise((resolve) => {
    child.on('close', (code) => {
      running.delete(child);
      resolve({ code, output });
    });
  });
}

describe.each(backends())('the test kit under node:test (%s)', (backend) => {
  test('its tests pass, and the process ends by itself after close()', async () => {
    let env: Record<string, string> = {};
    let drop = async (): Promise<void> => {};
    if (backend === 'postgres') {
      const schema = await serverSchema('bcms_kit_node');
      env = { TEST_DATABASE: schema.url };
      drop = schema.drop;
    }
    try {
      const { code, output } = await nodeTest(env);
      expect({ code, pass: /^# pass (\d+)$/m.exec(output)?.[1], fail: /^# fail (\d+)$/m.exec(output)?.[1] }).toEqual({ code: 0, pass: '3', fail: '0' });
      for (const name of ['a guarded plugin endpoint reads seeded entries', 'signedCall calls a private function', 'deploy() takes a bundle']) {
        expect(output).toMatch(new RegExp(`^ok \\d+ - ${name.replace(/[()]/g, '\\$&')}`, 'm'));
      }
    } finally {
      await drop();
    }
  }, 120_000);
});

import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './app';
import { start, stopStartedApps } from './example';
import { until } from './wait';

// The workflow tests' service: the example app as `npm start` runs it, a token and a deploy key, and
// the commands and requests a user makes against it.
export const ROOT = path.resolve(__dirname, '..', '..');
export const BIN = path.join(ROOT, 'dist', 'cli', 'bin.js');
export const PASSWORD = 'workflow-password';
/** Set by `useWorkflowService()` before the file's tests run. */
export const service = { base: '', token: '', deployKey: {} as Record<string, string> };

/** A command in a project, with the environment a user would have (no test database, no NODE_OPTIONS). */
export function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): SpawnSyncReturns<string> {
  const clean: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete clean.DATABASE_URL;
  delete clean.NODE_OPTIONS;
  return spawnSync(command, args, { cwd, env: clean, encoding: 'utf8', timeout: 180_000 });
}

export const output = (result: SpawnSyncReturns<string>): string => `${result.stdout}${result.stderr}`;

/**
 * fetch, once more if the server closed a kept-alive connection just as it was reused (long npm
 * installs leave the pool's sockets idle past the server's keep-alive time-out).
 */
export async function request(url: string, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(service.base + url, init);
  } catch (error) {
    if (!/other side closed|ECONNRESET/.test(String((error as { cause?: unknown }).cause ?? error))) throw error;
    return fetch(service.base + url, init);
  }
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const response = await request(url, { headers });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // HTML
  }
  return { status: response.status, body };
}

/** Until `check` holds, looking every 200 ms: bundling and deploying take longer on a busy machine, and the test's own time-out is the limit. `_what` says what, to the reader. */
export async function waitFor(check: () => Promise<boolean>, _what: string): Promise<void> {
  await until(check, 200);
}

/** Starts the service for the calling test file, and stops it after. */
export function useWorkflowService(): void {
  beforeAll(async () => {
    const port = await freePort();
    await start(port, fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-workflow-data-')), { ADMIN_PASSWORD: PASSWORD });
    service.base = `http://localhost:${port}`;
    const login = await fetch(`${service.base}/api/auth/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'admin@example.com', password: PASSWORD }),
    });
    service.token = ((await login.json()) as { accessToken: string }).accessToken;
    // The admin is SUDO, and the example app makes deploy keys over HTTP: an ed25519 pair, its private key written here.
    const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-workflow-key-'));
    const created = run(process.execPath, [BIN, 'keys', 'create', '--name', 'workflow deployer', '--deploy', '--env'], keyDir, { BCMS_URL: service.base, BCMS_TOKEN: service.token });
    expect(created.status).toBe(0);
    service.deployKey = Object.fromEntries([...created.stdout.matchAll(/^export (\w+)='([^']+)'$/gm)].map((m) => [m[1] as string, m[2] as string]));
    expect(service.deployKey).toEqual({ BCMS_KEY_ID: expect.any(String), BCMS_PRIVATE_KEY_FILE: path.join(keyDir, 'bcms-deploy-key.pem') });
  }, 60_000);
  afterAll(stopStartedApps);
}

export async function send(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const response = await request(url, {
    method,
    headers: body === undefined ? headers : { ...headers, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}

/** The .env a project gets: the service's URL and the deploy key (its private key's file). */
export function writeEnv(dir: string): void {
  fs.writeFileSync(path.join(dir, '.env'), `BCMS_URL=${service.base}\nBCMS_KEY_ID=${service.deployKey.BCMS_KEY_ID}\nBCMS_PRIVATE_KEY_FILE=${service.deployKey.BCMS_PRIVATE_KEY_FILE}\n`);
}

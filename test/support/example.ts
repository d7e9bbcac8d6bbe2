import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/** The example app (example-app/server.js) as a child process, started as `npm start` starts it. */
const root = path.resolve(__dirname, '..', '..');

export interface Running {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Every app a test started: one that failed half-way is killed after it (call this in afterEach), so it holds no port and Jest does not wait for it. */
const started: ChildProcess[] = [];
export function stopStartedApps(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

export function start(port: number, dataDir: string, extraEnv: Record<string, string> = {}): Promise<Running> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.DATABASE_URL; // the README's first run: the embedded default (unless extraEnv sets one)
  delete env.ADMIN_PASSWORD;
  delete env.ADMIN_EMAIL;
  delete env.NODE_OPTIONS;
  Object.assign(env, { PORT: String(port), EXAMPLE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' }, extraEnv);
  const child = spawn(process.execPath, [path.join(root, 'example-app', 'server.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const poll = setInterval(() => {
      if (output.includes('Stop with Ctrl+C.')) {
        clearInterval(poll);
        resolve({ child, output: () => output, exited });
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(poll);
      reject(new Error(`the example app exited (${code}) before it was ready:\n${output}`));
    });
  });
}

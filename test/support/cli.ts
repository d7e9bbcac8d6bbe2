import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { main } from '../../lib/cli/main';

/** The built CLI (run `npm run build` first). */
export const BIN = path.resolve(__dirname, '..', '..', 'dist', 'cli', 'bin.js');

/** `bcms-ext ARGS` in this process, with its output kept: what a user would see, and its exit status. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ status: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const status = await main(args, { out: (text) => void out.push(text), err: (text) => void err.push(text), env, cwd });
  return { status, out: out.join(''), err: err.join('') };
}

/** The built CLI as a user runs it, in a process of its own with a user's environment (no NODE_OPTIONS of Jest's). */
export function builtCli(args: string[], cwd: string): { status: number | null; out: string; all: string } {
  const result = spawnSync(process.execPath, [BIN, ...args], { cwd, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' }, timeout: 180_000 });
  return { status: result.status, out: result.stdout, all: `${result.stdout}${result.stderr}` };
}

import fs from 'node:fs';
import path from 'node:path';

/** KEY=VALUE lines of a .env file in `dir` (quotes stripped); every command lets the environment win over it. */
export function readDotEnv(dir: string): Record<string, string> {
  const file = path.join(dir, '.env');
  if (!fs.existsSync(file)) return {};
  const values: Record<string, string> = {};
  for (const line of fs.readFileSync(file, 'utf8').split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (match) values[match[1] as string] = (match[2] as string).replace(/^(['"])(.*)\1$/, '$2');
  }
  return values;
}

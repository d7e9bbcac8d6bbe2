import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'dotenv';

/** The variables of a .env file in `dir`, as dotenv reads them; every command lets the environment win over it. */
export function readDotEnv(dir: string): Record<string, string> {
  const file = path.join(dir, '.env');
  return fs.existsSync(file) ? parse(fs.readFileSync(file)) : {};
}

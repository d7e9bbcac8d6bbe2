import { execFileSync } from 'node:child_process';
import path from 'node:path';

/** The official OpenAPI 3.1 schema's verdict, from @seriousme/openapi-schema-validator (an ES module: in a child process). */
export function validateOpenApi(document: unknown): { valid: boolean; version: string; errors: unknown[] } {
  const out = execFileSync(process.execPath, [path.join(__dirname, 'openapi-validate.mjs')], { input: JSON.stringify(document), encoding: 'utf8' });
  return JSON.parse(out) as { valid: boolean; version: string; errors: unknown[] };
}

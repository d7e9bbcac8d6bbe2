import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The official OpenAPI 3.1 schema's verdict, from @seriousme/openapi-schema-validator (an ES module: in a child process). */
export function validateOpenApi(document: unknown): { valid: boolean; version: string; errors: unknown[] } {
  const out = execFileSync(process.execPath, [path.join(__dirname, 'openapi-validate.mjs')], { input: JSON.stringify(document), encoding: 'utf8' });
  return JSON.parse(out) as { valid: boolean; version: string; errors: unknown[] };
}

interface RedoclyProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer: string }[];
}

/** Redocly's verdict under its recommended rules (its CLI, as CI runs it): the errors, each as `rule at pointer: message`, and the warnings' rules. */
export function lintOpenApi(document: unknown): { errors: string[]; warnings: string[] } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-openapi-lint-'));
  try {
    const file = path.join(dir, 'openapi.json');
    fs.writeFileSync(file, JSON.stringify(document, null, 2));
    const bin = path.join(__dirname, '..', '..', 'node_modules', '.bin', 'redocly');
    // It exits 1 when it finds errors: the JSON report is read either way.
    const run = spawnSync(bin, ['lint', file, '--format=json'], { encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } });
    const { problems } = JSON.parse(run.stdout) as { problems: RedoclyProblem[] };
    const errors = problems.filter((problem) => problem.severity === 'error').map((problem) => `${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`);
    return { errors, warnings: problems.filter((problem) => problem.severity === 'warn').map((problem) => problem.ruleId) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

import fs from 'node:fs';
import { lintOpenApi, validateOpenApi } from '../support/openapi';

// The example app's document, committed as docs/example-app.openapi.json: current (else
// `npm run openapi:example` writes it again) and valid OpenAPI 3.1. Built from dist, as the example
// app runs it (its guards are dist's), so `npm run build` comes first, as for the example app's tests.
const { exampleOpenApi, FILE } = require('../../example-app/openapi') as { exampleOpenApi: () => Promise<string>; FILE: string };

test("docs/example-app.openapi.json is what the example app serves now, valid OpenAPI 3.1 and lint-clean under Redocly's recommended rules", async () => {
  const served = await exampleOpenApi();
  const committed = fs.readFileSync(FILE, 'utf8');
  if (served !== committed) throw new Error('docs/example-app.openapi.json is out of date: run npm run openapi:example, and commit it');
  const document = JSON.parse(served) as { paths: Record<string, Record<string, { summary?: string; security?: unknown }>> };
  expect(validateOpenApi(document)).toEqual({ valid: true, version: '3.1', errors: [] });
  // Redocly's recommended rules: no error (its warnings are the error codes' components no route of the example answers).
  expect(lintOpenApi(document).errors).toEqual([]);
  expect(document.paths['/api/plugin/content-stats/stats/submissions']?.get?.security).toEqual([{ bearer: [] }]);
  expect(document.paths['/api/function/get-all-blogs-titles']?.post?.security).toEqual([]);
}, 60_000);

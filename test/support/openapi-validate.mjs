// Checks an OpenAPI document (JSON on stdin) against the official 3.x schemas; prints
// { valid, version, errors }. A child process of its own: the validator is an ES module only.
import { Validator } from '@seriousme/openapi-schema-validator';

let text = '';
for await (const chunk of process.stdin) text += chunk;
const validator = new Validator();
const result = await validator.validate(JSON.parse(text));
process.stdout.write(JSON.stringify({ valid: result.valid, version: validator.version, errors: result.errors ?? [] }));

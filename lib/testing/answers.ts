import type { ErrorObject, ValidateFunction } from 'ajv';

/**
 * Checks answers against what the service's OpenAPI document says of them: a method's
 * `responseSchema` (or its BCMS doc's `response.jsonSchema`), a function's `config.responseSchema`
 * inside its `{ success, result }` envelope. The kit checks in tests what the router never checks
 * on a request.
 */

type JsonSchema = Record<string, unknown>;
interface OpenApiDocument {
  paths?: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema?: JsonSchema }> }> }>>;
}

let ajv: import('ajv').default | undefined;
/** JSON Schema 2020-12, OpenAPI 3.1's dialect; unknown formats and keywords pass, as the document's are descriptions. */
function getAjv(): import('ajv').default {
  if (ajv !== undefined) return ajv;
  const Ajv2020 = (require('ajv/dist/2020') as { default: typeof import('ajv').default }).default;
  ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
  return ajv;
}

const compiled = new WeakMap<object, ValidateFunction>();

/**
 * The operation that serves `method pathname`, as the router picks it: the static path when it
 * serves the verb, else the first path with parameters that matches and serves it.
 */
function operationOf(paths: NonNullable<OpenApiDocument['paths']>, method: string, pathname: string) {
  const verb = method.toLowerCase();
  const exact = paths[pathname]?.[verb];
  if (exact !== undefined) return exact;
  const parts = pathname.split('/');
  for (const [template, item] of Object.entries(paths)) {
    const segments = template.split('/');
    const matches = segments.length === parts.length && segments.every((segment, i) => (segment.startsWith('{') && segment.endsWith('}') ? parts[i] !== '' : segment === parts[i]));
    if (matches && item[verb] !== undefined) return item[verb];
  }
  return undefined;
}

/**
 * Why `body`, the answer of `method path` with `status`, does not fit the document; undefined when
 * it fits or the document has no schema for that answer. No endpoint there at all is a mistake in
 * the test (a misspelt path, a mount prefix left in): it throws, rather than pass unchecked.
 */
export function answerMisfit(document: OpenApiDocument, method: string, pathname: string, status: number, body: unknown): string | undefined {
  const path = pathname.split('?')[0] as string;
  const operation = operationOf(document.paths ?? {}, method, path);
  if (operation === undefined) throw new Error(`no endpoint answers ${method.toUpperCase()} ${path} (the path as the router serves it, without its mount prefix: /api/plugin/<plugin>/...)`);
  const schema = operation.responses?.[String(status)]?.content?.['application/json']?.schema;
  if (schema === undefined || Object.keys(schema).length === 0) return undefined;
  let validate = compiled.get(schema);
  if (validate === undefined) {
    validate = getAjv().compile(schema);
    compiled.set(schema, validate);
  }
  if (validate(body)) return undefined;
  const error = (validate.errors as ErrorObject[])[0] as ErrorObject;
  const steps =
    error.instancePath === ''
      ? []
      : error.instancePath
          .slice(1)
          .split('/')
          .map((step) => step.replace(/~1/g, '/').replace(/~0/g, '~'));
  const where = steps.length === 0 ? 'the answer' : `the answer's ${steps.join('.')}`;
  const value = steps.reduce<unknown>((at, step) => (at !== null && typeof at === 'object' ? (at as Record<string, unknown>)[step] : undefined), body);
  const shown = JSON.stringify(value) ?? String(value);
  return `${method.toUpperCase()} ${pathname}: ${where} is ${shown.length > 80 ? `${shown.slice(0, 80)}...` : shown}, and its responseSchema says it ${error.message ?? 'does not fit'}`;
}

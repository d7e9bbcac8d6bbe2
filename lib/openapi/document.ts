import { DELIVERY_STATUSES, RUN_STATUSES } from '../events/listing';
import { EVENT_DELIVERIES_PATH, JOBS_PATH } from '../events/routes';
import type { BcmsFunction } from '../function/types';
import { errorCodes, type ErrorCode } from '../http/errors';
import type { PluginPath, PluginRoute, PluginRouteTable } from '../plugin/routes';
import { DATABASE_CHECK_MS, HEALTH_PATH } from '../extensions/health';
import { describeFunction, describeMethod, type JsonSchema, type OperationDescription } from './describe';

/**
 * The OpenAPI 3.1 document of what a router serves now: every plugin endpoint (the app's and the
 * deployed ones), every function, and the package's own routes under `/api/extensions/`, with
 * their security and the error answers of docs/http.md as components.
 */

export interface OpenApiSources {
  /** The live plugin endpoints (the app's and the deployed ones). */
  plugins: PluginRouteTable;
  functions: ReadonlyMap<string, BcmsFunction>;
  /** The package's own endpoints (`/api/extensions/...`). */
  ownRoutes: PluginRouteTable;
  title: string;
  version: string;
  /** The app's own (`openapi.info.description`), in place of the router's paragraph on error bodies. */
  description?: string;
  license?: { name: string; identifier?: string; url?: string };
  /** With the `rateLimit` option: function calls may be answered 429 RATE_LIMITED. */
  rateLimited?: boolean;
}

type Operation = Record<string, unknown>;
type PathItem = Record<string, Operation>;

const json = (schema: JsonSchema): JsonSchema => ({ 'application/json': { schema } });
const ref = (kind: 'schemas' | 'responses', name: string): JsonSchema => ({ $ref: `#/components/${kind}/${name}` });

/** One build's state: the operation ids given, and the schemas hoisted into the components. */
interface Build {
  uniqueId(id: string): string;
  /** A schema as the document holds it: one with `$defs` or `$ref`s has them moved into the components. */
  schema(schema: JsonSchema): JsonSchema;
  hoisted: Record<string, JsonSchema>;
}

function newBuild(): Build {
  const operationIds = new Set<string>();
  const hoisted: Record<string, JsonSchema> = {};
  let count = 0;
  return {
    hoisted,
    uniqueId(name) {
      // URL-safe, as tools that put it in a URL or a file name want it (a controller's name may hold spaces).
      const id = name.replace(/[^A-Za-z0-9_.~-]+/g, '_');
      let candidate = id;
      for (let n = 2; operationIds.has(candidate); n++) candidate = `${id}_${n}`;
      operationIds.add(candidate);
      return candidate;
    },
    schema(schema) {
      const text = JSON.stringify(schema);
      if (!text.includes('"$ref"') && !text.includes('"$defs"') && !text.includes('"definitions"')) return schema;
      // A converter's own references (`#/$defs/X`, `#` for a recursive schema) are relative to the
      // schema; in the document, `#` is the document: they move into the components, renamed.
      const prefix = `Schema${++count}`;
      const root = JSON.parse(text) as JsonSchema;
      const defs = { ...((root.$defs as Record<string, JsonSchema>) ?? {}), ...((root.definitions as Record<string, JsonSchema>) ?? {}) };
      delete root.$defs;
      delete root.definitions;
      const named = (key: string): string => `${prefix}_${key.replace(/[^A-Za-z0-9._-]/g, '_')}`;
      let recursive = false;
      const rewrite = (node: unknown): void => {
        if (node === null || typeof node !== 'object') return;
        if (Array.isArray(node)) {
          node.forEach(rewrite);
          return;
        }
        const object = node as JsonSchema;
        const target = object.$ref;
        if (typeof target === 'string') {
          if (target === '#') {
            recursive = true;
            object.$ref = `#/components/schemas/${prefix}`;
          } else if (target.startsWith('#/$defs/') || target.startsWith('#/definitions/')) {
            object.$ref = `#/components/schemas/${named(target.slice(target.indexOf('/', 2) + 1))}`;
          }
        }
        for (const value of Object.values(object)) rewrite(value);
      };
      rewrite(root);
      for (const [key, def] of Object.entries(defs)) {
        rewrite(def);
        hoisted[named(key)] = def;
      }
      if (!recursive) return root;
      hoisted[prefix] = root;
      return { $ref: `#/components/schemas/${prefix}` };
    },
  };
}

export function buildOpenApiDocument(sources: OpenApiSources): JsonSchema {
  const paths: Record<string, PathItem> = {};
  const build = newBuild();
  for (const [table, family] of [
    [sources.plugins, 'plugin'],
    [sources.ownRoutes, 'own'],
  ] as const) {
    for (const path of table.paths()) addPluginPath(paths, path, family, build);
  }
  for (const [name, definition] of [...sources.functions].sort(([a], [b]) => a.localeCompare(b))) {
    let operation: Operation;
    try {
      operation = functionOperation(name, definition, build, sources.rateLimited === true);
    } catch {
      operation = {
        operationId: build.uniqueId(`function.${name}`),
        tags: ['functions'],
        summary: `Calls the function "${name}".`,
        description: 'Its description could not be made.',
        responses: { '200': { description: 'Its result.' } },
      };
    }
    paths[`/api/function/${name}`] = { post: operation };
  }
  Object.assign(paths, deploymentPaths(build.uniqueId), eventListPaths(build.uniqueId), healthPaths(build.uniqueId));
  return {
    openapi: '3.1.0',
    info: {
      title: sources.title,
      version: sources.version,
      description:
        sources.description ??
        'Plugin endpoints, functions and the extension interface of this service (bcms-extensions). Plugin errors answer `{ "message" }`; functions and the `/api/extensions/` routes answer `{ "success": false, "error": { "code", "message" } }`.',
      ...(sources.license === undefined ? {} : { license: { ...sources.license } }),
    },
    // Where the paths are: the served document names the router's mount path here.
    servers: [{ url: '/' }],
    paths,
    components: components(build.hoisted),
  };
}

// ---------------------------------------------------------------------------------------------
// Plugin endpoints (and the package's own, which are plugin endpoints of its own)

function addPluginPath(paths: Record<string, PathItem>, path: PluginPath, family: 'plugin' | 'own', build: Build): void {
  // One template per path: a verb that names its parameters otherwise is listed under the first one's names.
  const names = path.pattern.split('/').flatMap((segment) => (segment.startsWith(':') ? [segment.slice(1)] : []));
  const template = path.pattern.replace(/\/:([^/]+)/g, '/{$1}');
  for (const [verb, route] of path.verbs) {
    let operation: Operation | undefined;
    try {
      const described = describeMethod(route.method);
      if (described.ignore === true) continue;
      operation = pluginOperation(route, described, names, family, build);
    } catch {
      // One method whose description cannot be made (a schema that throws) costs only its own entry.
      operation = {
        operationId: build.uniqueId(`plugin.${route.plugin}.${route.label}`),
        tags: [route.plugin],
        summary: route.label,
        description: 'Its description could not be made.',
        responses: { '200': { description: 'The answer.' } },
      };
    }
    paths[template] ??= {};
    paths[template][verb.toLowerCase()] = operation;
  }
}

function pluginOperation(route: PluginRoute, described: OperationDescription, names: string[], family: 'plugin' | 'own', build: Build): Operation {
  const operation: Operation = {
    // Prefixed by family: a plugin named "function" takes no function's id.
    operationId: build.uniqueId(family === 'own' ? `extensions.${route.label}` : `plugin.${route.plugin}.${route.label}`),
    tags: [family === 'own' ? 'extensions' : route.plugin],
    summary: described.summary ?? `${route.label}`,
  };
  const security = described.security;
  const notes = [described.description];
  if (security.type === 'jwt') {
    notes.push(
      `Requires a bearer token with a role of ${security.roles.join(', ')} holding ${security.permission}${security.keys ? ', or an HTTP Signature of an API key that lists this plugin' : ''}.`,
    );
    operation.security = security.keys ? [{ bearer: [] }, { httpSignature: [] }, { bcmsClient: [] }] : [{ bearer: [] }];
  } else if (security.type === 'none') {
    operation.security = [];
  } else {
    notes.push("Guarded by a pre-request handler of the plugin's own.");
    // What it asks for is its own: a bearer token, perhaps, or nothing.
    operation.security = [{ bearer: [] }, {}];
  }
  const description = notes.filter(Boolean).join('\n\n');
  if (description !== '') operation.description = description;
  const parameters = [
    ...names.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    ...(described.parameters ?? []).map((param) => ({
      name: param.name,
      in: param.in,
      required: param.required,
      schema: { type: 'string' },
      ...(param.description ? { description: param.description } : {}),
    })),
  ];
  if (parameters.length > 0) operation.parameters = parameters;
  if (described.requestBody !== undefined) {
    operation.requestBody =
      described.requestBody === 'file'
        ? { required: true, content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } }
        : { required: true, content: json(build.schema(described.requestBody)) };
  }
  // The plugin family's error answers ({ message }) are components; the package's own routes answer the envelope.
  const answer = (name: keyof typeof PLUGIN_ERRORS): JsonSchema => ref('responses', family === 'own' ? `Own${name}` : name);
  const responses: Record<string, unknown> = {
    '200':
      described.response === 'file'
        ? { description: 'A file.', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } }
        : { description: 'The answer, as JSON.', content: json(build.schema(described.response ?? {})) },
  };
  if (described.requestBody !== undefined) responses['400'] = answer('BadRequest');
  if (security.type !== 'none') {
    responses['401'] = answer('Unauthorized');
    responses['403'] = answer('Forbidden');
  }
  // A handler may refuse with a 4xx of its own (errorHandler.occurred): whatever the guard is.
  responses['4XX'] = answer('Refused');
  responses['500'] = answer('HandlerError');
  responses['503'] = answer('Unavailable');
  responses['504'] = answer('Timeout');
  operation.responses = responses;
  return operation;
}

// ---------------------------------------------------------------------------------------------
// Functions

function functionOperation(name: string, definition: BcmsFunction, build: Build, rateLimited: boolean): Operation {
  const described = describeFunction(definition);
  const status = (code: ErrorCode): string => String(errorCodes[code].status);
  const errors: ErrorCode[] = [
    'INVALID_JSON',
    'BODY_TOO_LARGE',
    'UNSUPPORTED_MEDIA_TYPE',
    'IDEMPOTENCY_KEY_REUSED',
    'IDEMPOTENCY_KEY_IN_USE',
    'HANDLER_ERROR',
    'DATABASE_UNAVAILABLE',
    'FUNCTION_TIMEOUT',
  ];
  if (described.requestBody !== undefined) errors.unshift('BODY_INVALID');
  if (rateLimited) errors.push('RATE_LIMITED');
  if (!described.public) errors.unshift('SIGNATURE_REQUIRED', 'KEY_FORBIDDEN');
  const responses: Record<string, unknown> = {
    '200': {
      description: 'What the function returned, as `result`.',
      content: json({ type: 'object', properties: { success: { const: true }, result: build.schema(described.response ?? {}) }, required: ['success', 'result'] }),
    },
  };
  // One answer a status: the first code of it, the others named in its description.
  for (const code of errors) {
    const key = status(code);
    if (responses[key] === undefined) responses[key] = ref('responses', code);
  }
  return {
    operationId: build.uniqueId(`function.${name}`),
    tags: ['functions'],
    summary: `Calls the function "${name}".`,
    description: described.public
      ? 'Public: anyone may call it.'
      : "Private: an HTTP Signature of an API key that lists the function, the BCMS client's signed query, or a bearer token whose role holds EXECUTE.",
    security: described.public ? [] : [{ httpSignature: [] }, { bcmsClient: [] }, { bearer: [] }],
    parameters: [
      {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: 'The same key, caller and body within 24 h get the first outcome again.',
        schema: { type: 'string', minLength: 1, maxLength: 255 },
      },
    ],
    // With a bodySchema the body is checked (an absent one is read as {}); without, any JSON or none.
    requestBody: { required: described.requestBody !== undefined, content: json(build.schema(described.requestBody ?? {})) },
    responses,
  };
}

// ---------------------------------------------------------------------------------------------
// Deployments (signed with a deploy key)

function deploymentPaths(uniqueId: (id: string) => string): Record<string, PathItem> {
  const signed = (summary: string, extra: Operation = {}): Operation => ({
    operationId: uniqueId(`extensions.deployments.${summary.replace(/\W+/g, '_').toLowerCase()}`),
    tags: ['extensions'],
    summary,
    description: 'Signed with a deploy key (HTTP Signature).',
    security: [{ httpSignature: [] }],
    ...extra,
    responses: { '200': { description: 'Done.', content: json({ type: 'object' }) }, '401': ref('responses', 'SIGNATURE_REQUIRED'), '403': ref('responses', 'KEY_FORBIDDEN') },
  });
  const kindAndName = [
    { name: 'kind', in: 'path', required: true, schema: { enum: ['plugin', 'function'] } },
    { name: 'name', in: 'path', required: true, schema: { type: 'string' } },
  ];
  return {
    '/api/extensions/deployments': {
      get: signed('List deployments'),
      post: signed('Deploy a bundle', { requestBody: { required: true, content: json({ type: 'object', description: 'What `bcms-ext bundle` writes: a manifest and the code (and UI files).' }) } }),
    },
    '/api/extensions/deployments/{kind}/{name}': { delete: signed('Undeploy', { parameters: kindAndName }) },
    '/api/extensions/deployments/{kind}/{name}/rollback': { post: signed('Roll back', { parameters: kindAndName }) },
  };
}

// ---------------------------------------------------------------------------------------------
// What events and jobs did (a deploy key or an ADMIN token; lib/events/routes.ts)

function eventListPaths(uniqueId: (id: string) => string): Record<string, PathItem> {
  const time = { type: 'string', format: 'date-time' };
  const timeOrNull = { type: ['string', 'null'], format: 'date-time' };
  const textOrNull = { type: ['string', 'null'] };
  const msOrNull = { type: ['integer', 'null'] };
  const object = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties) });
  const limit = { name: 'limit', in: 'query', description: 'Per handler or job: the most recent this many (default 20).', schema: { type: 'integer', minimum: 0, maximum: 200 } };
  const listed = (summary: string, description: string, parameters: unknown[], answer: JsonSchema): Operation => ({
    operationId: uniqueId(`extensions.${summary.replace(/\W+/g, '_').toLowerCase()}`),
    tags: ['extensions'],
    summary,
    description: `${description} For a request signed with a deploy key (HTTP Signature), or a token whose SUDO or ADMIN role holds READ.`,
    security: [{ bearer: [] }, { httpSignature: [] }],
    parameters,
    responses: {
      '200': { description: 'The list.', content: json(answer) },
      '400': ref('responses', 'BadRequest'),
      '401': ref('responses', 'Unauthorized'),
      '403': ref('responses', 'Forbidden'),
    },
  });
  const delivery = object({
    id: { type: 'string' },
    eventId: { type: 'string' },
    scope: { type: 'string' },
    method: { type: 'string' },
    doc: textOrNull,
    status: { enum: [...DELIVERY_STATUSES] },
    attempts: { type: 'integer' },
    createdAt: time,
    startedAt: timeOrNull,
    finishedAt: timeOrNull,
    durationMs: msOrNull,
    runAt: time,
    error: textOrNull,
  });
  const handler = object({
    name: { type: 'string' },
    scope: { type: 'string' },
    method: { type: 'string' },
    source: { enum: ['registry', 'deployed'] },
    active: { type: 'boolean' },
    seenAt: time,
    counts: object(Object.fromEntries(DELIVERY_STATUSES.map((status) => [status, { type: 'integer' }]))),
    deliveries: { type: 'array', items: delivery },
  });
  const run = object({
    id: { type: 'string' },
    tickAt: time,
    status: { enum: [...RUN_STATUSES] },
    instance: textOrNull,
    startedAt: time,
    finishedAt: timeOrNull,
    durationMs: msOrNull,
    error: textOrNull,
  });
  const job = object({
    name: { type: 'string' },
    cron: { type: 'string' },
    source: { enum: ['registry', 'deployed'] },
    active: { type: 'boolean' },
    seenAt: time,
    nextTickAt: timeOrNull,
    runs: { type: 'array', items: run },
  });
  return {
    [EVENT_DELIVERIES_PATH]: {
      get: listed(
        'List event deliveries',
        "Each event handler with its deliveries' counts by status and its most recent deliveries.",
        [
          limit,
          { name: 'handler', in: 'query', description: 'Only this handler.', schema: { type: 'string' } },
          { name: 'status', in: 'query', description: 'Only deliveries of this status (the counts stay whole).', schema: { enum: [...DELIVERY_STATUSES] } },
        ],
        object({ handlers: { type: 'array', items: handler } }),
      ),
    },
    [JOBS_PATH]: {
      get: listed(
        'List jobs',
        'Each job with its next tick and its most recent runs.',
        [limit, { name: 'job', in: 'query', description: 'Only this job.', schema: { type: 'string' } }],
        object({ jobs: { type: 'array', items: job } }),
      ),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Health (lib/extensions/health.ts): its 503 answers the same body as its 200, not an error's

function healthPaths(uniqueId: (id: string) => string): Record<string, PathItem> {
  return {
    [HEALTH_PATH]: {
      get: {
        operationId: uniqueId('extensions.health'),
        tags: ['extensions'],
        summary: 'Health of this instance',
        description: `For load balancers and orchestrators; no credentials. 503 while the router's start is under way, when the database does not answer \`select 1\` within ${DATABASE_CHECK_MS} ms, or when the start failed. Extensions that fail in their isolates are counted, never a 503.`,
        security: [],
        responses: {
          '200': { description: 'Up: the database answers.', content: json(ref('schemas', 'Health')) },
          '503': { description: 'Starting, or down: what is down is in the body.', content: json(ref('schemas', 'Health')) },
        },
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Components

/** The error answers of plugin endpoints (and, as `Own...`, of the package's own). */
const PLUGIN_ERRORS = {
  BadRequest: 'The body is not valid JSON, or does not fit its schema (the message names the field).',
  Unauthorized: 'No token, or a token that is not valid (expired, badly signed).',
  Forbidden: "The token's roles do not allow this.",
  Refused: 'The handler refused the request, with a 4xx status of its own and its message.',
  HandlerError: 'The handler failed; nothing of its error is answered.',
  Unavailable: 'The database is unavailable, or went away after a write was sent.',
  Timeout: 'The handler ran past its time-out.',
} as const;

function components(hoisted: Record<string, JsonSchema>): JsonSchema {
  const responses: Record<string, unknown> = {};
  for (const [name, description] of Object.entries(PLUGIN_ERRORS)) {
    responses[name] = { description, content: json(ref('schemas', 'Message')) };
    responses[`Own${name}`] = { description, content: json(ref('schemas', 'ErrorEnvelope')) };
  }
  for (const [code, { status, message }] of Object.entries(errorCodes)) {
    responses[code] = {
      description: `${status} ${code}: ${message}`,
      content: { 'application/json': { schema: ref('schemas', 'ErrorEnvelope'), example: { success: false, error: { code, message } } } },
    };
  }
  return {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: "The host's JWT (the admin shell's sign-in gives one); roles and permissions in its `rls` claim." },
      httpSignature: {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description:
          'An HTTP Signature (draft-cavage) of an API key, over `(request-target) date digest`: `Authorization: Signature keyId="...",algorithm="hmac-sha256",headers="(request-target) date digest",signature="..."`.',
      },
      bcmsClient: { type: 'apiKey', in: 'query', name: 'signature', description: "The BCMS client's signed query (`key`, `nonce`, `timestamp`, `signature`), for keys made with `bcmsClient: true`." },
    },
    schemas: {
      ...hoisted,
      Message: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
      Health: {
        type: 'object',
        properties: {
          status: { enum: ['ok', 'starting', 'down'] },
          database: { enum: ['ok', 'down'] },
          isolates: {
            type: 'object',
            description: 'Extensions of this instance in isolates, by state.',
            properties: { running: { type: 'integer' }, failing: { type: 'integer' }, failed: { type: 'integer' } },
            required: ['running', 'failing', 'failed'],
          },
        },
        required: ['status', 'database', 'isolates'],
      },
      ErrorEnvelope: {
        type: 'object',
        properties: {
          success: { const: false },
          error: { type: 'object', properties: { code: { enum: Object.keys(errorCodes) }, message: { type: 'string' } }, required: ['code', 'message'] },
        },
        required: ['success', 'error'],
      },
    },
    responses,
  };
}

import fs from 'node:fs';
import path from 'node:path';
import { openDatabase, type DatabaseOption } from '../db/connection';
import { isUnreachable } from '../db/store';
import { fetchFailure } from '../http/fetch-failure';
import type { SignatureAlgorithm } from '../security/algorithms';
import { blockApiKey, checkNewApiKey, createApiKey, deleteApiKey, listApiKeys, type ApiKey, type CreatedApiKey, type NewApiKey } from '../security/api-keys';
import { resolveSecretsKeys, type SecretsKeys } from '../security/secrets';
import { parseArgs, UsageError, type Io } from './_io';
import { readDotEnv } from './deploy';

export const KEYS_USAGE = `  keys create --name NAME [--functions a,b] [--plugins a,b] [--deploy] [--bcms-client]
              [--algorithm rsa-sha256|ed25519 --public-key FILE] [--env | --env-file FILE]
                                            Create an API key. An hmac-sha256 key (the default) gets
                                            a secret, shown this once. --env prints only
                                            export lines, for eval "$(bcms-ext keys create ... --env)".
                                            --env-file FILE writes BCMS_KEY_ID and BCMS_KEY_SECRET
                                            into FILE (a project's .env), in place of theirs there.
                                            --plugins: the plugins whose routes guarded by
                                            createJwtApiPreRequestHandler the key may call.
                                            --bcms-client: the key also accepts the BCMS client's
                                            signed calls (@becomes/cms-client; hmac-sha256 only).
  keys list                                 List keys (never their secrets).
  keys block ID                             Refuse the key's calls from now on (403 KEY_FORBIDDEN).
  keys delete ID                            Delete the key.
      keys commands reach the database through --database URL, --pglite DIR or DATABASE_URL;
      otherwise the running service at --url or BCMS_URL (default http://localhost:8080), with
      --token or BCMS_TOKEN: a JWT whose SUDO or ADMIN role holds READ, WRITE or DELETE.
      Variables come from the environment, then from a .env file in the current folder.
      --json prints what the command returns as JSON.
`;

/** Where the keys are: the database itself, or the service that holds it (embedded PGlite). */
interface KeyStore {
  readonly description: string;
  create(input: NewApiKey): Promise<CreatedApiKey>;
  list(): Promise<ApiKey[]>;
  block(id: string): Promise<boolean>;
  remove(id: string): Promise<boolean>;
  close(): Promise<void>;
}

const TARGET_FLAGS = { database: 'string', pglite: 'string', url: 'string', token: 'string', json: 'boolean' } as const;
const CREATE_FLAGS = { ...TARGET_FLAGS, name: 'string', functions: 'string', plugins: 'string', algorithm: 'string', 'public-key': 'string', deploy: 'boolean', 'bcms-client': 'boolean', env: 'boolean', 'env-file': 'string' } as const;

export async function runKeys(args: readonly string[], io: Io): Promise<number> {
  const [action, ...rest] = args;
  if (action !== 'create' && action !== 'list' && action !== 'block' && action !== 'delete') {
    throw new UsageError(`expected create, list, block or delete, got ${JSON.stringify(action ?? '')}\n\nUsage:\n${KEYS_USAGE}`);
  }
  const { positionals, flags } = parseArgs(rest, action === 'create' ? CREATE_FLAGS : TARGET_FLAGS);
  const wantsId = action === 'block' || action === 'delete';
  if (positionals.length !== (wantsId ? 1 : 0)) {
    throw new UsageError(wantsId ? `keys ${action} takes one key id (see bcms-ext keys list)` : `keys ${action} takes no argument ${JSON.stringify(positionals[0])}`);
  }
  const input = action === 'create' ? newKeyFrom(flags) : undefined;
  const cwd = io.cwd ?? process.cwd();
  if (flags.env !== undefined && flags['env-file'] !== undefined) throw new UsageError('choose one of --env and --env-file');
  // The environment wins over the project's .env (its BCMS_URL, say), as for deploy.
  const store = openKeyStore(flags, { ...readDotEnv(cwd), ...io.env });
  try {
    switch (action) {
      case 'create': {
        const created = await store.create(input as NewApiKey);
        if (typeof flags['env-file'] === 'string') {
          const file = path.resolve(cwd, flags['env-file']);
          writeEnvFile(file, { BCMS_KEY_ID: created.id, ...(created.secret === undefined ? {} : { BCMS_KEY_SECRET: created.secret }) });
          io.out(`Created API key ${created.id}; wrote BCMS_KEY_ID${created.secret === undefined ? '' : ' and BCMS_KEY_SECRET'} to ${flags['env-file']}.\n`);
        } else if (flags.json) io.out(`${JSON.stringify(created)}\n`);
        else if (flags.env) io.out(exportLines(created));
        else io.out(describeCreated(created, input as NewApiKey));
        if (input?.functions.length === 0 && (input.plugins ?? []).length === 0 && !input.deploy) {
          io.err('Note: this key lists no function or plugin and may not deploy, so it can call nothing (--functions a,b, --plugins a,b).\n');
        }
        return 0;
      }
      case 'list': {
        const keys = await store.list();
        io.out(flags.json ? `${JSON.stringify(keys, null, 2)}\n` : describeKeys(keys));
        return 0;
      }
      default: {
        const id = positionals[0] as string;
        const done = action === 'block' ? await store.block(id) : await store.remove(id);
        if (!done) {
          io.err(`bcms-ext keys ${action}: no API key has the id "${id}" in ${store.description} (see bcms-ext keys list).\n`);
          return 1;
        }
        if (flags.json) io.out(`${JSON.stringify(action === 'block' ? { id, blocked: true } : { id, deleted: true })}\n`);
        else io.out(`${action === 'block' ? 'Blocked' : 'Deleted'} API key ${id}.\n`);
        return 0;
      }
    }
  } finally {
    await store.close();
  }
}

function newKeyFrom(flags: Record<string, string | true | undefined>): NewApiKey {
  if (typeof flags.name !== 'string') throw new UsageError('keys create needs --name NAME');
  const functions = namesOf(flags.functions);
  const input: NewApiKey = { name: flags.name, functions, deploy: flags.deploy === true };
  if (flags.plugins !== undefined) input.plugins = namesOf(flags.plugins);
  if (flags['bcms-client'] === true) input.bcmsClient = true;
  if (typeof flags.algorithm === 'string') input.algorithm = flags.algorithm as SignatureAlgorithm;
  if (typeof flags['public-key'] === 'string') {
    try {
      input.publicKey = fs.readFileSync(flags['public-key'], 'utf8');
    } catch (error) {
      throw new UsageError(`cannot read --public-key ${flags['public-key']}: ${(error as Error).message}`);
    }
  }
  try {
    checkNewApiKey(input);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return input;
}

/** A comma-separated flag (`--functions a,b`) as names; spaces around them and empty ones dropped. */
function namesOf(flag: string | true | undefined): string[] {
  return typeof flag === 'string' ? flag.split(',').map((name) => name.trim()).filter(Boolean) : [];
}

/** For `eval`: nothing to run when the command fails, unlike `export $(...)`, which then lists every variable. */
/**
 * Sets `values` in a .env file: each one's line replaced where the file has it (the first; later
 * ones of the same name go), else added at the end. Other lines stay as they are.
 */
function writeEnvFile(file: string, values: Record<string, string>): void {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const lines = text === '' ? [] : text.replace(/\r?\n$/, '').split(/\r?\n/);
  const quoted = (value: string): string => (/^[\w+/=.:@-]*$/.test(value) ? value : `'${value}'`);
  for (const [name, value] of Object.entries(values)) {
    const ours = (line: string): boolean => new RegExp(`^\\s*(?:export\\s+)?${name}\\s*=`).test(line);
    const at = lines.findIndex(ours);
    const line = `${name}=${quoted(value)}`;
    if (at === -1) lines.push(line);
    else {
      lines[at] = line;
      for (let i = lines.length - 1; i > at; i--) if (ours(lines[i] as string)) lines.splice(i, 1);
    }
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o600 });
}

function exportLines(created: CreatedApiKey): string {
  const lines = [`export BCMS_KEY_ID='${created.id}'`];
  if (created.secret !== undefined) lines.push(`export BCMS_KEY_SECRET='${created.secret}'`);
  return `${lines.join('\n')}\n`;
}

function describeCreated(created: CreatedApiKey, input: NewApiKey): string {
  const lines = [
    `Created API key ${created.id} (${input.name}, ${input.algorithm ?? 'hmac-sha256'}; functions: ${input.functions.join(', ') || 'none'}` +
      `${input.plugins?.length ? `; plugins: ${input.plugins.join(', ')}` : ''}` +
      `${input.deploy ? '; may deploy' : ''}${input.bcmsClient ? '; accepts the BCMS client' : ''}).`,
  ];
  if (created.secret !== undefined) {
    lines.push('Its secret is shown this once: keep it now (the service cannot show it again).', '', `BCMS_KEY_ID=${created.id}`, `BCMS_KEY_SECRET=${created.secret}`);
  } else {
    lines.push('', `BCMS_KEY_ID=${created.id}`, 'Sign with the private key that belongs to the public key given.');
  }
  return `${lines.join('\n')}\n`;
}

function describeKeys(keys: ApiKey[]): string {
  if (keys.length === 0) return 'No API keys. Create one with: bcms-ext keys create --name NAME --functions FUNCTION\n';
  const rows = keys.map((key) => [
    key.id,
    key.name,
    key.algorithm,
    key.blocked ? 'blocked' : 'active',
    key.functions.join(',') || '-',
    (key.plugins ?? []).join(',') || '-', // a service older than the plugins field lists none
    key.deploy ? 'yes' : 'no',
    key.bcmsClient ? 'yes' : 'no',
    new Date(key.createdAt).toISOString(),
  ]);
  const table = [['ID', 'NAME', 'ALGORITHM', 'STATE', 'FUNCTIONS', 'PLUGINS', 'DEPLOY', 'BCMS-CLIENT', 'CREATED'], ...rows];
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => (row[column] as string).length)));
  return `${table.map((row) => row.map((cell, column) => cell.padEnd(widths[column] as number)).join('  ').trimEnd()).join('\n')}\n`;
}

/** BCMS_SECRETS_KEY, parsed; a mistake in it is a usage error that says what to give. */
function secretsFrom(env: NodeJS.ProcessEnv): SecretsKeys | undefined {
  try {
    return resolveSecretsKeys(undefined, env);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function openKeyStore(flags: Record<string, string | true | undefined>, env: NodeJS.ProcessEnv): KeyStore {
  const chosen = ['database', 'pglite', 'url'].filter((name) => flags[name] !== undefined);
  if (chosen.length > 1) throw new UsageError(`choose one of --database, --pglite and --url, not ${chosen.map((name) => `--${name}`).join(' and ')}`);
  if (typeof flags.url === 'string') return serviceKeyStore(flags.url, flags, env);
  let option: DatabaseOption | undefined;
  if (typeof flags.database === 'string') option = flags.database;
  else if (typeof flags.pglite === 'string') option = { pglite: flags.pglite };
  else if (env.DATABASE_URL) option = env.DATABASE_URL;
  else return serviceKeyStore(env.BCMS_URL || 'http://localhost:8080', flags, env);
  const quiet = { info() {}, debug() {}, warn() {}, error() {} };
  let database: ReturnType<typeof openDatabase>;
  try {
    database = openDatabase(option, env, quiet);
  } catch (error) {
    // A data directory another process holds, a URL that is not one: the reason, not a stack trace.
    throw new UsageError((error as Error).message);
  }
  const guard = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (isUnreachable(error)) throw new UsageError(`cannot reach ${database.description}: ${(error as Error).message}. Check that the database is running and reachable.`);
      throw error;
    }
  };
  return {
    description: database.description,
    // BCMS_SECRETS_KEY from the environment or .env: a key made here is sealed as the service seals them.
    create: (input) => guard(() => createApiKey(database.knex, input, { secrets: secretsFrom(env) })),
    list: () => guard(() => listApiKeys(database.knex)),
    block: (id) => guard(() => blockApiKey(database.knex, id)),
    remove: (id) => guard(() => deleteApiKey(database.knex, id)),
    close: () => database.close(),
  };
}

/** The service's `/api/extensions/keys`, for a database only the running service may open. */
function serviceKeyStore(baseUrl: string, flags: Record<string, string | true | undefined>, env: NodeJS.ProcessEnv): KeyStore {
  const token = typeof flags.token === 'string' ? flags.token : env.BCMS_TOKEN;
  if (!token) {
    throw new UsageError(
      `no DATABASE_URL, so the keys are managed through the service at ${baseUrl}, which needs a token: set BCMS_TOKEN (or --token) ` +
        'to a JWT whose SUDO or ADMIN role holds READ/WRITE/DELETE (in the example app: POST /api/auth/login). ' +
        'Or reach the database directly with DATABASE_URL or --database URL.',
    );
  }
  let base: string;
  try {
    base = `${new URL(baseUrl).toString().replace(/\/+$/, '')}/api/extensions/keys`;
  } catch {
    throw new UsageError(`${JSON.stringify(baseUrl)} is not a URL (--url or BCMS_URL, such as http://localhost:8080)`);
  }
  async function send(method: string, path: string, body?: unknown): Promise<{ status: number; answer: unknown }> {
    let response: Response;
    try {
      response = await fetch(base + path, {
        method,
        headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      throw new UsageError(
        `cannot reach the service at ${baseUrl} (${fetchFailure(error)}). Start it, or set BCMS_URL to where it listens; or reach the database ` +
          'directly with DATABASE_URL (or --pglite DIR, while no service holds that directory).',
      );
    }
    const text = await response.text();
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      answer = undefined;
    }
    const message = (answer as { message?: unknown } | undefined)?.message;
    if (response.status === 401 || response.status === 403) {
      throw new UsageError(`the service refused the token (${response.status}: ${String(message)}). BCMS_TOKEN must be a valid JWT whose SUDO or ADMIN role holds the permission.`);
    }
    if (response.status === 404 && (answer === undefined || typeof message !== 'string' || !/API key/.test(message))) {
      throw new UsageError(`${base} is not there (404): is bcms-extensions mounted at ${baseUrl}?`);
    }
    if (response.status >= 400 && response.status !== 404) throw new UsageError(`the service answered ${response.status}: ${typeof message === 'string' ? message : text.slice(0, 200)}`);
    return { status: response.status, answer };
  }
  return {
    description: `the service at ${baseUrl}`,
    create: async (input) => (await send('POST', '', input)).answer as CreatedApiKey,
    list: async () => ((await send('GET', '')).answer as { keys: ApiKey[] }).keys,
    block: async (id) => (await send('POST', `/${encodeURIComponent(id)}/block`)).status === 200,
    remove: async (id) => (await send('DELETE', `/${encodeURIComponent(id)}`)).status === 200,
    close: async () => {},
  };
}

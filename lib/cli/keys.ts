import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { openDatabase, type DatabaseOption } from '../db/connection';
import { isUnreachable } from '../db/store';
import { fetchFailure } from '../http/fetch-failure';
import type { SignatureAlgorithm } from '../security/algorithms';
import { blockApiKey, checkNewApiKey, createApiKey, deleteApiKey, expiryOf, listApiKeys, type ApiKey, type CreatedApiKey, type NewApiKey } from '../security/api-keys';
import { resolveSecretsKeys, type SecretsKeys } from '../security/secrets';
import { parseArgs, UsageError, type Io } from './_io';
import { readDotEnv } from './dotenv';

export const KEYS_USAGE = `  keys create --name NAME [--functions a,b] [--plugins a,b] [--deploy] [--bcms-client]
              [--algorithm hmac-sha256|rsa-sha256|ed25519] [--public-key FILE]
              [--private-key-file FILE] [--expires 90d|12h|30m|DATE] [--env | --env-file FILE]
                                            Create an API key. An hmac-sha256 key (the default) gets
                                            a secret, shown this once. --deploy makes an ed25519
                                            key pair by default: the private key is written to
                                            --private-key-file (default ./bcms-deploy-key.pem,
                                            mode 0600, never overwritten), the service keeps only
                                            the public key (--algorithm hmac-sha256: a secret).
                                            --expires: its signatures are refused after that
                                            (401 KEY_EXPIRED). --env prints only export lines, for
                                            eval "$(bcms-ext keys create ... --env)".
                                            --env-file FILE writes BCMS_KEY_ID and BCMS_KEY_SECRET
                                            (or BCMS_PRIVATE_KEY_FILE) into FILE (a project's
                                            .env), in place of theirs there.
                                            --plugins: the plugins whose routes guarded by
                                            createJwtApiPreRequestHandler the key may call.
                                            --bcms-client: the key also accepts the BCMS client's
                                            signed calls (@becomes/cms-client; hmac-sha256 only).
  keys list                                 List keys (never their secrets).
  keys block ID                             Refuse the key's calls from now on (403 KEY_FORBIDDEN).
  keys delete ID                            Delete the key.
      keys commands reach the database through --database URL, --pglite DIR or DATABASE_URL;
      otherwise the running service at --url or BCMS_URL (default http://localhost:8080), with
      --token or BCMS_TOKEN: a JWT whose SUDO or ADMIN role holds READ, WRITE or DELETE (a
      deploy key: SUDO with WRITE, on a service with keys: { deployOverHttp: true }).
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
const CREATE_FLAGS = {
  ...TARGET_FLAGS,
  name: 'string',
  functions: 'string',
  plugins: 'string',
  algorithm: 'string',
  'public-key': 'string',
  deploy: 'boolean',
  'bcms-client': 'boolean',
  env: 'boolean',
  'env-file': 'string',
  'private-key-file': 'string',
  expires: 'string',
} as const;

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
  const cwd = io.cwd ?? process.cwd();
  const made = action === 'create' ? newKeyFrom(flags, cwd) : undefined;
  const input = made?.input;
  if (flags.env !== undefined && flags['env-file'] !== undefined) throw new UsageError('choose one of --env and --env-file');
  // The environment wins over the project's .env (its BCMS_URL, say), as for deploy.
  const store = openKeyStore(flags, { ...readDotEnv(cwd), ...io.env });
  try {
    switch (action) {
      case 'create': {
        const pair = made?.pair;
        // The private key is on disk before the key exists: a key whose private key was lost is never made.
        if (pair !== undefined) writePrivateKey(pair.file, pair.privateKey);
        let created: CreatedApiKey;
        try {
          created = await store.create(input as NewApiKey);
        } catch (error) {
          if (pair !== undefined) fs.rmSync(pair.file, { force: true });
          throw error;
        }
        if (typeof flags['env-file'] === 'string') {
          const file = path.resolve(cwd, flags['env-file']);
          const signing: Record<string, string> =
            pair !== undefined ? { BCMS_PRIVATE_KEY_FILE: envPath(pair.file, path.dirname(file)) } : created.secret !== undefined ? { BCMS_KEY_SECRET: created.secret } : {};
          writeEnvFile(file, { BCMS_KEY_ID: created.id, ...signing });
          const where = pair === undefined ? '' : `its private key to ${path.relative(cwd, pair.file) || pair.file} (mode 0600: the service has only the public key) and `;
          io.out(`Created API key ${created.id}; wrote ${where}${['BCMS_KEY_ID', ...Object.keys(signing)].join(' and ')} to ${flags['env-file']}.\n`);
        } else if (flags.json) io.out(`${JSON.stringify(pair === undefined ? created : { ...created, privateKeyFile: pair.file })}\n`);
        else if (flags.env) io.out(exportLines(created, pair?.file));
        else io.out(describeCreated(created, input as NewApiKey, pair?.file));
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

/** Where `keys create --deploy` writes the private key of the pair it makes, unless told. */
export const DEFAULT_PRIVATE_KEY_FILE = 'bcms-deploy-key.pem';

/**
 * The key `keys create` asks for, and the key pair it made: a deploy key is `ed25519` unless
 * `--algorithm` says otherwise, and a public-key deploy key without `--public-key` gets a pair
 * made here, whose private key is for `pair.file` (checked free now, written by the caller).
 */
function newKeyFrom(flags: Record<string, string | true | undefined>, cwd: string): { input: NewApiKey; pair?: { file: string; privateKey: string } } {
  if (typeof flags.name !== 'string') throw new UsageError('keys create needs --name NAME');
  const functions = namesOf(flags.functions);
  const deploy = flags.deploy === true;
  const input: NewApiKey = { name: flags.name, functions, deploy };
  if (flags.plugins !== undefined) input.plugins = namesOf(flags.plugins);
  if (flags['bcms-client'] === true) input.bcmsClient = true;
  if (typeof flags.algorithm === 'string') input.algorithm = flags.algorithm as SignatureAlgorithm;
  else if (deploy) input.algorithm = 'ed25519'; // nothing secret in the service's rows: a database read cannot deploy
  if (typeof flags.expires === 'string') input.expiresAt = parseExpires(flags.expires).toISOString();
  let pair: { file: string; privateKey: string } | undefined;
  if (typeof flags['public-key'] === 'string') {
    try {
      input.publicKey = fs.readFileSync(flags['public-key'], 'utf8');
    } catch (error) {
      throw new UsageError(`cannot read --public-key ${flags['public-key']}: ${(error as Error).message}`);
    }
  } else if (deploy && (input.algorithm === 'ed25519' || input.algorithm === 'rsa-sha256')) {
    const file = path.resolve(cwd, typeof flags['private-key-file'] === 'string' ? flags['private-key-file'] : DEFAULT_PRIVATE_KEY_FILE);
    if (fs.existsSync(file)) {
      throw new UsageError(`${file} exists: it is not overwritten (it may be the private key of another key). Give another file with --private-key-file FILE, or move that one.`);
    }
    const made = input.algorithm === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('rsa', { modulusLength: 3072 });
    input.publicKey = made.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    pair = { file, privateKey: made.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
  }
  if (pair === undefined && flags['private-key-file'] !== undefined) {
    throw new UsageError('--private-key-file is where keys create writes the private key of a deploy key pair it makes (--deploy, without --public-key or --algorithm hmac-sha256)');
  }
  try {
    checkNewApiKey(input);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return pair === undefined ? { input } : { input, pair };
}

const DURATION = /^(\d{1,7})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `--expires`: a duration from now (`90d`, `12h`, `30m`: days, hours, minutes) or an ISO 8601
 * date (`2027-01-31`, midnight UTC) or date-time with its offset (`2027-01-31T12:00:00Z`).
 * Throws a UsageError that says what to give.
 *
 * @example
 * parseExpires('90d'); // 90 days from now
 */
export function parseExpires(text: string, now = Date.now()): Date {
  const duration = DURATION.exec(text.trim());
  if (duration !== null) {
    const count = Number(duration[1]);
    if (count === 0) throw new UsageError(`--expires ${text}: a key must live a while; give 1${duration[2] as string} or more`);
    return new Date(now + count * UNIT_MS[duration[2] as keyof typeof UNIT_MS]);
  }
  if (!/^\d{4}-/.test(text)) {
    throw new UsageError(`--expires takes a duration (90d, 12h, 30m: days, hours, minutes) or an ISO date (2027-01-31, or 2027-01-31T12:00:00Z), got ${JSON.stringify(text)}`);
  }
  try {
    return expiryOf(text, now);
  } catch (error) {
    throw new UsageError(`--expires: ${(error as Error).message.replace(/^API key expiresAt /, '')}`);
  }
}

/** Writes a private key for its owner only (0600), never over an existing file. */
function writePrivateKey(file: string, pem: string): void {
  try {
    fs.writeFileSync(file, pem, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      code === 'EEXIST'
        ? `${file} exists: it is not overwritten (it may be the private key of another key). Give another file with --private-key-file FILE, or move that one.`
        : `cannot write the private key to ${file}: ${(error as Error).message}`,
    );
  }
}

/** The private key file as a .env in `dir` names it: relative to that folder when inside it, else absolute. */
function envPath(file: string, dir: string): string {
  const relative = path.relative(dir, file);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

/** A comma-separated flag (`--functions a,b`) as names; spaces around them and empty ones dropped. */
function namesOf(flag: string | true | undefined): string[] {
  return typeof flag === 'string'
    ? flag
        .split(',')
        .map((name) => name.trim())
        .filter(Boolean)
    : [];
}

/** The one of these two a key signs with takes the other's line: a .env never names both. */
const SIGNS_WITH_INSTEAD: Readonly<Record<string, string>> = { BCMS_KEY_SECRET: 'BCMS_PRIVATE_KEY_FILE', BCMS_PRIVATE_KEY_FILE: 'BCMS_KEY_SECRET' };

/**
 * Sets `values` in a .env file: each one's line replaced where the file has it (the first; later
 * ones of the same name go), else the line of the variable it stands in for (BCMS_KEY_SECRET and
 * BCMS_PRIVATE_KEY_FILE, whose other lines go), else added at the end. Other lines stay as they are.
 */
function writeEnvFile(file: string, values: Record<string, string>): void {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const lines = text === '' ? [] : text.replace(/\r?\n$/, '').split(/\r?\n/);
  const quoted = (value: string): string => (/^[\w+/=.:@-]*$/.test(value) ? value : `'${value}'`);
  const named =
    (name: string) =>
    (line: string): boolean =>
      new RegExp(`^\\s*(?:export\\s+)?${name}\\s*=`).test(line);
  for (const [name, value] of Object.entries(values)) {
    const instead = SIGNS_WITH_INSTEAD[name];
    const ours = (line: string): boolean => named(name)(line) || (instead !== undefined && named(instead)(line));
    const at = lines.findIndex(named(name)) === -1 ? lines.findIndex(ours) : lines.findIndex(named(name));
    const line = `${name}=${quoted(value)}`;
    if (at === -1) lines.push(line);
    else {
      lines[at] = line;
      for (let i = lines.length - 1; i >= 0; i--) if (i !== at && ours(lines[i] as string)) lines.splice(i, 1);
    }
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o600 });
}

/** For `eval`: nothing to run when the command fails, unlike `export $(...)`, which then lists every variable. */
function exportLines(created: CreatedApiKey, privateKeyFile?: string): string {
  const lines = [`export BCMS_KEY_ID='${created.id}'`];
  if (created.secret !== undefined) lines.push(`export BCMS_KEY_SECRET='${created.secret}'`);
  if (privateKeyFile !== undefined) lines.push(`export BCMS_PRIVATE_KEY_FILE='${privateKeyFile.replaceAll("'", "'\\''")}'`);
  return `${lines.join('\n')}\n`;
}

function describeCreated(created: CreatedApiKey, input: NewApiKey, privateKeyFile?: string): string {
  const expires = input.expiresAt === undefined ? '' : `; expires ${new Date(input.expiresAt).toISOString()}`;
  const lines = [
    `Created API key ${created.id} (${input.name}, ${input.algorithm ?? 'hmac-sha256'}; functions: ${input.functions.join(', ') || 'none'}` +
      `${input.plugins?.length ? `; plugins: ${input.plugins.join(', ')}` : ''}` +
      `${input.deploy ? '; may deploy' : ''}${input.bcmsClient ? '; accepts the BCMS client' : ''}${expires}).`,
  ];
  if (created.secret !== undefined) {
    lines.push('Its secret is shown this once: keep it now (the service cannot show it again).', '', `BCMS_KEY_ID=${created.id}`, `BCMS_KEY_SECRET=${created.secret}`);
  } else if (privateKeyFile !== undefined) {
    lines.push(
      `Its private key is in ${privateKeyFile} (mode 0600); the service keeps only the public key. Keep that file as you would a password, out of version control.`,
      '',
      `BCMS_KEY_ID=${created.id}`,
      `BCMS_PRIVATE_KEY_FILE=${privateKeyFile}`,
    );
  } else {
    lines.push('', `BCMS_KEY_ID=${created.id}`, 'Sign with the private key that belongs to the public key given.');
  }
  return `${lines.join('\n')}\n`;
}

function describeKeys(keys: ApiKey[], now = Date.now()): string {
  if (keys.length === 0) return 'No API keys. Create one with: bcms-ext keys create --name NAME --functions FUNCTION\n';
  const rows = keys.map((key) => [
    key.id,
    key.name,
    key.algorithm,
    key.blocked ? 'blocked' : key.expiresAt != null && key.expiresAt <= now ? 'expired' : 'active',
    key.functions.join(',') || '-',
    (key.plugins ?? []).join(',') || '-', // a service older than the plugins field lists none
    key.deploy ? 'yes' : 'no',
    key.bcmsClient ? 'yes' : 'no',
    new Date(key.createdAt).toISOString(),
    key.expiresAt == null ? '-' : new Date(key.expiresAt).toISOString(), // a service older than expiry lists none
  ]);
  const heading = ['ID', 'NAME', 'ALGORITHM', 'STATE', 'FUNCTIONS', 'PLUGINS', 'DEPLOY', 'BCMS-CLIENT', 'CREATED', 'EXPIRES'];
  const table = [heading, ...rows];
  const widths = heading.map((_, column) => Math.max(...table.map((row) => (row[column] as string).length)));
  return `${table
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] as number))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
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
  // else DATABASE_URL, which openDatabase reads (and names, if it is not a Postgres URL)
  else if (!env.DATABASE_URL) return serviceKeyStore(env.BCMS_URL || 'http://localhost:8080', flags, env);
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
    if (response.status === 403 && (body as Partial<NewApiKey> | undefined)?.deploy === true && typeof message === 'string' && !message.startsWith('Token is not authorized')) {
      throw new UsageError(`the service refused to create a deploy key (403): ${message}`);
    }
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

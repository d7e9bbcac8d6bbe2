import { openDatabase, type Database, type DatabaseOption } from '../db/connection';
import { migrate, MIGRATIONS_TABLE, unlockMigrations } from '../db/migrate';
import { isUnreachable } from '../db/store';
import { ownManifest } from '../manifest';
import { resolveSecretsKeys, sealStoredSecrets, type SecretsKeys } from '../security/secrets';
import { defaultIo, parseArgs, UsageError, type Io } from './_io';
import { CALL_USAGE, runCall } from './call';
import { BUNDLE_USAGE, runBundle } from './bundle';
import { CREATE_USAGE, runCreate } from './create';
import { DB_USAGE, runDb } from './db';
import { DEPLOY_USAGE, runDeploy, runList, runRollback, runUndeploy } from './deploy';
import { readDotEnv } from './dotenv';
import { DEV_USAGE, runDev } from './dev';
import { EVENTS_USAGE, runEvents, runJobs } from './events';
import { KEYS_USAGE, runKeys } from './keys';
import { OPENAPI_USAGE, runOpenapi } from './openapi';
import { runSigningKey, SIGNING_KEY_USAGE } from './sign';

/** A command a layer adds (the BCMS layer's `port`), registered by the CLI's entry point, lib/cli/bin.ts. */
export interface CliCommand {
  name: string;
  /** Its lines of the usage text. */
  usage: string;
  run(args: string[], io: Io, cwd?: string): Promise<number>;
}

const added = new Map<string, CliCommand>();

const BUILT_IN = new Set(['migrate', 'db', 'keys', 'call', 'create', 'bundle', 'dev', 'deploy', 'list', 'rollback', 'undeploy', 'events', 'jobs', 'signing-key', 'openapi', 'help']);

export function addCommand(command: CliCommand): void {
  if (BUILT_IN.has(command.name)) throw new Error(`bcms-ext: a layer cannot replace the command "${command.name}"`);
  added.set(command.name, command);
}

const MIGRATE_USAGE = `  migrate [--database URL | --pglite DIR] [--unlock]
                                            Bring the bcms_* tables up to date. --unlock first frees
                                            the lock a crashed migration left taken.
                                            Default database: DATABASE_URL, else PGlite in .bcms/data.
                                            With BCMS_SECRETS_KEY, seals the API key secrets in clear.
`;

const usage = (): string => `Usage: bcms-ext <command>   (bcms-ext <command> --help: that command alone; --version)

Commands:
${MIGRATE_USAGE}${DB_USAGE}${CREATE_USAGE}${[...added.values()].map((command) => command.usage).join('')}${BUNDLE_USAGE}${DEPLOY_USAGE}${EVENTS_USAGE}${DEV_USAGE}${KEYS_USAGE}${SIGNING_KEY_USAGE}${CALL_USAGE}${OPENAPI_USAGE}  help                                      Show this text.
`;

/** A command's own lines of the usage text, for `bcms-ext <command> --help`. */
function commandUsage(command: string): string | undefined {
  const own: Record<string, string> = {
    migrate: MIGRATE_USAGE,
    db: DB_USAGE,
    create: CREATE_USAGE,
    bundle: BUNDLE_USAGE,
    deploy: DEPLOY_USAGE,
    list: DEPLOY_USAGE,
    rollback: DEPLOY_USAGE,
    undeploy: DEPLOY_USAGE,
    events: EVENTS_USAGE,
    jobs: EVENTS_USAGE,
    dev: DEV_USAGE,
    keys: KEYS_USAGE,
    'signing-key': SIGNING_KEY_USAGE,
    call: CALL_USAGE,
    openapi: OPENAPI_USAGE,
  };
  return added.get(command)?.usage ?? (Object.hasOwn(own, command) ? own[command] : undefined);
}

/** The CLI, with argv and output injectable so that tests run it without spawning. Resolves to the exit code. */
export async function main(argv: readonly string[], io: Io = defaultIo()): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    io.out(usage());
    return command === undefined ? 1 : 0;
  }
  if (command === '--version' || command === '-v' || command === 'version') {
    io.out(`${ownManifest().version}\n`);
    return 0;
  }
  const own = commandUsage(command);
  if (own !== undefined && (rest.includes('--help') || rest.includes('-h'))) {
    io.out(`Usage: bcms-ext ${command}\n\n${own}`);
    return 0;
  }
  try {
    if (command === 'migrate') return await runMigrate(rest, io);
    if (command === 'db') return await runDb(rest, io);
    if (command === 'keys') return await runKeys(rest, io);
    if (command === 'call') return await runCall(rest, io);
    if (command === 'create') return await runCreate(rest, io, io.cwd);
    const layered = added.get(command);
    if (layered !== undefined) return await layered.run(rest, io, io.cwd);
    if (command === 'bundle') return await runBundle(rest, io, io.cwd);
    if (command === 'dev') return await runDev(io, io.cwd);
    if (command === 'deploy') return await runDeploy(rest, io, io.cwd);
    if (command === 'list') return await runList(rest, io, io.cwd);
    if (command === 'rollback') return await runRollback(rest, io, io.cwd);
    if (command === 'undeploy') return await runUndeploy(rest, io, io.cwd);
    if (command === 'events') return await runEvents(rest, io, io.cwd);
    if (command === 'jobs') return await runJobs(rest, io, io.cwd);
    if (command === 'signing-key') return await runSigningKey(rest, io, io.cwd);
    if (command === 'openapi') return await runOpenapi(rest, io, io.cwd);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`bcms-ext ${command}: ${error.message}\n`);
    return 1;
  }
  io.err(`bcms-ext: unknown command "${command}"\n\n${usage()}`);
  return 1;
}

async function runMigrate(args: string[], io: Io): Promise<number> {
  let parsed: ReturnType<typeof parseArgs> | undefined;
  try {
    parsed = parseArgs(args, { database: 'string', pglite: 'string', unlock: 'boolean' });
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    parsed = undefined;
  }
  const { database: url, pglite } = parsed?.flags ?? {};
  if (parsed === undefined || parsed.positionals.length > 0 || (url !== undefined && pglite !== undefined)) {
    io.err(`bcms-ext migrate: expected --database URL or --pglite DIR, got ${JSON.stringify(args.join(' '))}\n`);
    return 1;
  }
  const unlock = parsed.flags.unlock === true;
  const option: DatabaseOption | undefined = typeof pglite === 'string' ? { pglite } : typeof url === 'string' ? url : undefined;
  let database: Database;
  let env: NodeJS.ProcessEnv;
  let secrets: SecretsKeys | undefined;
  try {
    // Knex's own retries and warnings go to stderr, with the rest of what went wrong.
    const toErr = (object: object, message?: string): void => io.err(`${message ?? ''} ${JSON.stringify(object)}\n`);
    // DATABASE_URL (and BCMS_SECRETS_KEY) from the environment, then a .env here, as every command reads its variables.
    env = { ...readDotEnv(io.cwd ?? process.cwd()), ...io.env };
    secrets = resolveSecretsKeys(undefined, env);
    // Its one info line (a first start of PGlite that takes a while) to stderr too, as its message.
    database = openDatabase(option, env, { info: (_object, message) => io.err(`${message ?? ''}\n`), debug: () => {}, warn: toErr, error: toErr });
  } catch (error) {
    io.err(`bcms-ext migrate: ${(error as Error).message}\n`);
    return 1;
  }
  try {
    if (unlock) {
      await unlockMigrations(database.knex);
      io.out(`Freed the ${MIGRATIONS_TABLE} lock.\n`);
    }
    io.out(`Migrating ${database.description} (table ${MIGRATIONS_TABLE})...\n`);
    const applied = await migrate(database.knex);
    io.out(applied.length === 0 ? 'Already up to date.\n' : `Applied: ${applied.join(', ')}\n`);
    const sealed = await sealStoredSecrets(database.knex, secrets);
    if (sealed > 0) io.out(`Sealed ${sealed} API key secret${sealed === 1 ? '' : 's'} under BCMS_SECRETS_KEY.\n`);
    return 0;
  } catch (error) {
    const message = (error as Error).message;
    const next = isUnreachable(error) ? 'Check that the database is running and reachable, then run the command again.' : '';
    io.err(`bcms-ext migrate: ${message}\n${next ? `${next}\n` : ''}`);
    return 1;
  } finally {
    await database.close();
  }
}

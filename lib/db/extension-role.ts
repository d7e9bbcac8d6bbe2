/**
 * The database role extension code runs as (docs/deploying.md: the database session is the
 * service's alone). Extension queries may read and write content (templates, entries, plugin
 * documents: what `repo`, BCMSRepo and plugin repositories compile in an isolate) and nothing of
 * the service's own (API keys, signature replays, deployments, idempotency keys, migrations, this
 * role's password). Postgres draws that line itself: a role with grants on the content tables only.
 *
 * On a Postgres server the role logs in (a pool of its own connects as it); on the embedded
 * database (PGlite, one connection, whose session user is a superuser) it is a NOLOGIN role that
 * each extension statement runs under with SET ROLE.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';

/** The role the service makes where it may (`bcms-ext db extension-role` prints the SQL that makes it elsewhere). */
export const EXTENSION_ROLE = 'bcms_extension';
/** The service-only table that keeps the role's name and password (migrations/20261129010000_extension_role.js). */
export const EXTENSION_ROLE_TABLE = 'bcms_extension_role';

/**
 * What extension code may touch: the content tables, with the sequences their defaults draw from
 * (`seq` of each table, and BCMS's `cid` counters). Every other table of the schema is the
 * service's, and the role has no right on it.
 */
export const CONTENT_TABLES = ['bcms_templates', 'bcms_entries', 'bcms_documents'] as const;
export const CONTENT_SEQUENCES = ['bcms_templates_seq_seq', 'bcms_entries_seq_seq', 'bcms_documents_seq_seq', 'bcms_templates_cid_seq', 'bcms_entries_cid_seq'] as const;

/**
 * On PGlite the session user is a superuser and SET ROLE is undone by one statement that calls
 * `set_config('role', ...)` or runs PL/pgSQL (`DO`) or a temporary function: what would let one
 * extension statement become the superuser halfway through. Taken from PUBLIC (the superuser, which
 * is the service, is not bound by them); `pg_sleep` too, since a statement's time-out does not run
 * there and a sleep would hold the service's only thread.
 */
const EMBEDDED_REVOKES = [
  'revoke usage on language plpgsql from public',
  'revoke execute on function pg_catalog.set_config(text, text, boolean) from public',
  'revoke execute on function pg_catalog.pg_sleep(double precision) from public',
  'revoke execute on function pg_catalog.pg_sleep_for(interval) from public',
  'revoke execute on function pg_catalog.pg_sleep_until(timestamp with time zone) from public',
];

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;
const literal = (value: string): string => `'${value.replace(/'/g, "''")}'`;

/** The grants that give `role` the content tables of the schema first in the search path (and its usage). */
export function contentGrants(role: string, schema?: string): string[] {
  const on = (name: string): string => (schema === undefined ? quote(name) : `${quote(schema)}.${quote(name)}`);
  return [
    ...(schema === undefined ? [] : [`grant usage on schema ${quote(schema)} to ${quote(role)}`]),
    `grant select, insert, update, delete on ${CONTENT_TABLES.map(on).join(', ')} to ${quote(role)}`,
    `grant usage on sequence ${CONTENT_SEQUENCES.map(on).join(', ')} to ${quote(role)}`,
  ];
}

/** Session defaults of the role itself: every connection also sets its own (lib/isolate/extension-sessions.ts). */
function roleSettings(role: string, timeoutMs: number): string[] {
  return [`alter role ${quote(role)} set statement_timeout = ${timeoutMs}`, `alter role ${quote(role)} set idle_in_transaction_session_timeout = ${timeoutMs}`];
}

/**
 * The SQL `bcms-ext db extension-role` prints, for a superuser to run where the service's user may
 * not make roles: the login role, its limits, its grants on the schema's content tables, and its
 * password in the service's table (where the service finds it).
 */
export function extensionRoleSql(options: { schema?: string; role?: string; password?: string; timeoutMs: number }): string {
  const role = options.role ?? EXTENSION_ROLE;
  const password = options.password ?? randomPassword();
  const table = options.schema === undefined ? quote(EXTENSION_ROLE_TABLE) : `${quote(options.schema)}.${quote(EXTENSION_ROLE_TABLE)}`;
  return [
    `-- Extension code's database role for bcms-extensions: content tables only (run as a superuser, after \`bcms-ext migrate\`).`,
    `create role ${quote(role)} login nosuperuser nocreatedb nocreaterole noinherit nobypassrls password ${literal(password)}`,
    ...roleSettings(role, options.timeoutMs),
    ...contentGrants(role, options.schema),
    `insert into ${table} (role, password) values (${literal(role)}, ${literal(password)}) on conflict (role) do update set password = excluded.password, updated_at = clock_timestamp()`,
  ]
    .map((line) => (line.startsWith('--') ? line : `${line};`))
    .join('\n');
}

export const randomPassword = (): string => randomBytes(24).toString('base64url');

/** What the service knows of its own session, for making the role and checking it. */
interface ServiceFacts {
  user: string;
  database: string;
  schemas: string[];
  superuser: boolean;
  createRole: boolean;
  roleExists: boolean;
  versionNum: number;
}

async function serviceFacts(knex: Knex, role: string): Promise<ServiceFacts> {
  const result = (await knex.raw(
    `select current_user as "user", current_database() as database, current_schemas(false) as schemas,
            r.rolsuper as superuser, r.rolcreaterole as "createRole",
            exists (select 1 from pg_roles where rolname = ?) as "roleExists",
            current_setting('server_version_num')::int as "versionNum"
       from pg_roles r where r.rolname = current_user`,
    [role],
  )) as { rows: ServiceFacts[] };
  const facts = result.rows[0];
  if (facts === undefined) throw new Error('the database did not say who the service is');
  return { ...facts, schemas: pgArray(facts.schemas) };
}

/** pg parses `name[]` into an array; PGlite may answer its text form. */
function pgArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value !== 'string') return [];
  return value
    .replace(/^\{|\}$/g, '')
    .split(',')
    .filter((part) => part !== '')
    .map((part) => part.replace(/^"|"$/g, '').replace(/\\(.)/g, '$1'));
}

/** Where extension queries go, or why they are refused. */
export type ExtensionRoleOutcome =
  | { ok: true; role: string; password: string | undefined; schemas: string[]; canRepair: boolean; restoreUser: string; database: string }
  | { ok: false; reason: string };

/**
 * Makes the role where the service's user may (superuser, or CREATEROLE), grants it this schema's
 * content tables, and says how to connect as it. `extensionUrl`'s user is granted the same
 * (the service owns its tables). Refuses, saying what to do, where there is no role to use.
 */
export async function prepareExtensionRole(knex: Knex, options: { embedded: boolean; extensionUser?: string; timeoutMs: number; role?: string }): Promise<ExtensionRoleOutcome> {
  const role = options.extensionUser ?? options.role ?? EXTENSION_ROLE;
  const facts = await serviceFacts(knex, role);
  if (options.extensionUser !== undefined && !facts.roleExists) {
    return { ok: false, reason: `the role "${role}" of database.extensionUrl does not exist: make it (\`bcms-ext db extension-role --role ${role}\` prints the SQL)` };
  }
  const mayMakeRoles = facts.superuser || facts.createRole;
  const schema = facts.schemas[0];
  if (schema === undefined) return { ok: false, reason: 'the service has no schema in its search path' };
  let password: string | undefined;
  if (options.extensionUser === undefined) {
    if (!facts.roleExists) {
      if (!mayMakeRoles) {
        return {
          ok: false,
          reason:
            `there is no role "${role}" for extension queries, and the service's database user "${facts.user}" may not make one. ` +
            'Give the option database.extensionUrl (a login role with rights on the content tables only), or run as a superuser the SQL that `bcms-ext db extension-role` prints',
        };
      }
      password = options.embedded ? undefined : randomPassword();
      // Two instances starting at once: the second finds the role made (duplicate_object), and uses it.
      await knex
        .raw(
          options.embedded
            ? `create role ${quote(role)} nologin nosuperuser nocreatedb nocreaterole noinherit nobypassrls`
            : `create role ${quote(role)} login nosuperuser nocreatedb nocreaterole noinherit nobypassrls password ${literal(password as string)}`,
        )
        .catch((error: { code?: string }) => {
          if (error.code !== '42710' && error.code !== '23505') throw error;
          password = undefined;
        });
      for (const sql of roleSettings(role, options.timeoutMs)) await knex.raw(sql);
      if (password !== undefined) await storePassword(knex, role, password);
    }
    if (!options.embedded) password ??= await storedPassword(knex, role);
  }
  // The service owns its tables: it may grant them, whoever made the role.
  const grants = contentGrants(role);
  const usage = (await knex.raw('select has_schema_privilege(?, ?, ?) as usage', [role, schema, 'USAGE'])) as { rows: { usage: boolean }[] };
  if (usage.rows[0]?.usage !== true) grants.unshift(`grant usage on schema ${quote(schema)} to ${quote(role)}`);
  for (const sql of grants) await granting(knex, sql);
  if (options.embedded) for (const sql of [...EMBEDDED_REVOKES, `revoke temporary on database ${quote(facts.database)} from public`]) await knex.raw(sql);
  const refusal = await rightsRefusal(knex, role, facts.schemas);
  if (refusal !== undefined) return { ok: false, reason: refusal };
  return { ok: true, role, password, schemas: facts.schemas, canRepair: mayMakeRoles && options.extensionUser === undefined, restoreUser: facts.user, database: facts.database };
}

/**
 * Two instances starting at once grant the same objects at once, and Postgres may answer one "tuple
 * concurrently updated" (XX000): the other's grant is the same, and this one is tried again.
 */
async function granting(knex: Knex, sql: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await knex.raw(sql);
      return;
    } catch (error) {
      if (attempt >= 5 || !/concurrently updated/i.test(String((error as Error).message))) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

/**
 * Why `role` must not run extension queries, or undefined: it may not be privileged, a member of
 * another role, or hold any right on a table of the service's, nor make objects in its schemas.
 */
export async function rightsRefusal(knex: Knex, role: string, schemas: string[]): Promise<string | undefined> {
  const result = (await knex.raw(
    `select r.rolsuper or r.rolcreaterole or r.rolcreatedb or r.rolbypassrls as privileged,
            (select string_agg(g.rolname, ', ') from pg_auth_members m join pg_roles g on g.oid = m.roleid where m.member = r.oid) as "memberOf",
            (select string_agg(c.relname, ', ' order by c.relname) from pg_class c
              where c.relnamespace = (select oid from pg_namespace where nspname = ?) and c.relkind in ('r', 'p', 'v', 'm', 'S')
                and c.relname like 'bcms\\_%' and not (c.relname = any(?))
                and (has_table_privilege(r.oid, c.oid, 'SELECT') or has_table_privilege(r.oid, c.oid, 'INSERT') or has_table_privilege(r.oid, c.oid, 'UPDATE')
                     or has_table_privilege(r.oid, c.oid, 'DELETE') or has_table_privilege(r.oid, c.oid, 'TRUNCATE') or has_table_privilege(r.oid, c.oid, 'TRIGGER'))) as "serviceTables",
            (select string_agg(s, ', ') from unnest(?::text[]) as s where has_schema_privilege(r.oid, s, 'CREATE')) as "creates"
       from pg_roles r where r.rolname = ?`,
    [schemas[0] as string, [...CONTENT_TABLES, ...CONTENT_SEQUENCES], schemas, role],
  )) as { rows: { privileged: boolean; memberOf: string | null; serviceTables: string | null; creates: string | null }[] };
  const row = result.rows[0];
  if (row === undefined) return `the role "${role}" does not exist`;
  if (row.privileged) return `the role "${role}" is privileged (superuser, CREATEROLE, CREATEDB or BYPASSRLS): extension queries need a role with rights on the content tables only`;
  if (row.memberOf !== null) return `the role "${role}" is a member of ${row.memberOf}: extension queries need a role that is a member of nothing (SET ROLE would reach that role's rights)`;
  if (row.serviceTables !== null) return `the role "${role}" has rights on the service's own tables (${row.serviceTables}): revoke them, extension queries may touch content only`;
  if (row.creates !== null) {
    return `the role "${role}" may create objects in the schema ${row.creates} (Postgres before 15 lets everyone create in "public"): run \`revoke create on schema ${row.creates} from public\` (or from the role)`;
  }
  return undefined;
}

/** The password the service keeps for `role` (another instance may have renewed it). */
export async function storedPassword(knex: Knex, role: string): Promise<string | undefined> {
  const row = (await knex(EXTENSION_ROLE_TABLE).where({ role }).first('password')) as { password: string | null } | undefined;
  return row?.password ?? undefined;
}

async function storePassword(knex: Knex, role: string, password: string | null): Promise<void> {
  await knex(EXTENSION_ROLE_TABLE)
    .insert({ role, password })
    .onConflict('role')
    .merge({ password, updated_at: knex.raw('clock_timestamp()') });
}

/**
 * The role's password did not work (extension code may change its own role's password, or the role
 * was made by another service on this cluster): a new one, kept here. Only for the role the service made.
 */
export async function renewPassword(knex: Knex, role: string): Promise<string> {
  const password = randomPassword();
  await knex.raw(`alter role ${quote(role)} password ${literal(password)}`);
  await storePassword(knex, role, password);
  return password;
}

/** The settings the role itself carries (`ALTER ROLE ... SET`), which extension code may change for its own role. */
export const ROLE_SETTINGS = new Set(['statement_timeout', 'idle_in_transaction_session_timeout']);

/**
 * Puts back the role's own session defaults after extension code changed them (`alter role
 * current_user set default_transaction_read_only = on` would otherwise reach every later session).
 */
export async function repairRoleSettings(knex: Knex, role: string, database: string, timeoutMs: number): Promise<void> {
  await knex.raw(`alter role ${quote(role)} reset all`);
  await knex.raw(`alter role ${quote(role)} in database ${quote(database)} reset all`);
  for (const sql of roleSettings(role, timeoutMs)) await knex.raw(sql);
}

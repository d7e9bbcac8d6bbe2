import type { Knex } from 'knex';
import type { DeploymentKind } from './load';
import type { BundleSignature } from './signing';

export const DEPLOYMENTS_TABLE = 'bcms_deployments';
/** The channel instances listen on; the payload is the kind and name that changed. */
export const DEPLOYMENTS_CHANNEL = 'bcms_deployments';

/** A deployment as `bcms-ext list` shows it: never its code. Times are epoch milliseconds. */
export interface Deployment {
  id: string;
  kind: DeploymentKind;
  name: string;
  project: string | null;
  version: string;
  sha256: string;
  deployedBy: string;
  active: boolean;
  createdAt: number;
  /** Why an instance could not load it (the first line), or null. */
  loadError: string | null;
  /**
   * SHA-256 of its code and its UI's files together (`sha256` is of the code alone): what `list`
   * shows, and every answer about a version (deploy, rollback, undeploy) carries. Absent only in
   * the versions an instance loads (their code is with them).
   */
  contentSha256?: string;
}

/** An active deployment, with what it takes to load it. */
export interface ActiveDeployment extends Deployment {
  code: string;
  ui: Record<string, string> | null;
  /** The author's signature of it (lib/deploy/signing.ts), or null. */
  signature: BundleSignature | null;
}

export interface NewDeployment {
  kind: DeploymentKind;
  name: string;
  project: string | null;
  version: string;
  sha256: string;
  code: string;
  ui: Record<string, string> | null;
  signature: BundleSignature | null;
  deployedBy: string;
}

interface DeploymentRow {
  id: string;
  kind: DeploymentKind;
  name: string;
  project: string | null;
  version: string;
  sha256: string;
  deployed_by: string;
  active: boolean;
  created_at: Date;
  load_error: string | null;
  content_sha256?: string;
  code?: string;
  ui?: Record<string, string> | null;
  signature?: BundleSignature | null;
}

const SUMMARY = ['id', 'kind', 'name', 'project', 'version', 'sha256', 'deployed_by', 'active', 'created_at', 'load_error'];

/**
 * SHA-256 of a version's code and UI together: what `bcms-ext list` shows, and so what every answer
 * about a version carries (two versions of one version number differ in it). jsonb's text is
 * canonical (its keys in jsonb's own order), so the same UI hashes the same.
 */
const contentSha256 = (knex: Knex) => knex.raw("encode(sha256(convert_to(code || coalesce(ui::text, ''), 'UTF8')), 'hex') as content_sha256");

/** Versions `ids` as answers show them, their content hash with them, in the order of `ids`. */
async function summaries(knex: Knex, ids: readonly string[]): Promise<Deployment[]> {
  const rows = (await knex(DEPLOYMENTS_TABLE)
    .select([...SUMMARY, contentSha256(knex)])
    .whereIn('id', ids)) as DeploymentRow[];
  return ids.map((id) => toDeployment(rows.find((row) => String(row.id) === String(id)) as DeploymentRow));
}

function toDeployment(row: DeploymentRow): Deployment {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    project: row.project,
    version: row.version,
    sha256: row.sha256,
    deployedBy: row.deployed_by,
    active: row.active,
    createdAt: new Date(row.created_at).getTime(),
    loadError: row.load_error ?? null,
    ...(row.content_sha256 === undefined ? {} : { contentSha256: row.content_sha256 }),
  };
}

/**
 * Stores a version and makes it the active one, in one transaction: the version it replaces (and,
 * for a renamed plugin, the version of the same project under its old name) goes inactive, and
 * every instance is told, once the transaction commits.
 */
export async function recordDeployment(knex: Knex, deployment: NewDeployment): Promise<Deployment> {
  return knex.transaction(async (trx) => {
    await lock(trx);
    // A plugin project holds one plugin: its version under an old name goes too. A functions project
    // holds many functions, each replaced by its own name only.
    const renamable = deployment.kind === 'plugin' && deployment.project !== null;
    const replaced = trx(DEPLOYMENTS_TABLE)
      .where({ active: true, kind: deployment.kind })
      .andWhere((where) => {
        void where.where({ name: deployment.name });
        if (renamable) void where.orWhere({ project: deployment.project });
      });
    const gone = (await replaced.clone().select('name')) as { name: string }[];
    await replaced.update({ active: false });
    const [row] = (await trx(DEPLOYMENTS_TABLE)
      .insert({
        kind: deployment.kind,
        name: deployment.name,
        project: deployment.project,
        version: deployment.version,
        sha256: deployment.sha256,
        code: deployment.code,
        ui: deployment.ui === null ? null : JSON.stringify(deployment.ui),
        signature: deployment.signature === null ? null : JSON.stringify(deployment.signature),
        deployed_by: deployment.deployedBy,
        active: true,
      })
      .returning('id')) as { id: string }[];
    for (const name of new Set([deployment.name, ...gone.map((g) => g.name)])) await notify(trx, deployment.kind, name);
    return (await summaries(trx, [(row as { id: string }).id]))[0] as Deployment;
  });
}

/** Every version, oldest first, without code: what tells two versions apart is the hash of their content. */
export async function listDeployments(knex: Knex): Promise<Deployment[]> {
  const rows = (await knex(DEPLOYMENTS_TABLE)
    .select([...SUMMARY, contentSha256(knex)])
    .orderBy('seq')) as DeploymentRow[];
  return rows.map(toDeployment);
}

/** A version with what it takes to load it (and to check who signed it). */
function withCode(row: DeploymentRow): ActiveDeployment {
  return { ...toDeployment(row), code: row.code as string, ui: row.ui ?? null, signature: row.signature ?? null };
}

/** The active versions, with their code: what an instance loads at start and on a notification. */
export async function activeDeployments(knex: Knex): Promise<ActiveDeployment[]> {
  const rows = (await knex(DEPLOYMENTS_TABLE)
    .select([...SUMMARY, 'code', 'ui', 'signature'])
    .where({ active: true })
    .orderBy('seq')) as DeploymentRow[];
  return rows.map(withCode);
}

/**
 * Where versions replace one another: a function's name, or a plugin's project (a renamed plugin
 * is the same plugin under another name).
 */
async function scopeOf(trx: Knex.Transaction, kind: DeploymentKind, name: string): Promise<Record<string, string>> {
  if (kind === 'plugin') {
    const row = (await trx(DEPLOYMENTS_TABLE).first('project').where({ kind, name }).whereNotNull('project').orderBy('seq', 'desc')) as { project: string } | undefined;
    if (row !== undefined) return { kind, project: row.project };
  }
  return { kind, name };
}

/**
 * The version `rollback` would make live: the one before the active one (for a plugin, of its
 * project, whatever the name it had then), with its code, so that it can be loaded before it
 * goes live; undefined when there is none to go back to.
 */
export async function previousDeployment(knex: Knex, kind: DeploymentKind, name: string): Promise<ActiveDeployment | undefined> {
  return knex.transaction(async (trx) => {
    const scope = await scopeOf(trx, kind, name);
    const current = (await trx(DEPLOYMENTS_TABLE)
      .first('seq')
      .where({ ...scope, active: true })
      .orderBy('seq', 'desc')) as { seq: string } | undefined;
    const row = (await trx(DEPLOYMENTS_TABLE)
      .first([...SUMMARY, 'code', 'ui', 'signature'])
      .where(scope)
      .modify((query) => {
        if (current !== undefined) void query.andWhere('seq', '<', current.seq);
      })
      .orderBy('seq', 'desc')) as DeploymentRow | undefined;
    return row === undefined ? undefined : withCode(row);
  });
}

/** Makes version `id` the live one of its scope (what was live there goes inactive); every instance is told. */
export async function activateDeployment(knex: Knex, id: string): Promise<Deployment | null> {
  return knex.transaction(async (trx) => {
    await lock(trx);
    const target = (await trx(DEPLOYMENTS_TABLE).first('kind', 'name').where({ id })) as { kind: DeploymentKind; name: string } | undefined;
    if (target === undefined) return null;
    const scope = await scopeOf(trx, target.kind, target.name);
    const replaced = (await trx(DEPLOYMENTS_TABLE)
      .where({ ...scope, active: true })
      .update({ active: false })
      .returning('name')) as { name: string }[];
    await trx(DEPLOYMENTS_TABLE).where({ id }).update({ active: true, load_error: null });
    for (const changed of new Set([target.name, ...replaced.map((each) => each.name)])) await notify(trx, target.kind, changed);
    return (await summaries(trx, [id]))[0] as Deployment;
  });
}

/**
 * Takes an extension out of service: its live version (for a plugin, of its project) goes
 * inactive, on every instance. Resolves to that version, or null when none was live.
 */
export async function undeployDeployment(knex: Knex, kind: DeploymentKind, name: string): Promise<Deployment | null> {
  return knex.transaction(async (trx) => {
    await lock(trx);
    const scope = await scopeOf(trx, kind, name);
    const rows = (await trx(DEPLOYMENTS_TABLE)
      .where({ ...scope, active: true })
      .update({ active: false })
      .returning(['id', 'name'])) as { id: string; name: string }[];
    for (const changed of new Set(rows.map((row) => row.name))) await notify(trx, kind, changed);
    const [row] = rows;
    return row === undefined ? null : ((await summaries(trx, [row.id]))[0] as Deployment);
  });
}

/** An instance could not load version `id`: the reason is kept (rollback refuses it; `list` shows it). */
export async function recordLoadError(knex: Knex, id: string, message: string): Promise<void> {
  await knex(DEPLOYMENTS_TABLE)
    .where({ id })
    .update({ load_error: message.slice(0, 2000) });
}

/**
 * Takes back a version that was stored but did not load in the service: it is deleted (it never
 * served), and `restore`, the version that was live before it, if any, is live again.
 */
export async function withdrawDeployment(knex: Knex, id: string, restore: string | undefined): Promise<void> {
  await knex.transaction(async (trx) => {
    await lock(trx);
    const row = (await trx(DEPLOYMENTS_TABLE).first('kind', 'name', 'seq').where({ id })) as { kind: DeploymentKind; name: string; seq: string } | undefined;
    if (row === undefined) return;
    const scope = await scopeOf(trx, row.kind, row.name);
    await trx(DEPLOYMENTS_TABLE).where({ id }).delete();
    const previous = restore === undefined ? undefined : ((await trx(DEPLOYMENTS_TABLE).first('id', 'name').where({ id: restore })) as { id: string; name: string } | undefined);
    const active = await trx(DEPLOYMENTS_TABLE)
      .first('id')
      .where({ ...scope, active: true });
    if (previous !== undefined && active === undefined) await trx(DEPLOYMENTS_TABLE).where({ id: previous.id }).update({ active: true });
    for (const changed of new Set([row.name, previous?.name].filter((n): n is string => n !== undefined))) await notify(trx, row.kind, changed);
  });
}

/** The active version of (kind, name): to skip storing an upload identical to it. */
export async function activeVersion(
  knex: Knex,
  kind: DeploymentKind,
  name: string,
): Promise<{ id: string; sha256: string; ui: Record<string, string> | null; signature: BundleSignature | null } | undefined> {
  return (await knex(DEPLOYMENTS_TABLE).first('id', 'sha256', 'ui', 'signature').where({ kind, name, active: true })) as
    | { id: string; sha256: string; ui: Record<string, string> | null; signature: BundleSignature | null }
    | undefined;
}

/** Deployments change one at a time, on every instance: two at once would both take "active". */
async function lock(trx: Knex.Transaction): Promise<void> {
  await trx.raw(`select pg_advisory_xact_lock(hashtext('${DEPLOYMENTS_TABLE}'))`);
}

/** NOTIFY inside the transaction: Postgres delivers it on commit, and never for a rollback. */
async function notify(trx: Knex.Transaction, kind: DeploymentKind, name: string): Promise<void> {
  await trx.raw('select pg_notify(?, ?)', [DEPLOYMENTS_CHANNEL, `${kind}:${name}`]);
}

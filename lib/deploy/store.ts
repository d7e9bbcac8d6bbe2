import type { Knex } from 'knex';
import type { DeploymentKind } from './load';

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
}

/** An active deployment, with what it takes to load it. */
export interface ActiveDeployment extends Deployment {
  code: string;
  ui: Record<string, string> | null;
}

export interface NewDeployment {
  kind: DeploymentKind;
  name: string;
  project: string | null;
  version: string;
  sha256: string;
  code: string;
  ui: Record<string, string> | null;
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
  code?: string;
  ui?: Record<string, string> | null;
}

const SUMMARY = ['id', 'kind', 'name', 'project', 'version', 'sha256', 'deployed_by', 'active', 'created_at'];

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
  };
}

/**
 * Stores a version and makes it the active one, in one transaction: the version it replaces (and,
 * for a renamed plugin, the version of the same project under its old name) goes inactive, and
 * every instance is told, once the transaction commits.
 */
export async function recordDeployment(knex: Knex, deployment: NewDeployment): Promise<Deployment> {
  return knex.transaction(async (trx) => {
    // A plugin project holds one plugin: its version under an old name goes too. A functions project
    // holds many functions, each replaced by its own name only.
    const renamable = deployment.kind === 'plugin' && deployment.project !== null;
    const replaced = trx(DEPLOYMENTS_TABLE).where({ active: true, kind: deployment.kind }).andWhere((where) => {
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
        deployed_by: deployment.deployedBy,
        active: true,
      })
      .returning(SUMMARY)) as DeploymentRow[];
    for (const name of new Set([deployment.name, ...gone.map((g) => g.name)])) await notify(trx, deployment.kind, name);
    return toDeployment(row as DeploymentRow);
  });
}

/** Every version, oldest first, without code. */
export async function listDeployments(knex: Knex): Promise<Deployment[]> {
  const rows = (await knex(DEPLOYMENTS_TABLE).select(SUMMARY).orderBy('seq')) as DeploymentRow[];
  return rows.map(toDeployment);
}

/** The active versions, with their code: what an instance loads at start and on a notification. */
export async function activeDeployments(knex: Knex): Promise<ActiveDeployment[]> {
  const rows = (await knex(DEPLOYMENTS_TABLE).select([...SUMMARY, 'code', 'ui']).where({ active: true }).orderBy('seq')) as DeploymentRow[];
  return rows.map((row) => ({ ...toDeployment(row), code: row.code as string, ui: row.ui ?? null }));
}

/**
 * Makes the version before the active one of (kind, name) active again; resolves to it, or null
 * when there is none to go back to.
 */
export async function rollbackDeployment(knex: Knex, kind: DeploymentKind, name: string): Promise<Deployment | null> {
  return knex.transaction(async (trx) => {
    const current = (await trx(DEPLOYMENTS_TABLE).first('id', 'seq').where({ kind, name, active: true })) as { id: string; seq: string } | undefined;
    const previous = (await trx(DEPLOYMENTS_TABLE)
      .first('id')
      .where({ kind, name })
      .modify((query) => {
        if (current !== undefined) void query.andWhere('seq', '<', current.seq);
      })
      .orderBy('seq', 'desc')) as { id: string } | undefined;
    if (previous === undefined) return null;
    if (current !== undefined) await trx(DEPLOYMENTS_TABLE).where({ id: current.id }).update({ active: false });
    const [row] = (await trx(DEPLOYMENTS_TABLE).where({ id: previous.id }).update({ active: true }).returning(SUMMARY)) as DeploymentRow[];
    await notify(trx, kind, name);
    return toDeployment(row as DeploymentRow);
  });
}

/** NOTIFY inside the transaction: Postgres delivers it on commit, and never for a rollback. */
async function notify(trx: Knex.Transaction, kind: DeploymentKind, name: string): Promise<void> {
  await trx.raw('select pg_notify(?, ?)', [DEPLOYMENTS_CHANNEL, `${kind}:${name}`]);
}

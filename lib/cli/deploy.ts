import fs from 'node:fs';
import path from 'node:path';
import { createPrivateKey } from 'node:crypto';
import { signRequest, type SigningKey } from '../client';
import { fetchFailure } from '../http/fetch-failure';
import { DEPLOYMENT_KINDS, type DeploymentKind } from '../deploy/load';
import { parseArgs, UsageError, type Io } from './_io';
import { signed, signingKey } from './sign';
import { readDotEnv } from './dotenv';

export const DEPLOY_USAGE = `  deploy [FILE ...]                         Send bundles (default: every file in bcms-bundle/) to
                                            the service, signed with a key that may deploy;
                                            refused when a source changed after bcms-bundle/.
  list [--json]                             List deployed versions (* = active), and why a version
                                            failed to load, if one did.
  rollback NAME [--kind KIND]               Make the version before the active one live again
                                            (after an undeploy: the last version).
  undeploy NAME [--kind KIND]               Take a plugin, function, event or job out of service,
                                            on every instance; its versions stay listed for
                                            rollback. KIND: plugin, function, event or job (needed
                                            only when two kinds share the name).
      deploy, list, rollback and undeploy reach BCMS_URL (default http://localhost:8080),
      signed with BCMS_KEY_ID and BCMS_PRIVATE_KEY_FILE or BCMS_KEY_SECRET (bcms-ext keys
      create --deploy), from the environment or a .env file in the working directory.
`;

export const BUNDLE_DIR = 'bcms-bundle';

interface DeploymentSummary {
  kind: DeploymentKind;
  name: string;
  version: string;
  sha256: string;
  deployedBy: string;
  active: boolean;
  createdAt: number;
  /** Why an instance could not load this version (first line), or null. */
  loadError?: string | null;
  /** SHA-256 of the code and the UI's files together. */
  contentSha256?: string;
  /** How an active version fares on the instance that answered: running, failing (restarted with backoff), failed (did not load there). */
  state?: 'running' | 'failing' | 'failed';
  /** Why its last isolate ended, or it did not load, there. */
  lastError?: string;
}

/**
 * The service and the deploy key: the environment, then .env. The key signs with BCMS_KEY_SECRET
 * (hmac-sha256) or BCMS_PRIVATE_KEY_FILE (a PEM file, relative to here; what keys create --deploy
 * writes), taken from the environment when it sets either, else from .env: never one of each.
 */
export function target(io: Io, cwd: string): { baseUrl: string; key: SigningKey } {
  const dotEnv = readDotEnv(cwd);
  const env = { ...dotEnv, ...io.env };
  const baseUrl = (env.BCMS_URL || 'http://localhost:8080').replace(/\/+$/, '');
  const material = io.env.BCMS_KEY_SECRET || io.env.BCMS_PRIVATE_KEY_FILE ? io.env : dotEnv;
  const { BCMS_KEY_SECRET: secret, BCMS_PRIVATE_KEY_FILE: keyFile } = material;
  if (!env.BCMS_KEY_ID || (!secret && !keyFile)) {
    throw new UsageError(
      'set BCMS_KEY_ID and BCMS_KEY_SECRET or BCMS_PRIVATE_KEY_FILE (in the environment or a .env file here) to a key that may deploy: ' +
        'bcms-ext keys create --name deployer --deploy --env-file .env writes them',
    );
  }
  if (secret && keyFile) throw new UsageError('set BCMS_KEY_SECRET or BCMS_PRIVATE_KEY_FILE, not both');
  if (secret) return { baseUrl, key: { keyId: env.BCMS_KEY_ID, secret } };
  const file = path.resolve(cwd, keyFile as string);
  try {
    return { baseUrl, key: { keyId: env.BCMS_KEY_ID, privateKey: createPrivateKey(fs.readFileSync(file, 'utf8')) } };
  } catch (error) {
    throw new UsageError(`cannot read the private key of BCMS_PRIVATE_KEY_FILE (${file}): ${(error as Error).message}`);
  }
}

/**
 * A signed call to the service's deployments routes; resolves to the answer, or throws with what to
 * do. `hints`: what to do next after a refusal of that status, where the command knows better.
 */
function call(
  to: ReturnType<typeof target>,
  method: 'GET' | 'POST' | 'DELETE',
  route: string,
  body?: string,
  hints: Readonly<Partial<Record<number, string>>> = {},
): Promise<{ status: number; answer: Record<string, unknown> }> {
  return callSigned(to, method, `/api/extensions/deployments${route}`, body, hints);
}

/** A call signed with the deploy key to `path` (and its query) of the service, as `call` makes one: the event and job lists take the same key. */
export async function callSigned(
  to: ReturnType<typeof target>,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: string,
  hints: Readonly<Partial<Record<number, string>>> = {},
): Promise<{ status: number; answer: Record<string, unknown> }> {
  const url = `${to.baseUrl}${path}`;
  const headers = signRequest({ ...to.key, method, url, body: body ?? '' });
  let response: Response;
  try {
    response = await fetch(url, { method, headers: { ...headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) }, body });
  } catch (error) {
    throw new UsageError(`cannot reach the service at ${to.baseUrl} (${fetchFailure(error)}). Start it, or set BCMS_URL to where it listens.`);
  }
  const text = await response.text();
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // The app's own body parser (express.json(): 100kb by default) refuses a bundle before the router sees it.
    if (response.status === 413) {
      throw new UsageError(
        `${url} answered 413 without JSON: a body parser of the app refused the bundle before bcms-extensions read it. ` +
          "Mount the router before the app's body parsers, or give them a limit that fits bundles: express.json({ limit: '20mb', verify: keepRawBody }).",
      );
    }
    throw new UsageError(`${url} answered ${response.status} without JSON: is bcms-extensions mounted at ${to.baseUrl}?`);
  }
  if (response.ok) return { status: response.status, answer };
  const message = String(answer.message ?? (answer.error as { message?: string } | undefined)?.message ?? text);
  const hint = hints[response.status];
  const next =
    hint !== undefined
      ? ` ${hint}`
      : response.status === 403
        ? ' Deploy with a key that may: bcms-ext keys create --name deployer --deploy.'
        : response.status === 401
          ? " Check BCMS_KEY_ID and BCMS_KEY_SECRET (or BCMS_PRIVATE_KEY_FILE), and this machine's clock."
          : '';
  throw new UsageError(`the service answered ${response.status}: ${message}${next}`);
}

export async function runDeploy(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals } = parseArgs(args, {});
  let files = positionals.map((file) => path.resolve(cwd, file));
  if (files.length === 0) {
    const dir = path.join(cwd, BUNDLE_DIR);
    files = fs.existsSync(dir)
      ? fs
          .readdirSync(dir)
          .filter((file) => file.endsWith('.json'))
          .sort()
          .map((file) => path.join(dir, file))
      : [];
    if (files.length === 0) throw new UsageError(`no bundle in ${BUNDLE_DIR}/: run npm run bundle first`);
    const changed = changedSince(cwd, Math.min(...files.map((file) => fs.statSync(file).mtimeMs)));
    if (changed !== undefined) {
      throw new UsageError(`${changed} changed after ${BUNDLE_DIR}/ was made: run npm run bundle, then deploy (or name the bundle files to send them as they are)`);
    }
  }
  const to = target(io, cwd);
  const key = signingKey(io, cwd);
  for (const file of files) {
    let body: string;
    let manifest: { kind?: string; name?: string; version?: string };
    try {
      body = fs.readFileSync(file, 'utf8');
      const bundle = JSON.parse(body) as Parameters<typeof signed>[0];
      manifest = bundle.manifest ?? {};
      // A bundle made before the key was set is signed on its way out.
      if (key !== undefined && bundle.signature === undefined && bundle.manifest !== undefined) body = JSON.stringify(signed(bundle, key));
    } catch (error) {
      if (error instanceof UsageError) throw error;
      throw new UsageError(`cannot read the bundle ${file}: ${(error as Error).message}`);
    }
    const size = `${(Buffer.byteLength(body) / 1024).toFixed(1)} KB`;
    io.out(`Deploying ${manifest.kind} ${manifest.name} ${manifest.version} (${size}) to ${to.baseUrl}... `);
    let answer: Record<string, unknown>;
    try {
      ({ answer } = await call(to, 'POST', '', body));
    } catch (error) {
      io.out('failed.\n');
      throw error;
    }
    io.out(answer.unchanged === true ? 'unchanged (the service already runs this version).\n' : 'live.\n');
  }
  return 0;
}

export async function runList(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { flags } = parseArgs(args, { json: 'boolean' });
  const { answer } = await call(target(io, cwd), 'GET', '');
  const deployments = answer.deployments as DeploymentSummary[];
  const sandbox = answer.sandbox as { kind: string; unavailable?: string } | undefined;
  if (flags.json) {
    io.out(`${JSON.stringify(deployments, null, 2)}\n`);
    return 0;
  }
  // What isolates run in, when it is less than a sandbox: the operator should know.
  if (sandbox?.kind === 'none') io.err(`Isolates run without a sandbox on this instance${sandbox.unavailable === undefined ? '' : ` (${sandbox.unavailable})`}.\n`);
  if (deployments.length === 0) {
    io.out('Nothing deployed yet.\n');
    return 0;
  }
  // HASH: the first 12 hex digits of the content's SHA-256 (code and UI), which tells apart versions of one version number.
  const rows = [
    ['', 'KIND', 'NAME', 'VERSION', 'HASH', 'STATE', 'DEPLOYED', 'BY'],
    ...deployments.map((d) => [d.active ? '*' : '', d.kind, d.name, d.version, (d.contentSha256 ?? d.sha256).slice(0, 12), d.state ?? '', new Date(d.createdAt).toISOString(), d.deployedBy]),
  ];
  const widths = (rows[0] as string[]).map((_, column) => Math.max(...rows.map((row) => (row[column] as string).length)));
  const line = (row: string[]) =>
    row
      .map((cell, column) => cell.padEnd(widths[column] as number))
      .join('  ')
      .trimEnd();
  // A version an instance could not load: why (its first line), on the line under it, below KIND.
  const indent = ' '.repeat((widths[0] as number) + 2);
  const lines = [line(rows[0] as string[])];
  deployments.forEach((d, i) => {
    lines.push(line(rows[i + 1] as string[]));
    const why = d.loadError?.split('\n')[0]?.trim();
    if (why) lines.push(`${indent}load error: ${why}`);
    const last = d.state === 'failing' ? d.lastError?.split('\n')[0]?.trim() : undefined;
    if (last) lines.push(`${indent}failing: ${last}`);
  });
  io.out(`${lines.join('\n')}\n`);
  return 0;
}

/** `plugin|function|event|job`, as the usage lines and errors write the kinds. */
const KINDS = DEPLOYMENT_KINDS.join('|');

/**
 * The kind NAME is deployed as: --kind, else the one the service lists under that name (an active
 * version's first: an undeploy is of what is live). Refuses a name nothing was deployed under, and
 * one that two kinds go by (a function and an event of one project may share a file name).
 */
async function kindOf(to: ReturnType<typeof target>, name: string, flag: string | true | undefined, activeFirst: boolean): Promise<DeploymentKind> {
  if (flag !== undefined && !DEPLOYMENT_KINDS.includes(flag as DeploymentKind)) throw new UsageError('--kind is plugin, function, event or job');
  if (flag !== undefined) return flag as DeploymentKind;
  const named = ((await call(to, 'GET', '')).answer.deployments as DeploymentSummary[]).filter((d) => d.name === name);
  const active = named.filter((d) => d.active);
  const kinds = [...new Set((activeFirst && active.length > 0 ? active : named).map((d) => d.kind))];
  if (kinds.length === 0) throw new UsageError(`nothing named "${name}" is deployed (see bcms-ext list)`);
  if (kinds.length > 1) {
    const named = kinds.map((kind) => `${kind === 'event' ? 'an' : 'a'} ${kind}`);
    throw new UsageError(`${named.slice(0, -1).join(', ')} and ${named[named.length - 1]} are named "${name}": add ${kinds.map((kind) => `--kind ${kind}`).join(' or ')}`);
  }
  return kinds[0] as DeploymentKind;
}

export async function runRollback(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { kind: 'string' });
  if (positionals.length !== 1) throw new UsageError(`rollback takes one name: bcms-ext rollback NAME [--kind ${KINDS}]`);
  const name = positionals[0] as string;
  const to = target(io, cwd);
  const kind = await kindOf(to, name, flags.kind, false);
  const { answer } = await call(to, 'POST', `/${kind}/${encodeURIComponent(name)}/rollback`);
  const back = answer.deployment as DeploymentSummary;
  // The hash as `list` shows it: versions alike (0.1.0 each time) are told apart by it.
  io.out(`Rolled back: ${back.kind} ${back.name} ${back.version} (${(back.contentSha256 ?? back.sha256).slice(0, 12)}) is live again.\n`);
  return 0;
}

export async function runUndeploy(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { kind: 'string' });
  if (positionals.length !== 1) throw new UsageError(`undeploy takes one name: bcms-ext undeploy NAME [--kind ${KINDS}]`);
  const name = positionals[0] as string;
  const to = target(io, cwd);
  const kind = await kindOf(to, name, flags.kind, true);
  const { answer } = await call(to, 'DELETE', `/${kind}/${encodeURIComponent(name)}`, undefined, { 404: 'See what is deployed: bcms-ext list.' });
  const gone = answer.undeployed as DeploymentSummary;
  io.out(`Undeployed: ${gone.kind} ${gone.name} ${gone.version} is no longer served.\n`);
  return 0;
}

/** Folders of a project that hold no sources: installed packages, build output, the bundles, its tests (never bundled). */
const NOT_SOURCES = new Set(['node_modules', 'dist', BUNDLE_DIR, '.git', 'test-output', 'test']);
const SOURCE = /\.(?:[cm]?[jt]sx?|vue|s?css|sass|html|json)$/;

/** A source file of the project (relative path) changed after `since` (ms), if any. */
function changedSince(root: string, since: number, dir = root): string | undefined {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (NOT_SOURCES.has(entry.name)) continue;
      const found = changedSince(root, since, full);
      if (found !== undefined) return found;
    } else if (entry.isFile() && SOURCE.test(entry.name) && entry.name !== 'package-lock.json' && fs.statSync(full).mtimeMs > since) {
      return path.relative(root, full).split(path.sep).join('/');
    }
  }
  return undefined;
}

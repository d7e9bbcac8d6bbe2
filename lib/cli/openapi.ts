import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, UsageError, type Io } from './_io';
import { runBundle } from './bundle';
import { BUNDLE_DIR } from './deploy';
import { readDotEnv } from './dotenv';
import { functionsProjectLayout, pluginBackendDir } from './layout';

export const OPENAPI_USAGE = `  openapi [--out FILE] [--url URL]          Write the OpenAPI 3.1 document. In a plugin or
                                            functions project: the project's (bundled, then loaded
                                            in a test service on an in-memory database). With --url,
                                            or outside a project: the running service's (BCMS_URL,
                                            else http://localhost:8080), with BCMS_TOKEN as its
                                            bearer token when set (a service whose openapi
                                            option is 'token'). To stdout, or to FILE.
`;

const DOCUMENT_PATH = '/api/extensions/openapi.json';

export async function runOpenapi(args: readonly string[], io: Io, cwd = process.cwd()): Promise<number> {
  const { positionals, flags } = parseArgs(args, { out: 'string', url: 'string' });
  if (positionals.length > 0) throw new UsageError(`openapi takes no file names: bcms-ext openapi [--out FILE] [--url URL]`);
  const url = flags.url as string | undefined;
  const inProject = pluginBackendDir(cwd) !== undefined || functionsProjectLayout(cwd) !== undefined;
  const env = { ...readDotEnv(cwd), ...io.env };
  const document = url !== undefined || !inProject ? await fromService(url ?? (env.BCMS_URL || 'http://localhost:8080'), env.BCMS_TOKEN || undefined, io) : await fromProject(cwd, io);
  if (document === undefined) return 1;
  const text = `${JSON.stringify(document, null, 2)}\n`;
  const out = flags.out as string | undefined;
  if (out === undefined) io.out(text);
  else {
    fs.writeFileSync(path.resolve(cwd, out), text);
    const operations = Object.values((document as { paths?: Record<string, object> }).paths ?? {}).reduce((sum, item) => sum + Object.keys(item).length, 0);
    io.err(`bcms-ext openapi: wrote ${out} (${operations} operation${operations === 1 ? '' : 's'})\n`);
  }
  return 0;
}

/** The running service's document; with `token` when one is set (a service that asks for one). */
async function fromService(base: string, token: string | undefined, io: Io): Promise<unknown> {
  // The service's mount prefix is kept: --url http://host/cms asks http://host/cms/api/extensions/openapi.json.
  let target: URL;
  try {
    const root = new URL(base);
    target = new URL(`${root.pathname.replace(/\/$/, '')}${DOCUMENT_PATH}`, root);
  } catch {
    throw new UsageError(`--url (or BCMS_URL) must be the service's URL, such as http://localhost:8080, got ${JSON.stringify(base)}`);
  }
  let response: Response;
  try {
    response = await fetch(target, token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    io.err(
      `bcms-ext openapi: could not reach ${target.origin}${cause ? ` (${cause})` : ''}.\nIs the service running there? Set BCMS_URL (or --url) to where it listens; in a project, leave --url out to describe the project itself.\n`,
    );
    return undefined;
  }
  if (response.status === 401 || response.status === 403) {
    io.err(
      `bcms-ext openapi: ${target.href} answered ${response.status}: the service serves its document to a signed-in user only (its openapi option is 'token').\n` +
        (token === undefined ? 'Set BCMS_TOKEN to a JWT of a role that holds READ.\n' : 'BCMS_TOKEN was refused: it must be a valid JWT of a role that holds READ.\n'),
    );
    return undefined;
  }
  if (!response.ok) {
    io.err(`bcms-ext openapi: ${target.href} answered ${response.status}.\nSet BCMS_URL (or --url) to a service that mounts bcms-extensions (0.1 or later serves the document).\n`);
    return undefined;
  }
  return response.json();
}

/** The project's document: its bundles, as `bcms-ext bundle` makes them, loaded in a test service. */
async function fromProject(cwd: string, io: Io): Promise<unknown> {
  // Bundling says what it does on stderr: stdout is the document's.
  const code = await runBundle([], { ...io, out: io.err }, cwd);
  if (code !== 0) return undefined;
  io.err('bcms-ext openapi: loading the bundles in a test service (an in-memory database)...\n');
  // Loaded here only: the other commands do not need PGlite.
  const { createTestService } = require('../testing') as typeof import('../testing');
  const project = JSON.parse(fs.readFileSync(path.join(cwd, 'package.json'), 'utf8')) as { name?: string; version?: string };
  const name = project.name ?? path.basename(cwd);
  // The document's info is the project's: its name, and its version when it has one.
  const info = { title: name, ...(typeof project.version === 'string' && project.version !== '' ? { version: project.version } : {}) };
  const service = await createTestService({}, { admin: { title: name }, openapi: { info } });
  try {
    await service.deploy(path.join(cwd, BUNDLE_DIR));
    return service.router.openapi();
  } finally {
    await service.close();
  }
}

import type { ServerResponse } from 'node:http';
import type { Request } from 'express';
import type { ContentStore } from '../db/store';
import { readRawBody } from '../http/body';
import { BcmsHttpError } from '../http/errors';
import { writeJson, writePreflight } from '../http/respond';
import type { Logger } from '../logger';
import { signedBodyOf } from '../security/caller';
import type { AccessTokenVerifier } from '../security/jwt';
import { isSignedRequest, SIGNATURE_CHALLENGE, type VerifySignedRequest } from '../security/signature';
import { JWTPermissionName, JWTRoleName, tokenAllows } from '../security/token';
import { DELIVERY_STATUSES, LIST_LIMIT, listEventHandlers, listJobs, type DeliveryStatus } from './listing';

export const EVENT_DELIVERIES_PATH = '/api/extensions/event-deliveries';
export const JOBS_PATH = '/api/extensions/jobs';
/** The paths these routes answer, for dispatch (beside the deployments' prefix). */
export const EVENT_LIST_PATHS: ReadonlySet<string> = new Set([EVENT_DELIVERIES_PATH, JOBS_PATH]);

const ALLOW = 'GET, HEAD, OPTIONS';
/** A GET carries no body: what a client sends anyway is read (its digest is signed) up to this much. */
const LIST_BODY_LIMIT = 1024;
/** Neither scheme sent: the 401 names both, so a client knows a deploy key works too. */
const BOTH_CHALLENGES = Object.freeze({ 'WWW-Authenticate': `Bearer, ${SIGNATURE_CHALLENGE['WWW-Authenticate']}` });
/** The roles that see what runs (the keys list's): their READ. */
const READERS = [JWTRoleName.SUDO, JWTRoleName.ADMIN];

/** The query parameters each path takes, beside `limit`. */
const NAMED: Readonly<Record<string, readonly string[]>> = {
  [EVENT_DELIVERIES_PATH]: ['limit', 'handler', 'status'],
  [JOBS_PATH]: ['limit', 'job'],
};

/**
 * `GET /api/extensions/event-deliveries` and `GET /api/extensions/jobs`: each event handler with
 * its recent deliveries, each job with its recent runs. For whoever may see what is deployed: a
 * request signed with a deploy key (as `bcms-ext` signs it), or a token whose SUDO or ADMIN role
 * holds READ (the shell's users).
 */
export function createEventListRoutes(deps: {
  verify: VerifySignedRequest;
  verifyAccessToken: AccessTokenVerifier;
  store: ContentStore;
  logger: Logger;
  bodyTimeoutMs?: number;
}): (req: Request, res: ServerResponse, pathname: string) => Promise<void> {
  const { verify, verifyAccessToken, store, logger, bodyTimeoutMs } = deps;
  const knex = store.database.knex;

  async function authorise(req: Request): Promise<void> {
    if (isSignedRequest(req)) {
      await verify(req, { deploy: true }, () => signedBodyOf(req, () => readRawBody(req, LIST_BODY_LIMIT, bodyTimeoutMs), logger));
      return;
    }
    // Who the user is (the app's, auth.fromRequest, then a bearer token): none at all names both schemes.
    const token = await verifyAccessToken(req).catch((error: unknown) => {
      throw error instanceof BcmsHttpError && error.code === 'TOKEN_MISSING' ? new BcmsHttpError('TOKEN_MISSING', undefined, BOTH_CHALLENGES) : error;
    });
    if (!tokenAllows(token.payload, READERS, JWTPermissionName.READ)) throw new BcmsHttpError('TOKEN_FORBIDDEN');
  }

  return async function serveEventLists(req, res, pathname) {
    const method = req.method as string;
    if (method === 'OPTIONS') return writePreflight(res, ALLOW);
    if (method !== 'GET' && method !== 'HEAD') throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${method} is not allowed here.`, { Allow: ALLOW });
    // The guard first, then the query, as every route checks the guard before what it is asked (docs/http.md).
    await authorise(req);
    const query = readQuery(req.url, NAMED[pathname] ?? []);
    const limit = query.limit ?? LIST_LIMIT.default;
    const body =
      pathname === JOBS_PATH
        ? { jobs: await store.run(() => listJobs(knex, { limit, ...(query.job === undefined ? {} : { job: query.job }) })) }
        : {
            handlers: await store.run(() =>
              listEventHandlers(knex, {
                limit,
                ...(query.handler === undefined ? {} : { handler: query.handler }),
                ...(query.status === undefined ? {} : { status: query.status as DeliveryStatus }),
              }),
            ),
          };
    res.setHeader('Cache-Control', 'no-store');
    writeJson(res, 200, JSON.stringify(body));
  };
}

/**
 * The list's query: each parameter once, `limit` a whole number from 0 to 200, `status` a
 * delivery's status. Anything else is a 400 that says what is taken, rather than a filter
 * silently not applied (`?hanlder=` listing every handler).
 */
export function readQuery(url: string, known: readonly string[]): { limit?: number; handler?: string; status?: string; job?: string } {
  const bad = (message: string) => new BcmsHttpError('BAD_REQUEST', message);
  const at = url.indexOf('?');
  const params = new URLSearchParams(at === -1 ? '' : url.slice(at + 1));
  const query: Record<string, string> = {};
  for (const [name, value] of params) {
    if (!known.includes(name)) throw bad(`Unknown query parameter "${name}": this route takes ${known.join(', ')}.`);
    if (Object.hasOwn(query, name)) throw bad(`Query parameter "${name}" is given twice: give it once.`);
    query[name] = value;
  }
  const { limit, status, ...names } = query;
  let count: number | undefined;
  if (limit !== undefined) {
    count = /^\d{1,3}$/.test(limit) ? Number(limit) : NaN;
    if (!(count >= 0 && count <= LIST_LIMIT.max)) throw bad(`limit must be a whole number from 0 to ${LIST_LIMIT.max}, got ${JSON.stringify(limit)}.`);
  }
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
    throw bad(`status must be one of ${DELIVERY_STATUSES.join(', ')}, got ${JSON.stringify(status)}.`);
  }
  for (const [name, value] of Object.entries(names)) if (value === '') throw bad(`${name} must name a ${name === 'job' ? 'job' : 'handler'}.`);
  return { ...names, ...(count === undefined ? {} : { limit: count }), ...(status === undefined ? {} : { status }) };
}

import type { Request, Response } from 'express';
import { BcmsHttpError } from '../../http/errors';
import type { Work } from '../../http/exchange';
import { writeJson, writePreflight } from '../../http/respond';
import { BCMS_CLIENT_CHALLENGE, clientSignatureQuery, type VerifyClientSignedRequest } from './signature';
import type { BcmsFunction, BcmsFunctionKeyAuth } from '../../function/types';

/** BCMS's path, which each BCMS client object asks before its first call. */
export const ACCESS_LIST_PATH = '/api/key/access/list';
const ACCESS_LIST_ALLOW = 'GET, OPTIONS';

/**
 * What the access list answers (BCMS's `BCMSApiKeyAccess`), in the shape of a key's `access`: there
 * are no templates to grant here; `plugins` are those the key lists.
 */
export type BcmsKeyAccess = BcmsFunctionKeyAuth['access'];

/**
 * Answers `GET /api/key/access/list` for a call signed the BCMS client's way (signed over `{}`):
 * the functions the key lists, then every other public function the router serves now (deployed
 * ones included), by name, as BCMS answers it, and the plugins the key lists. The client refuses
 * to call a function that is not on it.
 */
export function createAccessListServer(deps: {
  /** The functions live now (the app's own and the deployed). */
  functions: () => ReadonlyMap<string, BcmsFunction>;
  verify: VerifyClientSignedRequest;
  /** A body, if the GET has one (the client sends none), read as a function body is. */
  readBody: (req: Request) => Promise<Buffer>;
}): (req: Request, res: Response) => Work {
  const { functions, verify, readBody } = deps;

  return function serveAccessList(req, res) {
    if (req.method === 'OPTIONS') return writePreflight(res, ACCESS_LIST_ALLOW);
    if (req.method !== 'GET') throw new BcmsHttpError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here; use GET.`, { Allow: ACCESS_LIST_ALLOW });
    const query = clientSignatureQuery(req.url);
    if (query === undefined) {
      throw new BcmsHttpError(
        'SIGNATURE_REQUIRED',
        "The key's access list answers the BCMS client: sign with its query parameters key, nonce, timestamp and signature, with a key created with bcmsClient: true.",
        { ...BCMS_CLIENT_CHALLENGE },
      );
    }
    return verify(req, query, { keyAccess: true }, () => readBody(req)).then(({ auth }) => {
      const names = new Set(auth.key.functions);
      const publicNames = [...functions()].filter(([, definition]) => definition.config.public).map(([name]) => name);
      for (const name of publicNames.sort()) names.add(name);
      const access: BcmsKeyAccess = { templates: [], functions: [...names].map((name) => ({ name })), plugins: auth.key.plugins.map((name) => ({ name })) };
      writeJson(res, 200, JSON.stringify(access));
    });
  };
}

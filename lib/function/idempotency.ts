import { createHash, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Knex } from 'knex';
import type { ContentStore } from '../db/store';
import { RAW_BODY } from '../http/body';
import { BcmsHttpError } from '../http/errors';
import { errorBody, writeJson } from '../http/respond';
import type { Logger } from '../logger';
import { hasBearerToken } from '../security/jwt';
import type { UserIdentifier } from '../security/auth';
import type { JWT } from '../security/token';
import type { BcmsFunctionAuth } from './types';

/** Sent on an answer that is a stored outcome given again, not a new run. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';
const TABLE = 'bcms_idempotency_keys';
/** How long an outcome is given again: SECURITY.md. */
const WINDOW = "interval '24 hours'";
/** Rows past the window are purged at most this often, by a call that claims a key (no timer). */
const PURGE_EVERY_MS = 60 * 60 * 1000;
/** What a claim outlives its function's time-out by: the time to record the outcome. */
const LEASE_MARGIN_MS = 5_000;
const MAX_KEY_LENGTH = 255;

/**
 * The call's `Idempotency-Key`: undefined without one, else the key (the IETF draft's quoted form,
 * `"..."`, is taken without its quotes). Anything but 1 to 255 printable ASCII characters, sent
 * once, is 400 IDEMPOTENCY_KEY_INVALID: a key the client cannot have meant is refused, never
 * shortened or ignored.
 */
export function readIdempotencyKey(req: IncomingMessage): string | undefined {
  const header = req.headers['idempotency-key'];
  if (header === undefined) return undefined;
  if ((req.headersDistinct['idempotency-key']?.length ?? 1) > 1) throw invalidKey('The Idempotency-Key header was sent more than once: send it once.');
  let key = String(header).trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1);
  if (key.length === 0) throw invalidKey('The Idempotency-Key header is empty: send 1 to 255 printable ASCII characters (a UUID, say).');
  if (key.length > MAX_KEY_LENGTH) throw invalidKey(`The Idempotency-Key header has ${key.length} characters: send at most ${MAX_KEY_LENGTH}.`);
  if (!/^[\x20-\x7e]+$/.test(key)) throw invalidKey('The Idempotency-Key header holds a character that is not printable ASCII: send 1 to 255 printable ASCII characters.');
  return key;
}

function invalidKey(message: string): BcmsHttpError {
  return new BcmsHttpError('IDEMPOTENCY_KEY_INVALID', message);
}

/**
 * A function call's answer as the function server writes it: an outcome recorded under an
 * `Idempotency-Key` (its first run), or that outcome given again (`replayed`: with
 * `Idempotent-Replayed: true`). An error given again keeps an error's headers.
 */
export class FunctionAnswer {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly replayed: boolean,
  ) {}

  write(res: ServerResponse): void {
    // Exposed to browser scripts by the router's CORS (lib/http/cors.ts), as its other headers are.
    const headers: Record<string, string> = {};
    if (this.replayed) headers[REPLAYED_HEADER] = 'true';
    if (this.status === 401) headers['WWW-Authenticate'] = 'Bearer';
    writeJson(res, this.status, this.body, headers);
  }
}

/** The envelope of a handler's value, as `writeFunctionResult` writes it (an isolate's JSON included). */
function resultBody(value: unknown): string {
  const isolated = value as { resultBody?: () => string } | null;
  if (isolated !== null && typeof isolated === 'object' && typeof isolated.resultBody === 'function') return isolated.resultBody();
  return `{"success":true,"result":${JSON.stringify(value) ?? 'null'}}`;
}

/** Whose key it is: the API key that signed, the subject of the token, else `anonymous`. */
async function callerOf(req: IncomingMessage, auth: BcmsFunctionAuth | null, verifyAccessToken: UserIdentifier): Promise<string> {
  if (auth?.type === 'signature') return `key:${auth.key.id}`;
  if (auth?.type === 'jwt') return subjectOf(auth.accessToken);
  // A public function checks no credential; a valid bearer token, or the app's user, still keeps its user's keys apart.
  if (hasBearerToken(req) || verifyAccessToken.appUser !== undefined) {
    try {
      return subjectOf(await verifyAccessToken(req));
    } catch {
      // Not a token of this service's, nor a user of the app's: the call is anonymous, as the function takes it.
    }
  }
  return 'anonymous';
}

function subjectOf(token: JWT): string {
  const { sub, userId } = token.payload as { sub?: unknown; userId?: unknown };
  for (const id of [sub, userId]) if ((typeof id === 'string' && id !== '') || typeof id === 'number') return `user:${id}`;
  return 'anonymous';
}

/** SHA-256 of the body's bytes; of its JSON when a host parser took the bytes without keeping them. */
function bodyHashOf(req: IncomingMessage & { body?: unknown }): string {
  const kept = (req as { [RAW_BODY]?: Buffer })[RAW_BODY];
  const bytes = kept ?? (req.body === undefined ? '' : (JSON.stringify(req.body) ?? ''));
  return createHash('sha256').update(bytes).digest('hex');
}

interface Claimed {
  caller: string;
  name: string;
  key: string;
  claim: string;
}

/**
 * Idempotent function calls (SECURITY.md), remembered in the database so
 * that every instance on it answers alike. A call with a key claims (caller, function, key) before
 * its handler runs; the handler's outcome, a 2xx or a 4xx, is recorded and given again to the same
 * key, caller and body for 24 h. A 5xx (a time-out, a crash, an outage, an outcome unknown) is not:
 * the claim is released, and a retry runs the handler again. A claim whose outcome could not be
 * recorded (its instance died, or the database went away) lapses after the function's time-out.
 */
export class IdempotencyLedger {
  private readonly leaseMs: number;
  private nextPurge = 0;
  private purging: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    functionTimeoutMs: number,
    private readonly verifyAccessToken: UserIdentifier,
  ) {
    this.leaseMs = functionTimeoutMs + LEASE_MARGIN_MS;
  }

  /**
   * Runs `run` once for this key, caller and body, and resolves to its answer; or answers the
   * outcome recorded before, 422 IDEMPOTENCY_KEY_REUSED (another body), or 409
   * IDEMPOTENCY_KEY_IN_USE (the first call still runs).
   */
  async once(req: IncomingMessage, name: string, key: string, auth: BcmsFunctionAuth | null, run: () => Promise<unknown>): Promise<FunctionAnswer> {
    const caller = await callerOf(req, auth, this.verifyAccessToken);
    const claimed = await this.claim(caller, name, key, bodyHashOf(req));
    if (claimed instanceof FunctionAnswer) return claimed;
    let body: string;
    try {
      body = resultBody(await run());
    } catch (error) {
      const status = error instanceof BcmsHttpError ? error.status : 500;
      // The request id only ever shows in a 500's body, which is never recorded.
      if (status < 500) await this.record(claimed, status, errorBody(error as BcmsHttpError, 'function', ''));
      else await this.release(claimed);
      throw error;
    }
    await this.record(claimed, 200, body);
    return new FunctionAnswer(200, body, false);
  }

  /** Claims the key, or finds what the first call with it left. */
  private async claim(caller: string, name: string, key: string, bodyHash: string): Promise<Claimed | FunctionAnswer> {
    this.purgeNowAndThen();
    const claim = randomUUID();
    for (let attempt = 0; attempt < 3; attempt++) {
      const taken = await this.query((db) =>
        db.raw(
          `insert into ${TABLE} as k (caller, function_name, key, body_hash, claim, locked_until)
           values (?, ?, ?, ?, ?, clock_timestamp() + ?::double precision * interval '1 millisecond')
           on conflict (caller, function_name, key) do update
             set body_hash = excluded.body_hash, claim = excluded.claim, status = null, response = null,
                 created_at = clock_timestamp(), locked_until = excluded.locked_until
             where k.created_at <= clock_timestamp() - ${WINDOW}
                or (k.status is null and k.locked_until <= clock_timestamp() and k.body_hash = excluded.body_hash)
           returning claim`,
          [caller, name, key, bodyHash, claim, this.leaseMs],
        ),
      );
      if (rowsOf(taken).length > 0) return { caller, name, key, claim };
      const found = rowsOf(
        await this.query((db) =>
          db.raw(`select body_hash, status, response from ${TABLE} where caller = ? and function_name = ? and key = ? and created_at > clock_timestamp() - ${WINDOW}`, [caller, name, key]),
        ),
      )[0] as { body_hash: string; status: number | null; response: string | null } | undefined;
      if (found === undefined) continue; // released (or past its window) between the two: claim it again
      if (found.body_hash !== bodyHash)
        throw new BcmsHttpError('IDEMPOTENCY_KEY_REUSED', `This Idempotency-Key was used with another body for function "${name}" within 24 h: send a new key for a new request.`);
      if (found.status !== null) return new FunctionAnswer(found.status, found.response ?? '', true);
      break;
    }
    throw new BcmsHttpError('IDEMPOTENCY_KEY_IN_USE', undefined, { 'Retry-After': '1' });
  }

  /** The outcome, for the calls that repeat it; a failure to record is logged, and the caller still gets its answer. */
  private record(claimed: Claimed, status: number, response: string): Promise<void> {
    return this.settle(claimed, 'record its outcome', (db) =>
      db(TABLE).where({ caller: claimed.caller, function_name: claimed.name, key: claimed.key, claim: claimed.claim }).update({ status, response, locked_until: null }),
    );
  }

  /** A 5xx: the key is free again, so that a retry runs the handler. */
  private release(claimed: Claimed): Promise<void> {
    return this.settle(claimed, 'release it', (db) => db(TABLE).where({ caller: claimed.caller, function_name: claimed.name, key: claimed.key, claim: claimed.claim }).del());
  }

  private settle(claimed: Claimed, what: string, query: (db: Knex) => Promise<unknown>): Promise<void> {
    return this.store.run(query).then(
      () => {},
      (error: unknown) =>
        this.logger.warn(
          { err: error, function: claimed.name },
          `bcms-extensions: could not ${what} under its Idempotency-Key; a retry with the key gets 409 until the claim lapses (${this.leaseMs} ms), then runs it again`,
        ),
    );
  }

  /**
   * The ledger's own queries. Losing the connection during a claim leaves no handler's write
   * behind: DATABASE_UNAVAILABLE, whatever the claim's own outcome (a claim that was taken lapses).
   */
  private query<T>(query: (db: Knex) => Promise<T>): Promise<T> {
    return this.store.run(query).catch((error: unknown) => {
      throw error instanceof BcmsHttpError && error.code === 'DATABASE_OUTCOME_UNKNOWN' ? new BcmsHttpError('DATABASE_UNAVAILABLE') : error;
    });
  }

  /** Rows past the window: ignored by every claim, deleted at most once an hour, by a call (no timer keeps the process alive). */
  private purgeNowAndThen(): void {
    const now = Date.now();
    if (now < this.nextPurge) return;
    this.nextPurge = now + PURGE_EVERY_MS;
    this.purging = this.store
      .run((db) =>
        db(TABLE)
          .where('created_at', '<=', db.raw(`clock_timestamp() - ${WINDOW}`))
          .del(),
      )
      .then(
        () => {},
        (error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not purge old idempotency keys (tried again within the hour)'),
      );
  }

  /** Resolves once a purge under way is done, so that the database can close under nothing. */
  close(): Promise<void> {
    return this.purging;
  }
}

function rowsOf(result: unknown): unknown[] {
  return (result as { rows?: unknown[] }).rows ?? [];
}

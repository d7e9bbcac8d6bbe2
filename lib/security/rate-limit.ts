import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { Knex } from 'knex';
import type { ContentStore } from '../db/store';
import { BcmsHttpError } from '../http/errors';
import type { Logger } from '../logger';
import type { JWT } from './token';

export const RATE_LIMITS_TABLE = 'bcms_rate_limits';

/** At most `points` calls in each window of `seconds`. */
export interface RateLimit {
  points: number;
  seconds: number;
}

/**
 * The `rateLimit` option (docs/options.md; SECURITY.md, "Rate limits"): `key` counts the calls of one caller of a private
 * function (the API key that signed it, or the user of a bearer token), `ip` the calls of one client
 * address (`req.ip`, so Express's `trust proxy` decides which address that is). Off when unset.
 */
export interface RateLimitOptions {
  key?: RateLimit;
  ip?: RateLimit;
}

export type RateLimitKind = keyof RateLimitOptions;

/** Subjects refused until their window ends, remembered on this instance; past this many, the oldest are forgotten. */
const REFUSED_CACHE_SIZE = 10_000;
/** Windows that ended are deleted at most this often, by a call (no timer keeps the process alive). */
const PURGE_EVERY_MS = 60_000;

/**
 * Fixed windows counted in Postgres, so that every instance on the database shares the count: a
 * call adds one point to the row of (kind, subject, window) by one atomic upsert, and is refused
 * with 429 RATE_LIMITED once the row holds more than the limit's points. Windows are cut by the
 * database's clock, which every instance reads alike.
 *
 * A subject refused here stays refused on this instance until its window ends, without a query:
 * within a window its count only grows, so a flood costs one round trip per instance and window.
 * (A fixed window lets a client make up to twice its points across the boundary of two windows.)
 */
export class RateLimiter {
  private readonly refused = new Map<string, number>();
  private nextPurge = 0;
  private purging: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
    private readonly limits: Readonly<RateLimitOptions>,
  ) {}

  /** Whether calls are counted under `kind` at all. */
  has(kind: RateLimitKind): boolean {
    return this.limits[kind] !== undefined;
  }

  /**
   * Counts one call of `subject` under `kind`'s limit; rejects with 429 RATE_LIMITED (and
   * `Retry-After`) once its points in the window are spent, with 503 DATABASE_UNAVAILABLE when the
   * count cannot be reached (never a call let through uncounted).
   */
  async take(kind: RateLimitKind, subject: string): Promise<void> {
    const limit = this.limits[kind];
    if (limit === undefined) return;
    const id = `${kind}\n${subject}`;
    const until = this.refused.get(id);
    if (until !== undefined) {
      const left = until - Date.now();
      if (left > 0) throw limited(kind, limit, left);
      this.refused.delete(id);
    }
    const { points, remainingMs } = await this.store
      .run((db) => countCall(db, kind, subject, limit))
      .catch((error: unknown) => {
        // A count lost with its connection is no write of the caller's: the call was not made, plainly unavailable.
        throw error instanceof BcmsHttpError && error.code === 'DATABASE_OUTCOME_UNKNOWN' ? new BcmsHttpError('DATABASE_UNAVAILABLE') : error;
      });
    this.purgeNowAndThen();
    if (points <= limit.points) return;
    this.remember(id, Date.now() + remainingMs);
    throw limited(kind, limit, remainingMs);
  }

  private remember(id: string, until: number): void {
    if (this.refused.size >= REFUSED_CACHE_SIZE) {
      const now = Date.now();
      for (const [other, end] of this.refused) if (end <= now) this.refused.delete(other);
      // Still full: the oldest refusal goes (its subject's next call asks the database again).
      if (this.refused.size >= REFUSED_CACHE_SIZE) this.refused.delete(this.refused.keys().next().value as string);
    }
    this.refused.set(id, until);
  }

  /** Windows that ended: deleted at most once a minute, after a counted call, as the signature ledger purges. */
  private purgeNowAndThen(): void {
    const now = Date.now();
    if (now < this.nextPurge) return;
    this.nextPurge = now + PURGE_EVERY_MS;
    this.purging = this.store
      .run((db) => db(RATE_LIMITS_TABLE).where('expires_at', '<', db.raw('clock_timestamp()')).del())
      .then(
        () => {},
        (error: unknown) => this.logger.warn({ err: error }, 'bcms-extensions: could not purge ended rate-limit windows (tried again within the minute)'),
      );
  }

  /** Resolves once a purge under way is done, so that the database can close under nothing. */
  close(): Promise<void> {
    return this.purging;
  }
}

/** One more point for (kind, subject) in the window now under way; its total, and how long the window has left. */
async function countCall(db: Knex, kind: RateLimitKind, subject: string, limit: RateLimit): Promise<{ points: number; remainingMs: number }> {
  const result = (await db.raw(
    `insert into ${RATE_LIMITS_TABLE} as r (kind, subject, window_start, points, expires_at)
     select ?, ?, w.start, 1, w.start + ?::int * interval '1 second'
     from (select to_timestamp(floor(extract(epoch from clock_timestamp()) / ?::int) * ?::int) as start) as w
     on conflict (kind, subject, window_start) do update set points = r.points + 1
     returning r.points, extract(epoch from r.expires_at - clock_timestamp()) * 1000 as remaining_ms`,
    [kind, subject, limit.seconds, limit.seconds, limit.seconds],
  )) as { rows: { points: number; remaining_ms: string | number }[] };
  const row = result.rows[0] as { points: number; remaining_ms: string | number };
  return { points: Number(row.points), remainingMs: Math.max(0, Number(row.remaining_ms)) };
}

/** The 429, with `Retry-After` in whole seconds until the window ends (at least 1), readable by a browser script. */
function limited(kind: RateLimitKind, limit: RateLimit, remainingMs: number): BcmsHttpError {
  const seconds = Math.max(1, Math.ceil(remainingMs / 1000));
  const who = kind === 'key' ? 'This caller' : 'This address';
  return new BcmsHttpError('RATE_LIMITED', `${who} made more than ${limit.points} calls in ${limit.seconds} s: retry in ${seconds} s.`, {
    'Retry-After': String(seconds),
  });
}

/** Who a bearer token's call counts as under `key`: its user (`sub`, else BCMS's `userId`), else the token's own claims. */
export function tokenSubject(token: JWT): string {
  const { sub, userId } = token.payload as { sub?: unknown; userId?: unknown };
  for (const id of [sub, userId]) if ((typeof id === 'string' && id !== '') || typeof id === 'number') return `user:${id}`;
  return `token:${createHash('sha256').update(JSON.stringify(token.payload)).digest('hex').slice(0, 32)}`;
}

/** The address a call counts as under `ip`: `req.ip`, which honours Express's `trust proxy`. */
export function clientAddress(req: Request): string {
  return req.ip ?? req.socket?.remoteAddress ?? 'unknown';
}

/** What a router's parts call, from the `rateLimit` option: each hook unset when its kind is not limited. */
export interface RateLimits {
  /** Counts a call of a private function's caller (`key:<id>`, `user:<id>`) under `rateLimit.key`. */
  limitKey?: (subject: string) => Promise<void>;
  /** Counts a function call of the request's address under `rateLimit.ip`. */
  limitIp?: (req: Request) => Promise<void>;
  /** Whether any limit is on. */
  on: boolean;
  /** Resolves once a purge under way is done. */
  close(): Promise<void>;
}

export function createRateLimits(store: ContentStore, logger: Logger, option: Readonly<RateLimitOptions> | undefined): RateLimits {
  if (option === undefined) return { on: false, close: () => Promise.resolve() };
  const limiter = new RateLimiter(store, logger, option);
  return {
    on: true,
    ...(limiter.has('key') ? { limitKey: (subject: string) => limiter.take('key', subject) } : {}),
    ...(limiter.has('ip') ? { limitIp: (req: Request) => limiter.take('ip', clientAddress(req)) } : {}),
    close: () => limiter.close(),
  };
}

/** Throws the TypeError that says what `rateLimit` takes; the option as it is otherwise (unknown keys refused, positive integers). */
export function checkRateLimitOption(value: unknown): Readonly<RateLimitOptions> | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new TypeError('option rateLimit must be an object { key?, ip? }');
  const resolved: RateLimitOptions = {};
  for (const [kind, limit] of Object.entries(value)) {
    if (kind !== 'key' && kind !== 'ip') throw new TypeError(`unknown option "rateLimit.${kind}" (known: rateLimit.key, rateLimit.ip)`);
    if (limit === undefined) continue;
    if (limit === null || typeof limit !== 'object' || Array.isArray(limit)) throw new TypeError(`option rateLimit.${kind} must be an object { points, seconds }`);
    for (const name of Object.keys(limit)) {
      if (name !== 'points' && name !== 'seconds') throw new TypeError(`unknown option "rateLimit.${kind}.${name}" (known: rateLimit.${kind}.points, rateLimit.${kind}.seconds)`);
    }
    const { points, seconds } = limit as Record<string, unknown>;
    for (const [name, number] of [
      ['points', points],
      ['seconds', seconds],
    ] as const) {
      // A window of more than a day is no rate limit; Postgres's int takes the rest.
      const most = name === 'seconds' ? 86_400 : 2_147_483_647;
      if (!Number.isInteger(number) || (number as number) <= 0 || (number as number) > most) {
        throw new TypeError(`option rateLimit.${kind}.${name} must be a positive integer${name === 'seconds' ? ' of seconds, at most 86400' : ''}, got ${String(number)}`);
      }
    }
    resolved[kind] = Object.freeze({ points: points as number, seconds: seconds as number });
  }
  return Object.freeze(resolved);
}

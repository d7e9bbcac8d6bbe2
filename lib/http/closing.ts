import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { BcmsHttpError } from './errors';

/** How often `close` looks whether the answers under way have begun. */
const POLL_MS = 20;

/**
 * The requests a router has taken and not yet answered, and whether it still takes new ones. Once
 * `router.close()` begins, a new request is answered 503 SERVICE_CLOSING (with `Connection: close`,
 * so that a client's next request opens a connection, to an instance that is up), and the close
 * waits for the requests under way to be answered before it ends isolates and closes the database
 * under them: none of them meets a closed pool (a 500) on its way.
 */
export class Admission {
  private closing = false;
  private readonly open = new Set<ServerResponse>();

  /** Takes a request, or throws SERVICE_CLOSING once the router is closing. */
  admit(res: ServerResponse): void {
    if (this.closing) throw new BcmsHttpError('SERVICE_CLOSING', undefined, { Connection: 'close' });
    this.open.add(res);
  }

  /** The request was answered (or its client went away). */
  done(res: ServerResponse): void {
    this.open.delete(res);
  }

  /**
   * Stops taking requests, and resolves once every request taken has begun its answer: an answer
   * that has begun (its headers sent) needs nothing of the router's any more, save a stream that
   * lasts (the SDK's event stream), which the host's server ends. Resolves to false when some were
   * still unanswered after `limitMs` (every request's own time-outs make that rare).
   */
  async close(limitMs: number): Promise<boolean> {
    this.closing = true;
    const until = Date.now() + limitMs;
    while (this.waiting()) {
      if (Date.now() >= until) return false;
      await sleep(POLL_MS);
    }
    return true;
  }

  private waiting(): boolean {
    for (const res of this.open) if (!res.headersSent) return true;
    return false;
  }
}

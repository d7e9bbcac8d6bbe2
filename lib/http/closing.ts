import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logger';
import { BcmsHttpError } from './errors';

/** How often `close` looks whether the answers under way have begun. */
const POLL_MS = 20;
/** What `close` waits past the longest a request may take, for its answer to be written. */
const MARGIN_MS = 5_000;

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

  constructor(
    private readonly logger: Logger,
    /** The longest a request may take: its body (`bodyTimeoutMs`), then its handler (the longer time-out). */
    private readonly longestMs: number,
  ) {}

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
   * lasts (the SDK's event stream), which the host's server ends. Past the longest a request may
   * take (its own time-outs make that rare), it resolves all the same, and says so.
   */
  async close(): Promise<void> {
    this.closing = true;
    const until = Date.now() + this.longestMs + MARGIN_MS;
    while (this.waiting()) {
      if (Date.now() >= until) {
        this.logger.warn({ unanswered: this.open.size }, 'bcms-extensions: closing with requests still unanswered');
        return;
      }
      await sleep(POLL_MS);
    }
  }

  private waiting(): boolean {
    for (const res of this.open) if (!res.headersSent) return true;
    return false;
  }
}

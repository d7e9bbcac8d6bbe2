import { performance } from 'node:perf_hooks';
import type { Logger } from '../logger';

/** Log lines an extension may write a second, over all its isolates (its `useLogger` lines and its output lines). */
export const LOG_LINES_PER_SECOND = 1000;

interface Second {
  /** When it began (ms, performance.now()). */
  start: number;
  lines: number;
  dropped: number;
  /** Set at the first line dropped: reports the count once the second is over. */
  report: NodeJS.Timeout | undefined;
}

/**
 * How many log lines each extension has left this second. An isolate is not trusted: one that
 * writes lines as fast as it can would fill the service's log (and its disk, and its log shipper)
 * at the rate of a loop. Past the budget, lines are dropped, counted, and the count is logged once
 * the second is over, in one line.
 */
export class LogBudget {
  private readonly seconds = new Map<string, Second>();

  constructor(
    private readonly logger: Logger,
    private readonly perSecond = LOG_LINES_PER_SECOND,
  ) {}

  /** Whether `extension` may write one more line now; false: it is dropped (and counted). */
  take(extension: string): boolean {
    const now = performance.now();
    let second = this.seconds.get(extension);
    if (second === undefined || (now - second.start >= 1000 && second.report === undefined)) {
      second = { start: now, lines: 0, dropped: 0, report: undefined };
      this.seconds.set(extension, second);
    }
    if (second.lines < this.perSecond) {
      second.lines++;
      return true;
    }
    if (now - second.start >= 1000) {
      // The report is due and its timer has not fired yet (a busy loop): a new second all the same.
      this.report(extension, second);
      return this.take(extension);
    }
    second.dropped++;
    if (second.report === undefined) {
      const due = second;
      due.report = setTimeout(() => this.report(extension, due), Math.max(1, Math.ceil(due.start + 1000 - now)));
      due.report.unref();
    }
    return false;
  }

  private report(extension: string, second: Second): void {
    clearTimeout(second.report);
    second.report = undefined;
    if (this.seconds.get(extension) === second) this.seconds.delete(extension);
    if (second.dropped === 0) return;
    this.logger.warn(
      { extension, dropped: second.dropped, linesPerSecond: this.perSecond },
      `bcms-extensions: ${second.dropped} log lines of ${extension} were dropped (past ${this.perSecond} a second)`,
    );
    second.dropped = 0;
  }
}

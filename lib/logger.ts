import pino from 'pino';
import SonicBoom from 'sonic-boom';

/**
 * The logging surface the router needs: any pino logger fits, and so does any object with these
 * methods (`(object, message)` as pino takes them).
 */
export interface Logger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
  debug(object: object, message?: string): void;
}

/** Signals on which the default logger writes out what it holds before the process ends. */
const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/**
 * The lines of one turn of the event loop, written to stdout in one `write` when the turn ends
 * (`setImmediate`) rather than one `write` per line: a server under load answers dozens of
 * requests per turn, and a system call per log line was the largest cost of a plugin request
 * after Express itself. Nothing waits longer than that turn, and nothing is lost on the way out:
 * the buffer is written synchronously on `exit` and on SIGTERM, SIGINT and SIGHUP (a signal with no
 * other listener is then raised again, so the process still ends as it would have).
 */
class TurnBuffer {
  private pending = '';
  private scheduled = false;
  private readonly out: SonicBoom;

  constructor(fd: number) {
    // sonic-boom's synchronous mode writes at once and retries EAGAIN on a non-blocking pipe.
    this.out = new SonicBoom({ fd, sync: true });
    process.on('exit', () => this.flush());
    for (const signal of SIGNALS) {
      process.once(signal, () => {
        this.flush();
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      });
    }
  }

  write(line: string): boolean {
    this.pending += line;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    return true;
  }

  flush(): void {
    this.scheduled = false;
    if (this.pending === '') return;
    const lines = this.pending;
    this.pending = '';
    this.out.write(lines);
  }
}

let stdoutLines: TurnBuffer | undefined;

/** The router's default logger: pino, named `bcms-extensions`, writing to stdout a turn at a time. */
export function createDefaultLogger(): Logger {
  stdoutLines ??= new TurnBuffer(1);
  return pino({ name: 'bcms-extensions' }, stdoutLines);
}

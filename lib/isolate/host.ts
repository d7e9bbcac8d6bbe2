/**
 * The service's side of one isolate: a child process of its own (lib/isolate/child.ts) running one
 * extension in its sandbox (lib/isolate/sandbox.ts), with its own heap limit, its own globals and
 * only `extensionEnv` for an environment, reached through a framed channel (lib/isolate/channel.ts).
 * It loads the extension, runs calls within their time-outs and answers what the extension asks;
 * an extension's pool of them is lib/isolate/pool.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Duplex, Readable } from 'node:stream';
import type { Request } from 'express';
import { BcmsHttpError, errorCodes, type ErrorCode } from '../http/errors';
import type { Logger } from '../logger';
import type { Metrics } from '../metrics';
import type { IdentifyPluginKey } from '../security/caller';
import type { AccessTokenVerifier } from '../security/jwt';
import { IsolateAnswer, writableHeader } from './answer';
import type { AnswerHeaderCheck } from './answer-headers';
import { Channel, CHANNEL_FD, CLOSE_FDS } from './channel';
import type { DatabaseBridge } from './database-bridge';
import type { LogBudget } from './log-budget';
import type { Ask, ExtensionKind, ExtensionSource, FromIsolate, ToIsolate, WireExtension } from './protocol';
import { isolateCommand, moduleRoot, packageReadables, permissionsFor, stripSetIdBits, type ResolvedPermissionsOption, type SandboxChoice } from './sandbox';
import { treeUsage } from './cpu';
import { Waiting } from './waiting';
import { PACKAGE_ROOT } from '../manifest';
import { childSpan, tracing } from '../tracing';
import { answerBytes, answerOverLimit, fromWire, isolateFrameLimit, LOG_OBJECT_MAX_BYTES, logObjectNote, Outbox, toWire, errorToWire, unsignedToken, type WireError } from './wire';

/** The compiled child (dist/isolate), from dist or lib alike: a child process runs JavaScript only. */
const CHILD = path.join(PACKAGE_ROOT, 'dist', 'isolate', 'child.js');
/** What every isolate reads of this package and its dependencies (lib/isolate/sandbox.ts). */
let packageFiles: string[] | undefined;

/** What isolates need of the service; one per router. */
export interface IsolateServices {
  logger: Logger;
  bridge: DatabaseBridge;
  verifyAccessToken: AccessTokenVerifier;
  verifyPluginKey: IdentifyPluginKey;
  /** Heap limit of each isolate (`extensionMemoryMb`). */
  memoryMb: number;
  /** The whole environment of extension code (`extensionEnv`). */
  env: Readonly<Record<string, string>>;
  /** Limit of loading an extension, its top-level code and setups included (`loadTimeoutMs`: CPU time, see Isolate.load). */
  loadTimeoutMs: number;
  /** Aborted when the service closes: a load under way is ended then rather than waited for. */
  closing: AbortSignal;
  /** `files.dir`: each extension's isolates run in a folder of it (their cwd, where a layer's files land). */
  filesDir: string;
  /** The layers' isolate modules, each run in the isolate before extension code (lib/layer.ts). */
  layerModules: string[];
  /** An event a layer's code in the isolate sent, for the router's `events` (names the layers allow, others dropped). */
  publish(name: string, data: unknown): void;
  /** The sandbox isolates run in (`sandbox`), and what each extension may do in it (`extensionPermissions`). */
  sandbox: SandboxChoice;
  permissions: ResolvedPermissionsOption;
  /** The largest answer taken from an isolate, in bytes (`extensionAnswerMb`). */
  answerLimit: number;
  /** Each extension's log lines left this second. */
  logBudget: LogBudget;
  /** What an isolate's answers (and errors) may not set: headers that act on the service's whole origin. */
  answerHeaders: AnswerHeaderCheck;
  /** Isolates started and crashed (the `metrics` option). */
  metrics: Metrics;
}

/**
 * An extension's folder of the files directory: a plugin's is named after it (`<files.dir>/<plugin>`),
 * a function's is under `.functions/`, an event's under `.events/`, a job's under `.jobs/` (no plugin
 * name starts with a dot, and an event may share a function's name).
 */
export function extensionFolder(filesDir: string, kind: ExtensionKind, name: string): string {
  const folder = name === '' ? '.registry' : kind === 'plugin' ? name : path.join(`.${kind}s`, name);
  return path.join(filesDir, folder);
}

/** Why a bundle or module could not be taken up: 422 BUNDLE_LOAD_FAILED or BUNDLE_LOAD_TIMEOUT. */
export class ExtensionLoadError extends Error {
  constructor(
    readonly code: 'BUNDLE_LOAD_FAILED' | 'BUNDLE_LOAD_TIMEOUT',
    message: string,
    /**
     * Whether another try may load it: its isolate died while loading (killed for memory the
     * machine lacked, say). Code that threw, or ran past the limit (CPU time, given up to
     * LOAD_WALL_FACTOR times it on a busy machine), fails again.
     */
    readonly transient = false,
  ) {
    super(message);
    this.name = 'ExtensionLoadError';
  }
}

type CallMessage = Extract<ToIsolate, { t: 'plugin' | 'function' | 'handle-event' | 'run-job' }>;
/** A call as its caller writes it: the isolate numbers it. */
export type NewCall =
  | Omit<Extract<CallMessage, { t: 'plugin' }>, 'id'>
  | Omit<Extract<CallMessage, { t: 'function' }>, 'id'>
  | Omit<Extract<CallMessage, { t: 'handle-event' }>, 'id'>
  | Omit<Extract<CallMessage, { t: 'run-job' }>, 'id'>;

/** A call waiting for its isolate's answer. Once settled it holds nothing, its request neither (see Waiting). */
class PendingCall extends Waiting<IsolateAnswer> {
  constructor(
    resolve: (answer: IsolateAnswer) => void,
    reject: (error: unknown) => void,
    /** The request it answers, while it waits: the service's verdicts on its token or key (`serve`) are about it. */
    public request: Request | undefined,
    readonly plugin: string | undefined,
    /** When it runs past its time-out (ms, performance.now()), and what it is then answered. */
    readonly deadline: number,
    readonly timeoutMs: number,
    readonly timeout: () => Error,
  ) {
    super(resolve, reject);
  }

  /** The service's verdicts on its token and its key, once each: an isolate asking again gets the same (and the pool is asked once). */
  verdicts: { token?: Promise<unknown>; key?: Promise<unknown> } = {};

  protected override forget(): void {
    super.forget();
    this.request = undefined;
    this.verdicts = {};
  }
}

const LEVELS = new Set(['info', 'warn', 'error', 'debug']);

/** One child process running one extension (its pool, lib/isolate/pool.ts, starts and replaces them). */
export class Isolate {
  private readonly child: ChildProcess;
  /** Its channel (lib/isolate/channel.ts), on the pipe at its fd 3. */
  private readonly channel: Channel<FromIsolate[], ToIsolate[]>;
  private readonly calls = new Map<number, PendingCall>();
  private nextCall = 0;
  /** One timer for every call's time-out (see `watch`), rather than one a call. */
  private watching: NodeJS.Timeout | undefined;
  private alive = true;
  /** The service ended it (a time-out, a replacement, an idle one): not a failure of the extension's. */
  endedByService = false;
  /** When it finished loading (ms, performance.now()); undefined while loading. */
  loadedAt: number | undefined;
  /** Its questions the service is answering now. */
  private asking = 0;
  /** Whether it died with calls in flight: a handler's crash, rather than the extension's own. */
  diedAnswering = false;
  /** When it last took or answered a call (ms, performance.now()). */
  lastActive = performance.now();
  private loading: { resolve(extension: WireExtension): void; reject(error: unknown): void } | undefined;
  /** The last lines it wrote to stderr: the reason it died, often. */
  private readonly stderr: string[] = [];
  /** Settles once the process is gone. */
  readonly gone: Promise<string>;
  /** Its folder of files.dir, the one it may write. */
  private readonly folder: string;

  constructor(
    private readonly label: string,
    private readonly services: IsolateServices,
    /** Which extension it runs: its permissions are its name's, and it reads its own code. */
    what: { kind: ExtensionKind; name: string; source: ExtensionSource },
    private readonly onGone: (isolate: Isolate, reason: string) => void,
  ) {
    // Its working directory, and the one folder it may write: the extension's own of the files directory.
    const cwd = extensionFolder(services.filesDir, what.kind, what.name);
    // Owner only, files.dir too where it is made here: a file an isolate marks setuid (it owns its
    // folder's files, as the service's user) is out of other local users' reach, and its marks are
    // taken off when it ends (lib/isolate/sandbox.ts stripSetIdBits).
    fs.mkdirSync(cwd, { recursive: true, mode: 0o700 });
    fs.chmodSync(cwd, 0o700);
    this.folder = cwd;
    services.metrics.isolateStarted(what.kind);
    packageFiles ??= packageReadables(PACKAGE_ROOT);
    // A registry module (isolate: 'all') is read from its package's folder, with what it requires.
    const readable = what.source.type === 'module' ? [...packageFiles, moduleRoot(what.source.file)] : packageFiles;
    const { command, args } = isolateCommand(
      services.sandbox,
      { execArgv: [`--max-old-space-size=${services.memoryMb}`], script: CHILD, scriptArgs: [...inheritedFds(), ...services.layerModules] },
      { readable, writable: cwd, env: services.env },
      permissionsFor(services.permissions, what.name),
    );
    // No IPC channel (Node's buffers a message until its newline, with no cap): the channel is a
    // pipe of our own at fd 3, whose frames have a cap (lib/isolate/channel.ts).
    this.child = spawn(command, args, {
      cwd,
      env: { ...services.env },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      // Its own process group (and, sandboxed, its own PID namespace): ending it ends whatever it started.
      detached: true,
    });
    lowerPriority(this.child.pid);
    // Never what keeps the service's process alive: its requests and timers do that.
    this.child.unref();
    const pipe = this.child.stdio[3] as Duplex & { unref?(): void };
    pipe.unref?.();
    this.channel = new Channel<FromIsolate[], ToIsolate[]>(pipe, {
      maxFrameBytes: isolateFrameLimit(services.answerLimit),
      // What it leaves unread piles up here: past this, it is not reading, and it is ended.
      maxBacklogBytes: MAX_UNREAD_BYTES,
      // Its messages take at most a fifth of the service's thread: one that sends large frames
      // back to back waits, and the service's other requests are answered meanwhile.
      busyMsPerSecond: ISOLATE_BUSY_MS_PER_SECOND,
      receive: (batch) => {
        if (Array.isArray(batch)) for (const message of batch) this.receive(message);
      },
      fault: (reason) => this.broke(reason),
    });
    this.forward(this.child.stdout, 'info', false);
    this.forward(this.child.stderr, 'warn', true);
    this.gone = new Promise((resolve) => {
      this.child.once('error', (error) => {
        this.stderr.push(error.message);
        // Never started (no bubblewrap or Node where it was, no process left): no exit will come.
        if (this.child.pid === undefined) resolve(this.died(null, null));
        else this.end(false);
      });
      this.child.once('exit', (code, signal) => {
        // stderr may still hold the last words: a moment for them.
        setTimeout(() => resolve(this.died(code, signal)), 50).unref();
      });
    });
  }

  get inFlight(): number {
    return this.calls.size;
  }
  get isAlive(): boolean {
    return this.alive;
  }

  /**
   * Loads the extension; rejects with an ExtensionLoadError, and the isolate is ended. The limit
   * is CPU time where the kernel tells it: a load that wants a core a busy machine does not give
   * it has until it used the limit (up to LOAD_WALL_FACTOR times it in wall time), so a load
   * average of 20 does not refuse a three-line function; one that waits on nothing is ended at
   * the limit, as before.
   */
  load(kind: ExtensionKind, name: string, source: ExtensionSource): Promise<WireExtension> {
    const limit = this.services.loadTimeoutMs;
    const started = performance.now();
    const { closing } = this.services;
    let stop = (): void => {};
    return new Promise<WireExtension>((resolve, reject) => {
      let timer: NodeJS.Timeout;
      stop = (): void => {
        clearTimeout(timer);
        this.loading = undefined;
        // Not the bundle's fault: a deploy check cut off by the close is answered 503, and nothing is recorded.
        reject(new BcmsHttpError('SERVICE_CLOSING'));
      };
      if (closing.aborted) return stop();
      closing.addEventListener('abort', stop, { once: true });
      const check = (): void => {
        const usage = treeUsage(this.child.pid);
        if (usage?.runnable && usage.cpuMs < limit && performance.now() - started < limit * LOAD_WALL_FACTOR) {
          timer = setTimeout(check, 1000);
          return;
        }
        this.loading = undefined;
        reject(new ExtensionLoadError('BUNDLE_LOAD_TIMEOUT', `it did not finish loading within ${limit} ms (its top-level code, a factory or a setup runs too long)`));
        this.end();
      };
      timer = setTimeout(check, limit);
      this.loading = {
        resolve: (extension) => {
          clearTimeout(timer);
          this.loadedAt = performance.now();
          resolve(extension);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.post({ t: 'load', kind, name, source, answerLimit: this.services.answerLimit });
    })
      .catch((error: unknown) => {
        this.end();
        throw error;
      })
      .finally(() => closing.removeEventListener('abort', stop));
  }

  /**
   * Runs a call; rejects with `timeout()` past `timeoutMs` (and the isolate is ended), or
   * EXTENSION_CRASHED. `message` is the caller's own, made for this call: it is numbered here.
   * `request`: the HTTP request it answers; none for an event or a job (whose code then cannot
   * ask for a token's or a key's verdict).
   */
  call(message: NewCall, request: Request | undefined, plugin: string | undefined, timeoutMs: number, timeout: () => Error): Promise<IsolateAnswer> {
    if (!this.alive) return Promise.reject(crashed('The extension is not running.'));
    // A span of the request's, when it is traced (lib/tracing.ts).
    if (!tracing()) return this.send(message, request, plugin, timeoutMs, timeout);
    return childSpan('bcms isolate call', { 'bcms.extension': this.label }, () => this.send(message, request, plugin, timeoutMs, timeout));
  }

  private send(message: NewCall, request: Request | undefined, plugin: string | undefined, timeoutMs: number, timeout: () => Error): Promise<IsolateAnswer> {
    const id = ++this.nextCall;
    const now = performance.now();
    this.lastActive = now;
    (message as CallMessage).id = id;
    return new Promise<IsolateAnswer>((resolve, reject) => {
      this.calls.set(id, new PendingCall(resolve, reject, request, plugin, now + timeoutMs, timeoutMs, timeout));
      this.watching ??= setTimeout(this.watch, timeoutMs);
      this.post(message as CallMessage);
    });
  }

  /**
   * The calls' time-outs, on one timer: it fires at the earliest deadline it knew of, answers
   * every call past its own, and is set again for the earliest left. A call past its time-out
   * ends the isolate (the others then fail as crashed, as its end would have it anyway).
   */
  private readonly watch = (): void => {
    this.watching = undefined;
    const now = performance.now();
    let next = Infinity;
    let late = false;
    for (const [id, call] of this.calls) {
      if (call.deadline > now) {
        next = Math.min(next, call.deadline);
        continue;
      }
      late = true;
      this.take(id);
      call.reject(call.timeout());
      this.services.logger.warn({ extension: this.label, timeoutMs: call.timeoutMs }, 'bcms-extensions: a call ran past its time-out; its isolate is ended and replaced');
    }
    if (late) this.end();
    else if (next !== Infinity) this.watching = setTimeout(this.watch, Math.max(1, Math.ceil(next - now)));
  };

  /**
   * Ends the process and everything it started. `byService` false: for something the extension
   * did (it broke its channel's rules), which counts toward a crash loop as its own end would.
   */
  end(byService = true): void {
    if (!this.alive) return;
    this.alive = false;
    this.endedByService = byService;
    try {
      process.kill(-(this.child.pid as number), 'SIGKILL');
    } catch {
      this.child.kill('SIGKILL');
    }
  }

  /** It broke the rules of its channel (a frame past the cap, not JSON, too many questions): it is ended. */
  private broke(reason: string): void {
    this.stderr.push(`the channel was closed: ${reason}`);
    this.services.logger.error({ extension: this.label, reason }, 'bcms-extensions: an isolate broke the channel to the service; it is ended');
    this.end(false);
  }

  private post(message: ToIsolate): void {
    this.outbox.send(message);
  }

  /** A turn's messages, in one write. */
  private readonly outbox = new Outbox<ToIsolate>((batch) => {
    if (!this.alive) return;
    try {
      this.channel.send(batch);
    } catch (error) {
      this.stderr.push(`could not send to the isolate: ${(error as Error).message}`);
      this.end();
    }
  });

  private died(code: number | null, signal: NodeJS.Signals | null): string {
    this.alive = false;
    stripSetIdBits(this.services.sandbox, this.folder);
    // A process it started may still hold its end of the channel: nothing more is read from it.
    this.channel.close();
    const tail = this.stderr.join('\n');
    const reason = /heap limit|heap out of memory/i.test(tail)
      ? `it passed its heap limit of ${this.services.memoryMb} MB`
      : signal !== null
        ? `it was ended (${signal})`
        : `it exited with code ${code ?? 'unknown'}`;
    // Node writes an uncaught error as `TypeError: message` after the source line that threw.
    const firstError = this.stderr.find((line) => /^[A-Z]\w*(Error|Exception)\b[^:]*:/.test(line)) ?? '';
    this.diedAnswering = this.calls.size > 0;
    for (const id of [...this.calls.keys()]) this.take(id)?.reject(crashed());
    if (this.loading !== undefined) {
      const loading = this.loading;
      this.loading = undefined;
      loading.reject(new ExtensionLoadError('BUNDLE_LOAD_FAILED', `its isolate ended while loading: ${reason}${firstError === '' ? '' : ` (${firstError.trim()})`}`, true));
    }
    void this.services.bridge.releaseAll(this);
    this.onGone(this, firstError === '' ? reason : `${reason}: ${firstError.trim().slice(0, 500)}`);
    return reason;
  }

  private receive(message: FromIsolate): void {
    if (message === null || typeof message !== 'object') return;
    switch (message.t) {
      case 'done': {
        const call = this.take(message.id);
        if (call === undefined) return;
        // Checked in the isolate before it sent it, and here again: the isolate's word is not trusted.
        const answer = message.answer ?? {};
        if (answerOverLimit(answer, this.services.answerLimit)) {
          this.services.logger.warn({ extension: this.label, bytes: answerBytes(answer), limit: this.services.answerLimit }, 'bcms-extensions: an answer past extensionAnswerMb was refused');
          call.reject(new BcmsHttpError('EXTENSION_ANSWER_TOO_LARGE'));
          return;
        }
        call.resolve(new IsolateAnswer(message.answer, this.label, this.services.answerHeaders));
        return;
      }
      case 'failed': {
        const call = this.take(message.id);
        call?.reject(fromIsolate(message.error, this.label, (name, value) => this.services.answerHeaders.allows(this.label, name, value, call?.request)));
        return;
      }
      case 'ask':
        // A bounded number at once: each waits for a connection, or a verdict, on the service.
        if (this.asking >= MAX_OUTSTANDING_ASKS) {
          this.broke(`it asked more than ${MAX_OUTSTANDING_ASKS} questions at once`);
          return;
        }
        this.asking++;
        void this.answer(message.id, message.ask).finally(() => this.asking--);
        return;
      case 'log': {
        if (!LEVELS.has(message.level) || !this.services.logBudget.take(this.label)) return;
        // Fields past the cap are not logged: the line says how large they were.
        const size = Buffer.byteLength(JSON.stringify(message.object) ?? '');
        const fields = size > LOG_OBJECT_MAX_BYTES ? logObjectNote(size) : fromWire(message.object);
        const object = fields !== null && typeof fields === 'object' ? { ...(fields as object), extension: this.label } : { data: fields, extension: this.label };
        this.services.logger[message.level](object, typeof message.message === 'string' ? message.message.slice(0, MAX_LINE) : undefined);
        return;
      }
      case 'event':
        if (typeof message.name === 'string') this.services.publish(message.name, fromWire(message.data));
        return;
      case 'loaded':
        this.loading?.resolve(message.extension);
        this.loading = undefined;
        return;
      case 'load-failed':
        this.loading?.reject(new ExtensionLoadError('BUNDLE_LOAD_FAILED', String(message.message)));
        this.loading = undefined;
        return;
    }
  }

  /** Takes call `id` out of those waiting, for the caller to settle at once (which empties it: see PendingCall). */
  private take(id: number): PendingCall | undefined {
    const call = this.calls.get(id);
    if (call === undefined) return undefined;
    this.calls.delete(id);
    this.lastActive = performance.now();
    if (this.calls.size === 0 && this.watching !== undefined) {
      // Nothing left to time: a timer left set would keep the service's process alive.
      clearTimeout(this.watching);
      this.watching = undefined;
    }
    if (this.calls.size === 0) void this.services.bridge.idle(this);
    return call;
  }

  /** One capability of protocol.ts's `Ask`, answered by the service. */
  private async answer(id: number, ask: Ask): Promise<void> {
    let reply: ToIsolate;
    try {
      reply = { t: 'reply', id, value: await this.serve(ask) };
    } catch (error) {
      reply = { t: 'reply', id, error: errorToWire(error) };
    }
    if (this.alive) this.post(reply);
  }

  private serve(ask: Ask): Promise<unknown> {
    const { bridge, verifyAccessToken, verifyPluginKey } = this.services;
    switch (ask?.op) {
      case 'query':
        return bridge.query(this, ask.conn, String(ask.sql), ask.bindings, ask.options);
      case 'release':
        return bridge.release(this, ask.conn);
      case 'token':
      case 'key': {
        // Only about a request this isolate is answering now.
        const call = this.calls.get(ask.call);
        const request = call?.request;
        if (call === undefined || request === undefined) return Promise.reject(new Error('no such request in this isolate'));
        // Its signature stays here (see unsignedToken).
        if (ask.op === 'token') {
          call.verdicts.token ??= verifyAccessToken(request).then((token) => toWire(unsignedToken(token)));
          return call.verdicts.token;
        }
        call.verdicts.key ??= verifyPluginKey(request, call.plugin as string).then((key) => toWire(key ?? null));
        return call.verdicts.key;
      }
      default:
        return Promise.reject(new Error('unknown capability'));
    }
  }

  /** Lines the child writes, to the service's log under the extension's name. */
  private forward(stream: Readable | null, level: 'info' | 'warn', keep: boolean): void {
    if (stream === null) return;
    (stream as Readable & { unref?(): void }).unref?.();
    let rest = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) this.line(line, level, keep);
      // A line with no end in sight is logged as far as it is kept, and the rest of it waited for no longer.
      if (rest.length > MAX_LINE) {
        this.line(rest, level, keep);
        rest = '';
      }
    });
    stream.on('end', () => rest !== '' && this.line(rest, level, keep));
  }

  private line(line: string, level: 'info' | 'warn', keep: boolean): void {
    if (line === '') return;
    if (keep) {
      this.stderr.push(line.slice(0, 1000));
      if (this.stderr.length > 40) this.stderr.shift();
    }
    if (!this.services.logBudget.take(this.label)) return;
    this.services.logger[level]({ extension: this.label, output: level === 'info' ? 'stdout' : 'stderr' }, line.slice(0, MAX_LINE));
  }
}

/**
 * An isolate gives way to the service: a spinning handler must not slow the service's own
 * requests. Started in a session of its own, it is in a scheduler autogroup of its own on Linux,
 * and the kernel shares a core evenly between autogroups whatever a process's nice value: the
 * autogroup's nice is what counts (measured in `npm run bench`, plugin-get-while-spinning). Best
 * effort: elsewhere, or where it is not allowed, the isolate runs at the service's priority.
 */
function lowerPriority(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    os.setPriority(pid, ISOLATE_NICE);
  } catch {
    // Not allowed here: the same priority as the service.
  }
  try {
    fs.writeFileSync(`/proc/${pid}/autogroup`, String(ISOLATE_NICE));
  } catch {
    // Not Linux, or no autogroups: the process's nice is what counts.
  }
}

/**
 * The service's descriptors above the channel's that a child inherits (held without close-on-exec:
 * Node sets it on its own, not on those its parent left open), as the isolate's `--close-fds=`
 * argument; none where /proc cannot tell. Neither spawn nor bubblewrap closes them.
 */
function inheritedFds(): string[] {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc/self/fdinfo');
  } catch {
    return [];
  }
  const inherited: number[] = [];
  for (const entry of entries) {
    const fd = Number(entry);
    if (!Number.isInteger(fd) || fd <= CHANNEL_FD) continue;
    try {
      const flags = /^flags:\s+([0-7]+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'))?.[1];
      if (flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0) inherited.push(fd);
    } catch {
      // closed meanwhile
    }
  }
  return inherited.length === 0 ? [] : [`${CLOSE_FDS}${inherited.join(',')}`];
}

/** O_CLOEXEC as /proc's fdinfo writes open flags (octal, Linux). */
const O_CLOEXEC = 0o2000000;

/** How far below the service an isolate's priority is (a nice value). */
const ISOLATE_NICE = 10;

/** The longest output line or log message logged from an isolate, in characters. */
const MAX_LINE = 10_000;

/**
 * The most the service holds written to an isolate and not yet read by it (a query's rows, a
 * request's body): past it, the isolate is not reading, and it is ended rather than let it grow.
 */
const MAX_UNREAD_BYTES = 256 * 1024 * 1024;

/**
 * The most of each second the service spends parsing and handling one isolate's messages, in ms.
 * An answer of 16 MB takes about 40 ms (base64 parses fast); 15 MB of log lines about 130 ms.
 */
const ISOLATE_BUSY_MS_PER_SECOND = 200;

export function crashed(message = 'The extension crashed while answering; it is being restarted.'): BcmsHttpError {
  return new BcmsHttpError('EXTENSION_CRASHED', message);
}

/**
 * What a handler threw, back in the service: its own HTTP answer (errorHandler.occurred, a guard's
 * 401), checked, since an isolate's word is not trusted; anything else is an unexpected error,
 * logged and answered 500 without its message.
 */
function fromIsolate(wired: WireError, label: string, allowed: (name: string, value: string) => boolean): Error {
  if (wired?.http !== undefined && typeof wired.code === 'string' && wired.code in errorCodes) {
    const { status, headers, body } = wired.http;
    if (Number.isInteger(status) && status >= 400 && status <= 599) {
      const safeHeaders =
        headers !== null && typeof headers === 'object'
          ? Object.fromEntries(Object.entries(headers).filter(([name, value]) => typeof value === 'string' && writableHeader(name, value) && allowed(name, value)))
          : undefined;
      const safeBody = body !== null && typeof body === 'object' ? (fromWire(body) as object) : undefined;
      return new BcmsHttpError(wired.code as ErrorCode, String(wired.message), safeHeaders, status, safeBody);
    }
  }
  const error = new Error(`${String(wired?.message)} (in extension ${label})`);
  error.name = typeof wired?.name === 'string' ? wired.name : 'Error';
  if (typeof wired?.stack === 'string') error.stack = `${error.name}: ${error.message}\n${wired.stack.split('\n').slice(1).join('\n')}`;
  return error;
}

/** How many questions an isolate may have the service answer at once (its Knex pool asks at most 20 queries). */
const MAX_OUTSTANDING_ASKS = 256;

/** A load that wants CPU a busy machine does not give it waits at most this many times its limit in wall time. */
const LOAD_WALL_FACTOR = 6;

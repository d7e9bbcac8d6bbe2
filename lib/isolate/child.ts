/**
 * An isolate: a child process the service forks (lib/isolate/host.ts) to run one extension. It
 * loads the extension's code, then answers the calls the service routes to it. Everything the
 * code may reach of the service goes through `ask` (the capabilities listed in protocol.ts): its
 * database, its logger, its verdict on a token or a signature. Its environment is what the host
 * put in `extensionEnv`, nothing more.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Knex } from 'knex';
import { createRepository } from '../db/repository';
import { ContentStore } from '../db/store';
import { checkExtension, defaultExport, runBundle, type LoadedExtension } from '../deploy/load';
import { checkedFunctionBody, functionBodyCheck } from '../function/body-schema';
import { describeFunction, describeMethod } from '../openapi/describe';
import { BcmsHttpError, errorHandler, type ErrorCode } from '../http/errors';
import { ownBodyLimit } from '../http/body';
import type { Logger } from '../logger';
import { toBcmsLogger } from '../handler-logger';
import type { IsolateServices } from '../layer';
import { JWT_GUARD_RULE, markGuardedRequest, REQUEST_BEARER, runGuarded, type GuardedRequest, type JwtGuardRule } from '../plugin/guard';
import { methodsOf } from '../plugin/mount';
import type { BcmsControllerMethod, BcmsPlugin } from '../plugin/types';
import type { JWT } from '../security/token';
import { createBridgeKnex } from './bridge-knex';
import { IsolateResponse, makeRequest } from './child-http';
import { Channel, CHANNEL_FD, CLOSE_FDS, MAX_FRAME_BYTES } from './channel';
import type { Ask, ExtensionKind, ExtensionSource, FromIsolate, ToIsolate, WireExtension, WireRoute } from './protocol';
import { answerOverLimit, errorFromWire, errorToWire, fromWire, isolateFrameLimit, LOG_OBJECT_MAX_BYTES, logObjectNote, Outbox, toWire, type WireError } from './wire';
import { Waiting } from './waiting';

/** What `require('bcms-extensions')` gives code in an isolate: the package without its router. */
const API = path.resolve(__dirname, '..', 'api');

/**
 * The largest answer the service takes (`extensionAnswerMb`), told when the extension loads, and
 * the largest frame it takes from here: a message past it is never sent (the service would end
 * this isolate), something smaller goes in its place (`standIn`).
 */
let answerLimit = Infinity;
let frameLimit = MAX_FRAME_BYTES;

/**
 * The service's own descriptors that crossed into this process (those it holds without
 * close-on-exec: a pipe or a file its own parent left open, a socket it was handed), which the host
 * names: closed before extension code runs, which would otherwise read or listen on them.
 */
for (const arg of process.argv.slice(2)) {
  if (!arg.startsWith(CLOSE_FDS)) continue;
  for (const fd of arg.slice(CLOSE_FDS.length).split(',').map(Number)) {
    if (!Number.isInteger(fd) || fd <= CHANNEL_FD) continue;
    try {
      fs.closeSync(fd);
    } catch {
      // closed already
    }
  }
}

/** The channel to the service (lib/isolate/channel.ts), on the pipe the service made at fd 3. */
const channel = new Channel<ToIsolate[], FromIsolate[]>(new net.Socket({ fd: CHANNEL_FD, readable: true, writable: true }), {
  // The service's messages are trusted: no cap but the frame header's own.
  maxFrameBytes: MAX_FRAME_BYTES,
  receive: (batch) => {
    if (Array.isArray(batch)) for (const message of batch) receive(message);
  },
  fault: () => process.exit(1),
  // The service's end is gone (it stopped, or ended this isolate): so is the isolate.
  closed: () => process.exit(0),
});

/** A turn's messages, in one write; a batch too large for one frame (or one that cannot be sent) goes message by message. */
const outbox = new Outbox<FromIsolate>((batch) => {
  if (sendFrame(batch)) return;
  if (batch.length === 1) sendAlone(batch[0] as FromIsolate, false);
  else for (const message of batch) sendAlone(message);
});

/** Sends a batch in one frame; false when it is too large for one, or not JSON (a circular object, a BigInt). */
function sendFrame(batch: FromIsolate[]): boolean {
  let frame: Buffer | undefined;
  try {
    frame = channel.encode(batch, frameLimit);
  } catch {
    return false;
  }
  if (frame === undefined) return false;
  channel.write(frame);
  return true;
}

/** One message; when it cannot go as it is, what stands in for it (`tryFirst` false: it was just tried alone). */
function sendAlone(message: FromIsolate, tryFirst = true): void {
  if (tryFirst && sendFrame([message])) return;
  const instead = standIn(message);
  if (instead !== undefined && !sendFrame([instead])) {
    // A stand-in is small; one that still does not go is a fault of this isolate's own.
    process.exit(1);
  }
}

/**
 * What is sent in place of a message too large for a frame, or that JSON cannot carry: the call
 * or question it was about is still settled, with why.
 */
function standIn(message: FromIsolate): FromIsolate | undefined {
  switch (message.t) {
    case 'done': {
      const { answer } = message;
      // JSON text whose escapes made it too long: as base64, which fits any answer within the limit.
      if (typeof answer.json === 'string') {
        const jsonBytes: FromIsolate = { t: 'done', id: message.id, answer: { status: answer.status, headers: answer.headers, bytes: Buffer.from(answer.json).toString('base64'), jsonBytes: true } };
        if (sendFrame([jsonBytes])) return undefined;
      }
      return { t: 'failed', id: message.id, error: errorToWire(new BcmsHttpError('EXTENSION_ANSWER_TOO_LARGE')) };
    }
    case 'failed':
      return { t: 'failed', id: message.id, error: { name: 'Error', message: '(an error too large to be sent from the isolate)' } };
    case 'ask': {
      const waiting = asking.get(message.id);
      asking.delete(message.id);
      waiting?.reject(new Error(`a ${message.ask.op} too large to be sent to the service (or with a value JSON cannot carry): the most an isolate sends at once is ${frameLimit} bytes`));
      return undefined;
    }
    case 'log':
      return { ...message, object: { fields: '(could not be sent from the isolate)' }, message: typeof message.message === 'string' ? message.message.slice(0, LOG_MESSAGE_MAX) : undefined };
    case 'loaded':
      return { t: 'load-failed', message: "the extension's description (its routes, schemas and policies) is too large to be sent to the service" };
    case 'load-failed':
      return { t: 'load-failed', message: message.message.slice(0, LOG_MESSAGE_MAX) };
    case 'event':
      return { t: 'log', level: 'warn', object: { event: message.name }, message: 'bcms-extensions: an event too large to be sent from the isolate was dropped' };
  }
}

/** The longest log message sent, in characters (as the service keeps an output line). */
const LOG_MESSAGE_MAX = 10_000;

function send(message: FromIsolate): void {
  outbox.send(message);
}

let nextAsk = 0;

/** Questions waiting for the service's reply; an answered one lets go of the handler waiting on it (see Waiting). */
const asking = new Map<number, Waiting<unknown>>();

function ask(question: Ask): Promise<unknown> {
  const id = ++nextAsk;
  return new Promise((resolve, reject) => {
    asking.set(id, new Waiting<unknown>(resolve, reject));
    send({ t: 'ask', id, ask: question });
  });
}

/** An error the service sent back: a BcmsHttpError again when it was one, so guards and handlers can tell. */
function fromService(wired: WireError): Error {
  if (wired.http !== undefined && wired.code !== undefined) {
    return new BcmsHttpError(wired.code as ErrorCode, wired.message, wired.http.headers, wired.http.status, wired.http.body);
  }
  return errorFromWire(wired);
}

/** The service's logger, line by line; errors in a line's object cross as their message and stack. */
const logger: Logger = {
  info: (object, message) => log('info', object, message),
  warn: (object, message) => log('warn', object, message),
  error: (object, message) => log('error', object, message),
  debug: (object, message) => log('debug', object, message),
};

function log(level: 'info' | 'warn' | 'error' | 'debug', object: object, message?: string): void {
  let fields: unknown = object;
  if (object instanceof Error) fields = { err: errorToWire(object) };
  else if (object !== null && typeof object === 'object') {
    fields = Object.fromEntries(Object.entries(object).map(([key, value]) => [key, value instanceof Error ? errorToWire(value) : value]));
  }
  // A circular or otherwise unsendable object: the line still goes, without it (here, or in the outbox).
  let wired: unknown;
  try {
    wired = toWire(fields);
    // Fields past the service's cap would be replaced there: replaced here, unsent.
    const size = Buffer.byteLength(JSON.stringify(wired) ?? '');
    if (size > LOG_OBJECT_MAX_BYTES) wired = logObjectNote(size);
  } catch {
    wired = { fields: '(could not be sent from the isolate)' };
  }
  send({ t: 'log', level, object: wired, message: typeof message === 'string' && message.length > LOG_MESSAGE_MAX ? message.slice(0, LOG_MESSAGE_MAX) : message });
}

// Its Knex is made at the first query: an extension that never queries never loads Knex.
let bridged: Knex | undefined;
const database = {
  get knex(): Knex {
    bridged ??= createBridgeKnex(ask);
    return bridged;
  },
  description: "the service's database",
  close: async () => {},
};
const store = new ContentStore(database, logger, { migratedElsewhere: true });
const repo = createRepository(store);
// The layers' parts in an isolate (lib/layer.ts), which the host names as this process's arguments.
const layerServices: IsolateServices = { store, logger, emit: (name, data) => send({ t: 'event', name, data: toWire(data) }) };
for (const file of process.argv.slice(2).filter((arg) => !arg.startsWith(CLOSE_FDS))) {
  (require(file) as { bindIsolate(services: IsolateServices): void }).bindIsolate(layerServices);
}
const bcmsLogger = toBcmsLogger(logger);

let extension: LoadedExtension | undefined;
/** A plugin's methods and their keys, in the order the service numbered them. */
let methods: { key: string; method: BcmsControllerMethod<unknown, unknown> }[] = [];

/** The export of a host module file that is the plugin, the function module, or the event or job factory (`isolate: 'all'`). */
function moduleExport(file: string, key: string): unknown {
  const exports = require(file) as Record<string, unknown>;
  return key === '' ? exports : exports[key];
}

async function load(kind: ExtensionKind, name: string, source: ExtensionSource): Promise<WireExtension> {
  const exported = source.type === 'bundle' ? defaultExport(runBundle(source.code, source.filename, API)) : moduleExport(source.file, source.key);
  extension = await checkExtension(kind, name, exported);
  if (extension.kind === 'event') return { kind: 'event', name: extension.name, config: { scope: extension.event.config.scope, method: extension.event.config.method } };
  if (extension.kind === 'job') return { kind: 'job', name: extension.name, cron: { ...extension.job.cron } };
  if (extension.kind === 'function') {
    const bodyLimit = ownBodyLimit(extension.definition.config.bodyLimit, `function "${extension.name}": config`);
    functionBodyCheck(extension.definition); // a bodySchema that cannot be checked: the bundle does not load
    const described = describeFunction(extension.definition);
    return { kind: 'function', name: extension.name, public: extension.definition.config.public === true, ...(bodyLimit === undefined ? {} : { bodyLimit }), described };
  }
  const plugin = extension.plugin;
  const routes: WireRoute[] = [];
  methods = [];
  for (const controller of plugin.controllers ?? []) {
    const made = methodsOf(controller, `plugin "${plugin.name}", controller "${controller.name}"`) ?? {};
    for (const [key, method] of Object.entries(made)) {
      methods.push({ key, method });
      const bodyLimit = ownBodyLimit(method.bodyLimit, `plugin "${plugin.name}", method "${key}"`);
      routes.push({
        controller: { name: controller.name, path: controller.path },
        key,
        path: method.path,
        type: method.type,
        guard: guardOf(method),
        ...(bodyLimit === undefined ? {} : { bodyLimit }),
        described: describeMethod(method),
      });
    }
  }
  const policies = typeof plugin.policy === 'function' ? await plugin.policy() : null;
  return { kind: 'plugin', name, routes, policies: policies === null ? null : (toWire(policies) as unknown[]) };
}

function guardOf(method: BcmsControllerMethod<unknown, unknown>): WireRoute['guard'] {
  if (method.preRequestHandler === undefined) return { type: 'none' };
  const rule = (method.preRequestHandler as { [JWT_GUARD_RULE]?: JwtGuardRule })[JWT_GUARD_RULE];
  if (rule !== undefined) return { type: 'jwt', roles: [...rule.roles], permission: rule.permission };
  return { type: 'custom' };
}

async function servePlugin(message: Extract<ToIsolate, { t: 'plugin' }>): Promise<void> {
  const route = methods[message.route];
  const plugin = (extension as { plugin?: BcmsPlugin }).plugin;
  if (route === undefined || plugin === undefined) throw new Error(`no method ${message.route} in this isolate`);
  const { key, method } = route;
  const request = makeRequest(message.request);
  // The header stayed in the service: a guard that takes a token or a signature reads this instead.
  (request as GuardedRequest)[REQUEST_BEARER] = message.request.bearer === true;
  const response = new IsolateResponse();
  const context: Record<string, unknown> = { name: key, request, response, logger: bcmsLogger, errorHandler, repo };
  if (message.accessToken !== undefined) context.accessToken = message.accessToken;
  let result: unknown;
  if (message.runGuard && method.preRequestHandler !== undefined) {
    // A guard the author's own pre-request handler calls finds the service's verdicts on the request.
    const verifyAccessToken = (): Promise<JWT> => ask({ op: 'token', call: message.id }) as Promise<JWT>;
    // The service answers null for a request no key signed; a guard reads undefined as "not signed".
    const verifyPluginKey = (): Promise<never> => ask({ op: 'key', call: message.id }).then((key) => (key ?? undefined) as never);
    markGuardedRequest(request, verifyAccessToken, verifyPluginKey, plugin.name);
    result = await runGuarded(method.preRequestHandler as never, method.handler as never, context, verifyAccessToken);
  } else {
    result = await method.handler(context as never);
  }
  // A handler that began its own answer and returned: its answer is what it ends.
  if (response.started && !response.finished) await response.done;
  send({ t: 'done', id: message.id, answer: response.answer(result, answerLimit) });
}

async function serveFunction(message: Extract<ToIsolate, { t: 'function' }>): Promise<void> {
  if (extension?.kind !== 'function') throw new Error('this isolate runs no function');
  const request = makeRequest(message.request);
  request.body = await checkedFunctionBody(extension.definition, request.body);
  const context = { request: request as never, logger: bcmsLogger, errorHandler, repo, auth: message.auth };
  const value = await extension.definition.handler(message.idempotencyKey === undefined ? context : { ...context, idempotencyKey: message.idempotencyKey });
  const answer = { status: 200, headers: [], json: JSON.stringify(value) ?? 'null' };
  if (answerOverLimit(answer, answerLimit)) throw new BcmsHttpError('EXTENSION_ANSWER_TOO_LARGE');
  send({ t: 'done', id: message.id, answer });
}

/** What an event or a job answers once its handler is done: nothing (a handler's value is not kept). */
const DONE = { status: 200, headers: [], json: 'null' };

async function serveEvent(message: Extract<ToIsolate, { t: 'handle-event' }>): Promise<void> {
  if (extension?.kind !== 'event') throw new Error('this isolate runs no event handler');
  await extension.event.handler({ scope: message.scope, method: message.method, payload: fromWire(message.payload) });
  send({ t: 'done', id: message.id, answer: DONE });
}

async function serveJob(message: Extract<ToIsolate, { t: 'run-job' }>): Promise<void> {
  if (extension?.kind !== 'job') throw new Error('this isolate runs no job');
  await extension.job.handler();
  send({ t: 'done', id: message.id, answer: DONE });
}

/** A call, run: what its handler throws is answered as `failed`, with the handler's message. */
function serve(message: Extract<ToIsolate, { t: 'plugin' | 'function' | 'handle-event' | 'run-job' }>): void {
  const run = message.t === 'plugin' ? servePlugin(message) : message.t === 'function' ? serveFunction(message) : message.t === 'handle-event' ? serveEvent(message) : serveJob(message);
  run.catch((error: unknown) => send({ t: 'failed', id: message.id, error: errorToWire(error) }));
}

function receive(message: ToIsolate): void {
  switch (message.t) {
    case 'reply': {
      const waiting = asking.get(message.id);
      asking.delete(message.id);
      if (message.error !== undefined) waiting?.reject(fromService(message.error));
      else waiting?.resolve(message.value);
      return;
    }
    case 'plugin':
    case 'function':
    case 'handle-event':
    case 'run-job':
      serve(message);
      return;
    case 'load':
      if (typeof message.answerLimit === 'number') {
        answerLimit = message.answerLimit;
        frameLimit = isolateFrameLimit(answerLimit);
      }
      load(message.kind, message.name, message.source).then(
        (loaded) => send({ t: 'loaded', extension: loaded }),
        (error: unknown) => send({ t: 'load-failed', message: firstLine(error) }),
      );
      return;
  }
}

/** The first line of an error's message: what the deployer reads first. */
function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0] ?? text;
}

import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Attributes, Span, Tracer, TracerProvider } from '@opentelemetry/api';
import { ownManifest } from './manifest';

type Api = typeof import('@opentelemetry/api');

let api: Api | null | undefined;

/**
 * The app's OpenTelemetry API (`@opentelemetry/api`, an optional peer), or null without one.
 */
function otel(): Api | null {
  if (api === undefined) {
    try {
      api = require('@opentelemetry/api') as Api;
    } catch {
      api = null;
    }
  }
  return api;
}

let tracer: Tracer | undefined;
/** When the API was last asked for an SDK that was not there: asked again a second later at most. */
let lookedAt = -Infinity;

/**
 * The tracer of the SDK the app registered, or undefined while it has none: then a request opens
 * no span at all (the API's no-op spans would still cost every request a few objects). Once one is
 * registered, a request within a second takes it up.
 */
function sdkTracer(otelApi: Api): Tracer | undefined {
  if (tracer !== undefined) return tracer;
  // Every request asks: without an SDK, the API's global lookup is made once a second, not each time.
  const now = performance.now();
  if (now - lookedAt < 1000) return undefined;
  lookedAt = now;
  // The API's global provider is a proxy that hands out the registered SDK's tracers (its delegate's).
  const provider = otelApi.trace.getTracerProvider() as TracerProvider & { getDelegateTracer?(name: string, version?: string): Tracer | undefined };
  tracer = typeof provider.getDelegateTracer === 'function' ? provider.getDelegateTracer('bcms-extensions', ownManifest().version) : provider.getTracer('bcms-extensions', ownManifest().version);
  return tracer;
}

/** Whether the app registered an OpenTelemetry SDK: spans are made only then. */
export function tracing(): boolean {
  const otelApi = otel();
  return otelApi !== null && sdkTracer(otelApi) !== undefined;
}

/** A request's span: the handler runs within it (its database calls and isolate crossings are its children). */
export interface RequestSpan {
  run<T>(work: () => T): T;
  end(status: number): void;
}

/**
 * Opens the span of a request the router owns (`bcms <family>`, a server span), or returns
 * undefined when the app has no OpenTelemetry API or no SDK registered. Its parent is the span the app's HTTP
 * instrumentation opened, or without one the caller's, from its `traceparent`.
 */
export function requestSpan(method: string, family: string, path: string, requestId: string, headers: IncomingHttpHeaders): RequestSpan | undefined {
  const otelApi = otel();
  const tracing = otelApi === null ? undefined : sdkTracer(otelApi);
  if (otelApi === null || tracing === undefined) return undefined;
  // The app's HTTP instrumentation's span, else the caller's (`traceparent`, by the app's propagator).
  let parent = otelApi.context.active();
  if (otelApi.trace.getSpan(parent) === undefined) parent = otelApi.propagation.extract(parent, headers);
  const span = tracing.startSpan(`bcms ${family}`, { kind: otelApi.SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': path, 'bcms.request_id': requestId } }, parent);
  const within = otelApi.trace.setSpan(parent, span);
  return {
    run: (work) => otelApi.context.with(within, work),
    end(status) {
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: otelApi.SpanStatusCode.ERROR });
      span.end();
    },
  };
}

/**
 * Runs `work` in a span of its own (an isolate crossing, a database call) when it is part of a
 * traced request: background work (deliveries, polls) opens no root spans of its own.
 */
export function childSpan<T>(name: string, attributes: Attributes, work: () => Promise<T>): Promise<T> {
  const otelApi = otel();
  const tracing = otelApi === null ? undefined : sdkTracer(otelApi);
  if (otelApi === null || tracing === undefined) return work();
  const parent = otelApi.context.active();
  if (otelApi.trace.getSpan(parent) === undefined) return work();
  const span: Span = tracing.startSpan(name, { kind: otelApi.SpanKind.INTERNAL, attributes }, parent);
  const failed = (error: unknown): never => {
    // Whatever the error is (an object without a prototype has no toString), the span ends and the error goes on as it was.
    try {
      span.recordException(error instanceof Error ? error : { message: Object.prototype.toString.call(error) });
      span.setStatus({ code: otelApi.SpanStatusCode.ERROR });
    } finally {
      span.end();
    }
    throw error;
  };
  let running: Promise<T>;
  try {
    running = otelApi.context.with(otelApi.trace.setSpan(parent, span), work);
  } catch (error) {
    return failed(error);
  }
  return Promise.resolve(running).then((value) => {
    span.end();
    return value;
  }, failed);
}

/**
 * Runs `start` outside any request's context: a process or socket made within a request would
 * carry its context into every later callback (an isolate's database asks, long after the request
 * that happened to start it, would be spans of that request).
 */
export function outsideRequests<T>(start: () => T): T {
  const otelApi = otel();
  return otelApi === null ? start() : otelApi.context.with(otelApi.ROOT_CONTEXT, start);
}

import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/**
 * What every answer under `/api/plugin/` carries, whatever its handler set: a plugin answer is the
 * plugin author's content on the service's origin. `sandbox` makes a page of it a document of a
 * unique origin (CSP 3, §6.3.2.1): its scripts cannot read the shell's storage (where the admin's
 * token is) nor call the API with the shell's credentials. `nosniff` keeps a browser from taking
 * an answer for HTML or a script its `Content-Type` does not say it is.
 */
export const PLUGIN_ANSWER_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Security-Policy': 'sandbox',
  'X-Content-Type-Options': 'nosniff',
});

const NAMES = new Set(Object.keys(PLUGIN_ANSWER_HEADERS).map((name) => name.toLowerCase()));

/** The response's own `writeHead`, which `writeSandboxed` calls once it has set the headers. */
const OWN_WRITE_HEAD = Symbol('bcms-extensions.ownWriteHead');

type Sandboxed = ServerResponse & { [OWN_WRITE_HEAD]: ServerResponse['writeHead'] };

/**
 * Makes every answer of `res` carry PLUGIN_ANSWER_HEADERS: set as its head is written (by the
 * router's writers, by a handler's `send`, `end` or `writeHead`, for an error too), so a handler
 * that set, removed or weakened either before is overruled.
 */
export function sandboxPluginAnswer(res: ServerResponse): void {
  (res as Sandboxed)[OWN_WRITE_HEAD] = res.writeHead;
  res.writeHead = writeSandboxed as ServerResponse['writeHead'];
}

function writeSandboxed(this: Sandboxed, statusCode: number, ...rest: unknown[]): ServerResponse {
  for (const name in PLUGIN_ANSWER_HEADERS) this.setHeader(name, PLUGIN_ANSWER_HEADERS[name] as string);
  // Headers given to writeHead itself are set after the response's own: theirs of these names go.
  const last = rest.length - 1;
  if (last >= 0 && rest[last] !== null && typeof rest[last] === 'object') rest[last] = withoutOurs(rest[last] as OutgoingHttpHeaders | unknown[]);
  return (this[OWN_WRITE_HEAD] as (...args: unknown[]) => ServerResponse).call(this, statusCode, ...rest);
}

/** Headers (an object, or Node's arrays of pairs) without those named in PLUGIN_ANSWER_HEADERS; the same value when it has none. */
function withoutOurs(headers: OutgoingHttpHeaders | unknown[]): OutgoingHttpHeaders | unknown[] {
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) return (headers as unknown[][]).filter(([name]) => !NAMES.has(String(name).toLowerCase()));
    const kept: unknown[] = [];
    for (let i = 0; i < headers.length; i += 2) {
      if (!NAMES.has(String(headers[i]).toLowerCase())) kept.push(headers[i], headers[i + 1]);
    }
    return kept;
  }
  let copy: OutgoingHttpHeaders | undefined;
  for (const name of Object.keys(headers)) {
    if (!NAMES.has(name.toLowerCase())) continue;
    copy ??= { ...headers };
    delete copy[name];
  }
  return copy ?? headers;
}

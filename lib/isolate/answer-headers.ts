/**
 * What crosses the service's edge for isolated extension code, in both directions: the request
 * headers an isolate does not see (the caller's credentials), and the answer headers it may not
 * set (those that act on the service's whole origin rather than on the one answer). The app's own
 * in-process plugins are the host's code: neither applies to them.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Logger } from '../logger';

/**
 * Request headers that carry a credential: an isolate could replay one against the service or
 * another (mint an API key with an admin's token, say). By name, as no list of them is closed:
 * `Authorization`, `Proxy-Authorization`, `X-Forwarded-Authorization`, `Cookie`, `X-Api-Key`,
 * `X-Amz-Security-Token`, `X-Client-Secret`, `X-Password`...
 */
const CREDENTIAL = /authorization|cookie|secret|password|api-key$|-token$/i;

/** The headers without those CREDENTIAL names; the same object when it has none (most requests). */
export function withoutCredentials(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  let kept: IncomingHttpHeaders | undefined;
  for (const name of Object.keys(headers)) {
    if (!CREDENTIAL.test(name)) continue;
    kept ??= { ...headers };
    delete kept[name];
  }
  return kept ?? headers;
}

/**
 * Answer headers that reach past the answer: cookies of the whole origin (session fixation,
 * cookie tossing), its storage wiped (`Clear-Site-Data`, where the admin shell keeps its token),
 * a redirect elsewhere (`Refresh`), and CORS, which the router owns (docs/http.md).
 */
const ORIGIN_WIDE = new Set(['set-cookie', 'set-cookie2', 'clear-site-data', 'refresh']);

/** Why an answer header is refused, as its log line names it; undefined when it may be written. */
function refusal(lower: string, value: unknown, req: IncomingMessage | undefined): string | undefined {
  if (ORIGIN_WIDE.has(lower)) return lower;
  if (lower.startsWith('access-control-')) return 'access-control-*';
  if (lower === 'location' && !sameOrigin(value, req)) return 'location';
  return undefined;
}

/**
 * Whether a `Location` leads to the request's own origin: a relative reference does, unless it is
 * one to another host (`//evil.example`, `/\evil.example`). Resolved by the WHATWG URL parser, as a
 * browser resolves it (backslashes, tabs and all).
 */
function sameOrigin(value: unknown, req: IncomingMessage | undefined): boolean {
  if (typeof value !== 'string') return false;
  const protocol = (req as { protocol?: unknown } | undefined)?.protocol === 'https' ? 'https' : 'http';
  // Without a Host header, only a reference relative to it passes: `.invalid` is no one's host (RFC 2606).
  const base = `${protocol}://${req?.headers.host || 'service.invalid'}/`;
  try {
    return new URL(value, base).origin === new URL(base).origin;
  } catch {
    return false;
  }
}

/**
 * The check of isolated extensions' answer headers, one per router: a refused header is dropped and
 * logged at warn, once per extension and kind of header (an extension that sets one on every
 * answer would otherwise fill the log).
 */
export class AnswerHeaderCheck {
  private readonly logged = new Map<string, Set<string>>();

  constructor(private readonly logger: Logger) {}

  /** Whether `extension`'s answer to `req` may carry this header. */
  allows(extension: string, name: string, value: unknown, req: IncomingMessage | undefined): boolean {
    const kind = refusal(String(name).toLowerCase(), value, req);
    if (kind === undefined) return true;
    let kinds = this.logged.get(extension);
    if (kinds === undefined) {
      kinds = new Set();
      this.logged.set(extension, kinds);
    }
    if (!kinds.has(kind)) {
      kinds.add(kind);
      this.logger.warn(
        { extension, header: String(name) },
        `bcms-extensions: an isolated extension's answer set ${String(name)}, which acts on the service's whole origin; it was dropped (logged once per extension)`,
      );
    }
    return false;
  }
}

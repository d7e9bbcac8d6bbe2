// Values as Postgres stores them: ids, JSON text it refuses, ids as one bound list; and how an
// error names what it got. Shared by the content repositories and the BCMS layer's documents.
import { randomBytes } from 'node:crypto';

/** The longest id (and collection name) a document may have. */
export const MAX_ID_LENGTH = 200;

/**
 * The longest template name, label and description, in characters (UTF-16 code units, as
 * `String.length` counts them). The name is unique, so indexed, and Postgres refuses an index row
 * past 2,704 bytes; a label makes the name when none is given. `repo.template` and the SDK's routes
 * refuse longer ones (400) before any query.
 */
export const TEMPLATE_FIELD_LENGTHS: Readonly<Record<'name' | 'label' | 'desc', number>> = Object.freeze({ name: 200, label: 200, desc: 5000 });

/** Whether `id` can be an id at all: a non-empty string of at most MAX_ID_LENGTH characters that Postgres can store. */
export const usableId = (id: unknown): id is string => typeof id === 'string' && id !== '' && id.length <= MAX_ID_LENGTH && unstorable(JSON.stringify(id)) === undefined;

/** Names a path may not take: walking them in a JS object reaches a prototype shared by every object. */
export const UNSAFE_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Whether `value` is a plain object (a filter, an operator object), not an array or a class instance. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  // Object.prototype of any realm (a vm context's, structuredClone's), not only this one's.
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/**
 * What in JSON text Postgres refuses to store: a NUL character (`\u0000`) or half of a UTF-16
 * surrogate pair (JSON.stringify writes a lone one as `\ud800`). Only real escapes count: a
 * backslash written as `\\` before `u0000` is text.
 */
export function unstorable(text: string): string | undefined {
  const match = /(?:^|[^\\])(?:\\\\)*\\u(0000|d[89a-f][0-9a-f]{2})/i.exec(text);
  if (match === null) return undefined;
  return match[1] === '0000' ? 'a NUL character' : 'half of a UTF-16 surrogate pair';
}

/**
 * `column in (the ids)`, as `whereRaw`'s arguments, with the ids as one JSON array bound as one value: any number of ids
 * (Postgres takes at most 65,535 bound values), the primary key still used.
 */
export function inList(column: 'id' | 'cid', ids: string[]): [sql: string, bindings: string[]] {
  return [`${column} in (select jsonb_array_elements_text(?::jsonb))`, [JSON.stringify(ids)]];
}

export function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return isPlainObject(value) ? 'an object' : `a ${(value as object).constructor?.name ?? 'object'}`;
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return /^[aeiou]/.test(typeof value) ? `an ${typeof value}` : `a ${typeof value}`;
}

/** A MongoDB-style ObjectId: 4 bytes of seconds, then 8 random bytes, in hex (24 characters). */
export function newObjectId(): string {
  const time = Math.floor(Date.now() / 1000)
    .toString(16)
    .padStart(8, '0');
  return time + randomBytes(8).toString('hex');
}

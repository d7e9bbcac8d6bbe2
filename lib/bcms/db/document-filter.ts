// MongoDB filter objects, rendered as parameterised SQL on the `doc` JSONB column of bcms_documents.
// Only values travel as bindings; the SQL text is made of this file's own fragments, and field names
// are checked against a strict pattern before they are bound as path elements.

import { isPlainObject, kind, UNSAFE_SEGMENTS, unstorable } from '../../db/values';
import { BcmsHttpError } from '../../http/errors';

/** The operators a filter may use on a field. */
export type DocumentFieldOperators = {
  $eq?: unknown;
  $ne?: unknown;
  $in?: unknown[];
  $nin?: unknown[];
  $gt?: string | number | boolean;
  $gte?: string | number | boolean;
  $lt?: string | number | boolean;
  $lte?: string | number | boolean;
  $exists?: boolean;
};

/** What a field may be compared with: its own type, or one item of an array field. */
type FieldValue<T> = T | (T extends readonly (infer Item)[] ? Item : never);

/**
 * A MongoDB filter: `{ done: false }`, `{ count: { $gte: 2 } }`, `{ 'author.name': 'Ada' }`,
 * `{ $or: [{ a: 1 }, { b: 2 }] }`. A field's value is either a value it must equal (an array field
 * also matches when one of its items equals it, as in MongoDB) or an object of operators.
 */
export type DocumentFilter<Entity = Record<string, unknown>> = {
  [K in keyof Entity & string]?: FieldValue<Entity[K]> | DocumentFieldOperators;
} & {
  [path: string]: unknown;
  $and?: DocumentFilter<Entity>[];
  $or?: DocumentFilter<Entity>[];
  $nor?: DocumentFilter<Entity>[];
};

/** SQL text with `?` placeholders, and their values, in order. */
export interface SqlFragment {
  sql: string;
  bindings: string[];
}

const FIELD_OPERATORS = new Set(['$eq', '$ne', '$in', '$nin', '$gt', '$gte', '$lt', '$lte', '$exists']);
const LOGICAL_OPERATORS = new Set(['$and', '$or', '$nor']);
const COMPARISONS: Record<string, string> = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' };
/** A path segment: a name as code writes them, or an array index. No quotes, dots, spaces or `$`-leading names. */
const SEGMENT = /^(?:[A-Za-z_][A-Za-z0-9_-]{0,99}|\d{1,9})$/;
const MAX_DEPTH = 8;
/** Conditions a filter may hold, each item of a `$in` / `$nin` list counted: kept well under Postgres's 65,535 bound values. */
const MAX_FILTER_CONDITIONS = 1000;

/**
 * Renders `filter` as a condition on `doc`; `where` names the caller in errors. Throws a
 * `TypeError` for anything it cannot render: an unknown operator, a field name that is not a plain
 * name, a value JSON cannot carry; and a 400 `BcmsHttpError` (`TOO_LARGE`) for a filter of more
 * than {@link MAX_FILTER_CONDITIONS} conditions, which a handler's caller gets as it is.
 *
 * @example
 * renderFilter({ done: false, priority: { $gte: 2 } }, 'todos.findAllBy');
 * // { sql: '((doc @> ?::jsonb or doc @> ?::jsonb) and (...))', bindings: [...] }
 */
export function renderFilter(filter: unknown, where: string): SqlFragment {
  const state = { conditions: 0 };
  return renderObject(filter, where, 0, state);
}

function renderObject(filter: unknown, where: string, depth: number, state: { conditions: number }): SqlFragment {
  if (!isPlainObject(filter)) throw new TypeError(`${where}: a filter must be a plain object or a function, got ${kind(filter)}`);
  if (depth > MAX_DEPTH) throw new TypeError(`${where}: the filter nests $and/$or/$nor more than ${MAX_DEPTH} deep`);
  const parts: SqlFragment[] = [];
  for (const [key, value] of Object.entries(filter)) {
    if (value === undefined) continue; // as JSON (and the MongoDB driver) drop it
    if (key.startsWith('$')) {
      if (!LOGICAL_OPERATORS.has(key)) throw new TypeError(`${where}: unknown operator ${JSON.stringify(key)} (at the top level: $and, $or, $nor)`);
      if (!Array.isArray(value) || value.length === 0) throw new TypeError(`${where}: ${key} takes a non-empty array of filters`);
      const inner = value.map((item) => renderObject(item, where, depth + 1, state));
      const joined = join(inner, key === '$and' ? ' and ' : ' or ');
      parts.push(key === '$nor' ? { sql: `not ${joined.sql}`, bindings: joined.bindings } : joined);
      continue;
    }
    parts.push(renderField(parsePath(key, where), value, where, state));
  }
  return parts.length === 0 ? { sql: 'true', bindings: [] } : join(parts, ' and ');
}

/** `'author.name'` → `['author', 'name']`, each segment checked. */
function parsePath(key: string, where: string): string[] {
  const segments = key.split('.');
  for (const segment of segments) {
    if (!SEGMENT.test(segment) || UNSAFE_SEGMENTS.has(segment)) {
      throw new TypeError(
        `${where}: field ${JSON.stringify(key)} is not a field name a filter can use (letters, digits, _ and -, dot-separated; no quotes, spaces or $; not __proto__, constructor or prototype)`,
      );
    }
  }
  return segments;
}

function renderField(path: string[], value: unknown, where: string, state: { conditions: number }): SqlFragment {
  const field = path.join('.');
  if (isPlainObject(value) && Object.keys(value).some((k) => k.startsWith('$'))) {
    const parts: SqlFragment[] = [];
    for (const [op, operand] of Object.entries(value)) {
      if (operand === undefined) continue;
      if (!FIELD_OPERATORS.has(op)) {
        throw new TypeError(`${where}: unknown operator ${JSON.stringify(op)} on field ${JSON.stringify(field)} (known: ${[...FIELD_OPERATORS].join(', ')})`);
      }
      // Each item of a list is a condition of its own, counted before any is rendered.
      count(state, where, (op === '$in' || op === '$nin') && Array.isArray(operand) ? Math.max(1, operand.length) : 1);
      parts.push(renderOperator(path, op, operand, where));
    }
    return parts.length === 0 ? { sql: 'true', bindings: [] } : join(parts, ' and ');
  }
  count(state, where);
  return equals(path, value, where);
}

function renderOperator(path: string[], op: string, operand: unknown, where: string): SqlFragment {
  const field = path.join('.');
  switch (op) {
    case '$eq':
      return equals(path, operand, where);
    case '$ne':
      return not(equals(path, operand, where));
    case '$in':
    case '$nin': {
      if (!Array.isArray(operand)) throw new TypeError(`${where}: ${op} on field ${JSON.stringify(field)} takes an array, got ${kind(operand)}`);
      const any =
        operand.length === 0
          ? { sql: 'false', bindings: [] }
          : join(
              operand.map((item) => equals(path, item, where)),
              ' or ',
            );
      return op === '$in' ? any : not(any);
    }
    case '$exists':
      if (typeof operand !== 'boolean') throw new TypeError(`${where}: $exists on field ${JSON.stringify(field)} takes true or false, got ${kind(operand)}`);
      return { sql: `(${pathSql(path)}) is ${operand ? 'not ' : ''}null`, bindings: [...path] };
    default: {
      // $gt, $gte, $lt, $lte: as MongoDB, only values of the operand's own JSON type compare (a
      // number never matches a string bound), in jsonb's order (numbers numerically).
      if (typeof operand !== 'string' && typeof operand !== 'number' && typeof operand !== 'boolean') {
        throw new TypeError(`${where}: ${op} on field ${JSON.stringify(field)} takes a string, number or boolean, got ${kind(operand)}`);
      }
      const literal = jsonText(operand, where, field);
      return {
        sql: `(jsonb_typeof(${pathSql(path)}) = jsonb_typeof(?::jsonb) and ${pathSql(path)} ${COMPARISONS[op]} ?::jsonb)`,
        bindings: [...path, literal, ...path, literal],
      };
    }
  }
}

/**
 * Equality, as MongoDB means it. A scalar matches the field's value, or an item of an array field:
 * `doc @@ '$."a"."b" == v'`, served by the GIN index. An object or array must equal the field's
 * value as a whole (containment first, for the index). `null` matches a null or missing field.
 */
function equals(path: string[], value: unknown, where: string): SqlFragment {
  const field = path.join('.');
  if (value === null) return { sql: `coalesce(${pathSql(path)}, 'null'::jsonb) = 'null'::jsonb`, bindings: [...path] };
  if (isPlainObject(value) && Object.keys(value).some((k) => k.startsWith('$'))) {
    throw new TypeError(`${where}: operators inside a value are not supported (field ${JSON.stringify(field)})`);
  }
  const literal = jsonText(value, where, field);
  const indexable = path.every((segment) => !/^\d+$/.test(segment));
  if (typeof value !== 'object') {
    if (indexable) {
      // One jsonpath predicate: lax mode looks into arrays along the path and at its end, as
      // MongoDB does, and the GIN index serves `@@` with an equality.
      return {
        sql: 'doc @@ ?::jsonpath',
        bindings: [
          `${path
            .map((segment) => `"${segment}"`)
            .join('.')
            .replace(/^/, '$.')} == ${literal}`,
        ],
      };
    }
    return {
      sql: `(${pathSql(path)} = ?::jsonb or (jsonb_typeof(${pathSql(path)}) = 'array' and ${pathSql(path)} @> ?::jsonb))`,
      bindings: [...path, literal, ...path, ...path, JSON.stringify([value])],
    };
  }
  const exact = { sql: `${pathSql(path)} = ?::jsonb`, bindings: [...path, literal] };
  return indexable ? { sql: `(doc @> ?::jsonb and ${exact.sql})`, bindings: [nest(path, value), ...exact.bindings] } : exact;
}

/** `doc #> array[?, ?]::text[]`, with the path's segments as its bindings. */
export function pathSql(path: string[]): string {
  return `(doc #> array[${path.map(() => '?').join(', ')}]::text[])`;
}

/** `['a', 'b']`, `v` → `'{"a":{"b":v}}'`. */
function nest(path: string[], value: unknown): string {
  let nested = value;
  for (let i = path.length - 1; i >= 0; i--) nested = { [path[i] as string]: nested };
  return JSON.stringify(nested);
}

function jsonText(value: unknown, where: string, field: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`${where}: the value for field ${JSON.stringify(field)} cannot be written as JSON (${(error as Error).message})`);
  }
  if (text === undefined || (typeof value === 'number' && !Number.isFinite(value))) {
    throw new TypeError(`${where}: the value for field ${JSON.stringify(field)} cannot be written as JSON (${kind(value)})`);
  }
  const refused = unstorable(text);
  if (refused !== undefined) throw new TypeError(`${where}: the value for field ${JSON.stringify(field)} contains ${refused}, which Postgres cannot store`);
  return text;
}

function join(parts: SqlFragment[], separator: string): SqlFragment {
  if (parts.length === 1) return parts[0] as SqlFragment;
  return { sql: `(${parts.map((p) => p.sql).join(separator)})`, bindings: parts.flatMap((p) => p.bindings) };
}

function not(part: SqlFragment): SqlFragment {
  // A comparison with a missing field is NULL; `not NULL` is NULL, which would drop the row, where
  // MongoDB's $ne and $nin match documents without the field.
  return { sql: `not coalesce(${part.sql}, false)`, bindings: part.bindings };
}

function count(state: { conditions: number }, where: string, conditions = 1): void {
  state.conditions += conditions;
  if (state.conditions > MAX_FILTER_CONDITIONS) {
    throw new BcmsHttpError(
      'TOO_LARGE',
      `${where}: the filter has more than ${MAX_FILTER_CONDITIONS} conditions (the most a filter may have; each item of a $in or $nin list counts as one): split it, or filter by something shared.`,
    );
  }
}

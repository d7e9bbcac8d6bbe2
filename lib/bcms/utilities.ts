/**
 * purple-cheetah's utilities that BCMS plugins import (`StringUtility`, `useObjectUtility`,
 * `ObjectUtilityError`) and `MongoDBEntitySchemaString`, with purple-cheetah's names and shapes.
 */
import { slugUnderscore } from '../names';
import { compileObjectSchema, type ObjectSchema, type ObjectSchemaCheck } from '../schema/object-schema';

/** What `compareWithSchema` returns for an object that does not fit: BCMS code tests `instanceof ObjectUtilityError`. */
export class ObjectUtilityError {
  constructor(
    public errorCode: string,
    public message: string,
  ) {}
}

const checks = new WeakMap<ObjectSchema, ObjectSchemaCheck>();

/** purple-cheetah's `ObjectUtility`: `compareWithSchema` checks as the package's body schemas check. */
export const ObjectUtility = {
  /**
   * `undefined` when `object` fits `schema`; else an ObjectUtilityError naming the first field that
   * does not (`level` is the name of the object in the message: `body.title is required.`).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: purple-cheetah's own signature, which BCMS code ported here is typed against
  compareWithSchema(object: unknown, schema: ObjectSchema, level = 'object'): void | ObjectUtilityError {
    let check = checks.get(schema);
    if (check === undefined) {
      check = compileObjectSchema(schema);
      checks.set(schema, check);
    }
    const problem = check(object, level);
    return problem === null ? undefined : new ObjectUtilityError('e1', problem);
  },
};

export type ObjectUtility = typeof ObjectUtility;

/** purple-cheetah's object utility (`compareWithSchema` and the rest). */
export function useObjectUtility(): ObjectUtility {
  return ObjectUtility;
}

/** purple-cheetah's `StringUtility` (from `@banez/string-utility`). */
export const StringUtility = {
  /** `Hello World!` → `hello-world`: lower case, spaces and `_` to `-`, every other character but a-z, 0-9 and `-` dropped. */
  toSlug(data: string): string {
    return data
      .toLowerCase()
      .replace(/ /g, '-')
      .replace(/_/g, '-')
      .replace(/[^a-z0-9-]/g, '');
  },
  /** `Hello World!` → `hello_world`: the same with `_`. */
  toSlugUnderscore(data: string): string {
    return slugUnderscore(data);
  },
  /** `size` random decimal digits. */
  numberCode(size: number): string {
    let code = '';
    for (let i = 0; i < size; i++) code += String(Math.floor(Math.random() * 10));
    return code;
  },
  /** The text between the first `begin` and the next `end` after it (`''` when either is missing). */
  textBetween(src: string, begin = '', end = ''): string {
    const start = src.indexOf(begin);
    if (start === -1) return '';
    const from = start + begin.length;
    const stop = end === '' ? src.length : src.indexOf(end, from);
    return stop === -1 ? '' : src.slice(from, stop);
  },
  /** Every text between a `begin` and the next `end`, in order. */
  allTextBetween(src: string, begin: string, end: string): string[] {
    const found: string[] = [];
    let at = 0;
    for (;;) {
      const start = src.indexOf(begin, at);
      if (start === -1) return found;
      const from = start + begin.length;
      const stop = src.indexOf(end, from);
      if (stop === -1) return found;
      found.push(src.slice(from, stop));
      at = stop + end.length;
    }
  },
};

export type StringUtility = typeof StringUtility;

/** purple-cheetah's string utility (`toSlug`, `toSlugUnderscore` and the rest). */
export function useStringUtility(): StringUtility {
  return StringUtility;
}

/**
 * The fields every MongoDB entity has, with string ids, as a mongoose schema definition
 * (`new Schema({ ...MongoDBEntitySchemaString, name: { type: String } })`).
 */
export const MongoDBEntitySchemaString = Object.freeze({
  _id: { type: String, required: true },
  createdAt: { type: Number, required: true },
  updatedAt: { type: Number, required: true },
});

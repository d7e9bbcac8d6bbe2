/** Types of values as JSON carries them: what a client reads from an answer. */

type Unsent = undefined | symbol | ((...args: never[]) => unknown);
/**
 * What a value is once through JSON: what `toJSON` gives (a Date: a string), no functions, symbols
 * or undefined fields (an array's become null), anything else as it is.
 */
export type Jsonified<T> = 0 extends 1 & T
  ? T // any stays any
  : T extends { toJSON(...args: never[]): infer Given }
    ? Jsonified<Given>
    : T extends string | number | boolean | null
      ? T
      : T extends Unsent
        ? never
        : T extends readonly (infer Item)[]
          ? (Item extends Unsent ? null : Jsonified<Item>)[]
          : T extends object
            ? // One object type, written out here (an alias would have to be named in users' declaration files).
              ({ [Key in keyof T as Sent<T[Key]> extends false ? never : undefined extends T[Key] ? never : Key]: Jsonified<T[Key]> } & {
                  // A field that may be undefined may be absent.
                  [Key in keyof T as Sent<T[Key]> extends false ? never : undefined extends T[Key] ? Key : never]?: Jsonified<Exclude<T[Key], undefined>>;
                }) extends infer Fields
              ? { [Key in keyof Fields]: Fields[Key] }
              : never
            : unknown;
/** Whether a field's value can reach JSON at all (a function's, a symbol's, undefined's cannot). */
type Sent<V> = [Exclude<V, undefined>] extends [never] ? false : Exclude<V, undefined> extends Unsent ? false : true;

/**
 * Types of values as JSON carries them: what a client reads from an answer, and what it may send.
 * Every one is written out in full, never naming the type it was made from (an enum, an interface
 * its file does not export), so that users' declaration files can always print it.
 */

type Unsent = undefined | symbol | ((...args: never[]) => unknown);
/**
 * What a value is once through JSON: what `toJSON` gives (a Date: a string), no functions, symbols
 * or undefined fields (an array's become null), an enum member as its value, a branded string or
 * number as a plain one, arrays and tuples (readonly ones too) kept, anything else as it is.
 */
export type Jsonified<T> = 0 extends 1 & T
  ? T // any stays any
  : T extends { toJSON(...args: never[]): infer Given }
    ? Jsonified<Given>
    : T extends string
      ? Exclude<keyof T, keyof string> extends never
        ? T extends `${infer Value}`
          ? Value
          : string
        : string // a brand: `string & { brand }`
      : T extends number
        ? Exclude<keyof T, keyof number> extends never
          ? `${T}` extends `${infer Value extends number}`
            ? Value
            : number
          : number
        : T extends boolean | null
          ? T
          : T extends Unsent
            ? never
            : T extends readonly unknown[]
              ? { [Index in keyof T]: T[Index] extends Unsent ? null : Jsonified<T[Index]> }
              : T extends object
                ? // One object type, written out here (an alias would have to be named in users' declaration files).
                  { [Key in keyof T as Sent<T[Key]> extends false ? never : undefined extends T[Key] ? never : Key]: Jsonified<T[Key]> } & {
                    // A field that may be undefined may be absent.
                    [Key in keyof T as Sent<T[Key]> extends false ? never : undefined extends T[Key] ? Key : never]?: Jsonified<Exclude<T[Key], undefined>>;
                  } extends infer Fields
                  ? { [Key in keyof Fields]: Fields[Key] }
                  : never
                : unknown;
/** Whether a field's value can reach JSON at all (a function's, a symbol's, undefined's cannot). */
type Sent<V> = [Exclude<V, undefined>] extends [never] ? false : Exclude<V, undefined> extends Unsent ? false : true;

/** A body a caller sends, or a function's `result`: as JSON carries it, and still absent when it may be undefined. */
export type JsonOrAbsent<T> = 0 extends 1 & T ? T : undefined extends T ? Jsonified<Exclude<T, undefined>> | undefined : Jsonified<T>;

/** A plugin's answer: as JSON carries it, `null` where the handler answered nothing (the router writes null). */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler typed as returning void is told apart from one that returns a value
export type JsonAnswer<T> = 0 extends 1 & T ? T : [T] extends [void] ? null : undefined extends T ? Jsonified<Exclude<T, undefined | void>> | null : Jsonified<T>;

/** URL-safe: RFC 3986 unreserved characters, starting with a letter or digit (so never `.` or `..`). */
const URL_SAFE = /^[A-Za-z0-9][A-Za-z0-9._~-]*$/;

export function isUrlSafe(name: unknown): name is string {
  return typeof name === 'string' && URL_SAFE.test(name);
}

/** `Hello World!` → `hello_world`: lower case, spaces and `-` to `_`, every other character but a-z, 0-9 and `_` dropped (BCMS's prop names). */
export function slugUnderscore(text: string): string {
  return text
    .toLowerCase()
    .replace(/ /g, '_')
    .replace(/-/g, '_')
    .replace(/[^a-z0-9_]/g, '');
}

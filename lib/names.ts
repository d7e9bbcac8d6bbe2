/** URL-safe: RFC 3986 unreserved characters, starting with a letter or digit (so never `.` or `..`). */
const URL_SAFE = /^[A-Za-z0-9][A-Za-z0-9._~-]*$/;

export function isUrlSafe(name: unknown): name is string {
  return typeof name === 'string' && URL_SAFE.test(name);
}

/**
 * A nested option is an object of known keys: a typo such as `jwt.secert` must not pass silently.
 * Shared by every module that checks an option of its own (options.ts, security/auth.ts,
 * http/cors.ts, openapi/info.ts), so that each refusal reads alike.
 */
export function checkKeys(value: unknown, name: string, known: readonly string[]): void {
  if (value === null || typeof value !== 'object') throw new TypeError(`option ${name} must be an object`);
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) throw new TypeError(`unknown option "${name}.${key}" (known: ${known.map((k) => `${name}.${k}`).join(', ')})`);
  }
}

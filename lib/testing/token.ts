import jwt, { type Algorithm } from 'jsonwebtoken';
import type { JwtOptions } from '../security/jwt';
import { JWTPermissionName, JWTRoleName, type JWTRole } from '../security/token';

const ROLE_NAMES = Object.values(JWTRoleName) as string[];
const PERMISSION_NAMES = Object.values(JWTPermissionName) as string[];

/**
 * A role for `token({ roles })`: a role name alone (`'ADMIN'`: that role holding every permission),
 * or the role with its permissions, as names or in BCMS's shape (`{ name: 'USER', permissions:
 * ['READ'] }`, `{ name: 'USER', permissions: [{ name: 'READ' }] }`).
 */
export type TestRole = `${JWTRoleName}` | { name: `${JWTRoleName}`; permissions: readonly (`${JWTPermissionName}` | { name: `${JWTPermissionName}` })[] };

/** What `token()` takes. */
export interface TestTokenOptions {
  /** The token's roles (`rls`); `[]` for a token that no guard accepts. */
  roles: readonly TestRole[];
  /** The payload's `userId`. Default `'test-user'`. */
  userId?: string;
  /** The payload's `props` (BCMS puts its user's details there). */
  props?: unknown;
  /** Lifetime: seconds, or a span such as `'1h'` (jsonwebtoken's form). Default `'1h'`. */
  expiresIn?: number | string;
}

/** `roles` of `token({ roles })` in BCMS's shape; throws a TypeError that says what to give. */
export function rolesOf(roles: unknown): JWTRole[] {
  if (!Array.isArray(roles)) {
    throw new TypeError(`token({ roles }): roles must be an array, such as ['ADMIN'] or [{ name: 'USER', permissions: ['READ'] }]; got ${describe(roles)}`);
  }
  return roles.map((role, index) => {
    const where = `token({ roles }): roles[${index}]`;
    if (typeof role === 'string') return { name: roleName(role, where), permissions: PERMISSION_NAMES.map((name) => ({ name: name as JWTPermissionName })) };
    if (role === null || typeof role !== 'object' || Array.isArray(role)) {
      throw new TypeError(`${where} must be a role name or { name, permissions }; got ${describe(role)}`);
    }
    const { name, permissions, ...rest } = role as { name?: unknown; permissions?: unknown };
    const extra = Object.keys(rest);
    if (extra.length > 0) throw new TypeError(`${where} has ${extra.map((key) => JSON.stringify(key)).join(', ')}: a role is { name, permissions }`);
    if (!Array.isArray(permissions)) throw new TypeError(`${where}.permissions must be an array, such as ['READ', 'WRITE'] ([] for none); got ${describe(permissions)}`);
    return {
      name: roleName(name, `${where}.name`),
      permissions: permissions.map((permission, at) => {
        const named = permission !== null && typeof permission === 'object' ? (permission as { name?: unknown }).name : permission;
        return { name: permissionName(named, `${where}.permissions[${at}]`) };
      }),
    };
  });
}

function roleName(name: unknown, where: string): JWTRoleName {
  if (typeof name !== 'string' || !ROLE_NAMES.includes(name)) throw new TypeError(`${where}: ${describe(name)} is not a role name (one of ${ROLE_NAMES.join(', ')})`);
  return name as JWTRoleName;
}

function permissionName(name: unknown, where: string): JWTPermissionName {
  if (typeof name !== 'string' || !PERMISSION_NAMES.includes(name)) {
    throw new TypeError(`${where}: ${describe(name)} is not a permission name (one of ${PERMISSION_NAMES.join(', ')})`);
  }
  return name as JWTPermissionName;
}

export const describe = (value: unknown): string => {
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
};

const HMAC = new Set<string>(['HS256', 'HS384', 'HS512']);

/**
 * Signs tokens the service accepts: with the service's `jwt.secret` (a string or a Buffer) and the
 * first HMAC algorithm of `jwt.algorithms`, with its issuer and audience. A key the kit cannot sign
 * with (a public key, express-jwt's callback) is refused when the first token is asked for.
 */
export function createTokenSigner(options: Readonly<JwtOptions>): (input: TestTokenOptions) => string {
  return (input) => {
    if (input === null || typeof input !== 'object') throw new TypeError("token({ roles }) takes an object, such as token({ roles: ['ADMIN'] })");
    const { roles, userId = 'test-user', props, expiresIn = '1h', ...rest } = input as TestTokenOptions;
    const extra = Object.keys(rest);
    if (extra.length > 0) throw new TypeError(`token(): unknown option ${extra.map((key) => JSON.stringify(key)).join(', ')} (known: roles, userId, props, expiresIn)`);
    const rls = rolesOf(roles);
    if (typeof userId !== 'string' || userId === '') throw new TypeError(`token(): userId must be a non-empty string; got ${describe(userId)}`);
    if (!(typeof expiresIn === 'string' && expiresIn !== '') && !(typeof expiresIn === 'number' && Number.isFinite(expiresIn))) {
      throw new TypeError(`token(): expiresIn must be seconds or a span such as '1h'; got ${describe(expiresIn)}`);
    }
    const { secret } = options;
    const algorithm = (options.algorithms ?? ['HS256']).find((name) => HMAC.has(name)) as Algorithm | undefined;
    if ((typeof secret !== 'string' && !Buffer.isBuffer(secret)) || algorithm === undefined) {
      throw new TypeError(
        'token(): the kit signs tokens with a shared secret, and this service verifies them otherwise: give createTestService ' +
          "{ jwt: { secret: '<a string>' } } with an HS256, HS384 or HS512 algorithm, or sign the tokens yourself",
      );
    }
    const payload = { userId, rls, ...(props === undefined ? {} : { props }) };
    const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);
    const issuer = first(options.issuer);
    const audience = first(options.audience);
    try {
      return jwt.sign(payload, secret, {
        algorithm,
        expiresIn: expiresIn as jwt.SignOptions['expiresIn'],
        ...(issuer === undefined ? {} : { issuer }),
        ...(audience === undefined ? {} : { audience }),
      });
    } catch (error) {
      throw new TypeError(`token(): ${(error as Error).message}`);
    }
  };
}

/**
 * What a BCMS access token is: its role and permission names, its payload, and the one rule that
 * reads them (`tokenAllows`). Plain data, imported by the verifier, the guards and the types alike.
 */

/** Role names of a BCMS token (`rls[].name`). */
export enum JWTRoleName {
  SUDO = 'SUDO',
  DEV = 'DEV',
  ADMIN = 'ADMIN',
  OWNER = 'OWNER',
  MANAGER = 'MANAGER',
  SERVICE = 'SERVICE',
  EDITOR = 'EDITOR',
  SUPPORT = 'SUPPORT',
  USER = 'USER',
  GUEST = 'GUEST',
}

/** Permission names of a role (`rls[].permissions[].name`). */
export enum JWTPermissionName {
  READ = 'READ',
  WRITE = 'WRITE',
  DELETE = 'DELETE',
  EXECUTE = 'EXECUTE',
}

/** One permission of a role in a BCMS access token: `READ`, `WRITE`, `DELETE` or `EXECUTE`. */
export interface JWTPermission {
  name: JWTPermissionName;
}

/** A role of a BCMS access token (`rls`): its name (`ADMIN`, `USER`, ...) and its permissions. */
export interface JWTRole {
  name: JWTRoleName;
  permissions: JWTPermission[];
}

/**
 * A BCMS token payload: `exp` and `iat` in seconds. `props` is whatever the host put there (BCMS
 * puts its user's `personal`, `address` and `policy`): `Props` types it, unchecked.
 */
export interface JWTPayload<Props = unknown> {
  userId: string;
  rls: JWTRole[];
  iat: number;
  exp: number;
  iss?: string;
  jti?: string;
  props?: Props;
}

/** A verified token, as the guard hands it to a handler. */
export interface JWT<Props = unknown> {
  header: { alg: string; typ?: string; kid?: string };
  payload: JWTPayload<Props>;
  signature: string;
}

/** What the JWT guard yields: spread into the handler's context. */
export interface JWTPreRequestHandlerResult<Props = unknown> {
  accessToken: JWT<Props>;
}

/** Whether some role of the token is listed and holds the permission. */
export function tokenAllows(payload: { rls?: unknown }, roles: readonly JWTRoleName[] | undefined, permission: JWTPermissionName): boolean {
  if (!Array.isArray(payload.rls)) return false;
  return payload.rls.some(
    (role: Partial<JWTRole> | null) =>
      role !== null &&
      typeof role === 'object' &&
      (roles === undefined || roles.includes(role.name as JWTRoleName)) &&
      Array.isArray(role.permissions) &&
      role.permissions.some((granted) => granted !== null && granted?.name === permission),
  );
}

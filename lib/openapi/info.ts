import fs from 'node:fs';
import path from 'node:path';
import { checkKeys } from '../option-keys';

/** Who may read the OpenAPI document over HTTP. */
export type OpenApiAccess = 'public' | 'token' | 'off';

/** The document's `info` (OpenAPI 3.1): what the app says of its API. */
export interface OpenApiInfo {
  /** Default: `admin.title` (`BCMS` unless set). */
  title?: string;
  /** Default: the `version` of the `package.json` in the working directory (the app's, as npm starts it), else this package's. */
  version?: string;
  /** Default: a paragraph on the router's error bodies. */
  description?: string;
  /** `name`, and an SPDX `identifier` or a `url` (OpenAPI's license object). Default: none. */
  license?: { name: string; identifier?: string; url?: string };
}

/** The `openapi` option: the access alone (`'public'`, `'token'`, `'off'`), or `{ access?, info? }`. */
export type OpenApiOption = OpenApiAccess | { access?: OpenApiAccess; info?: OpenApiInfo };

const ACCESS = ['public', 'token', 'off'];

/** The option, checked: its access (`'public'` by default) and the `info` fields given. */
export function resolveOpenApi(option: OpenApiOption | undefined): { access: OpenApiAccess; info: Readonly<OpenApiInfo> } {
  if (option === undefined || typeof option === 'string') {
    const access = option ?? 'public';
    if (!ACCESS.includes(access)) throw new TypeError(`option openapi must be 'public', 'token' or 'off', got ${JSON.stringify(access)}`);
    return { access, info: Object.freeze({}) };
  }
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new TypeError(`option openapi must be 'public', 'token', 'off' or { access?, info? }, got ${JSON.stringify(option)}`);
  }
  checkKeys(option, 'openapi', ['access', 'info']);
  const access = option.access ?? 'public';
  if (!ACCESS.includes(access)) throw new TypeError(`option openapi.access must be 'public', 'token' or 'off', got ${JSON.stringify(access)}`);
  const info = option.info ?? {};
  if (info === null || typeof info !== 'object' || Array.isArray(info)) throw new TypeError('option openapi.info must be an object { title?, version?, description?, license? }');
  checkKeys(info, 'openapi.info', ['title', 'version', 'description', 'license']);
  for (const key of ['title', 'version', 'description'] as const) {
    const value = info[key];
    if (value !== undefined && (typeof value !== 'string' || value.trim() === '')) throw new TypeError(`option openapi.info.${key} must be a non-empty string, got ${JSON.stringify(value)}`);
  }
  const { license } = info;
  if (license !== undefined) {
    if (license === null || typeof license !== 'object' || Array.isArray(license)) throw new TypeError('option openapi.info.license must be { name, identifier? , url? }');
    checkKeys(license, 'openapi.info.license', ['name', 'identifier', 'url']);
    if (typeof license.name !== 'string' || license.name.trim() === '') throw new TypeError('option openapi.info.license.name must be a non-empty string (the license, as "MIT")');
    for (const key of ['identifier', 'url'] as const) {
      if (license[key] !== undefined && (typeof license[key] !== 'string' || license[key] === '')) throw new TypeError(`option openapi.info.license.${key} must be a non-empty string`);
    }
    // OpenAPI 3.1: the two are mutually exclusive.
    if (license.identifier !== undefined && license.url !== undefined) throw new TypeError('option openapi.info.license takes an identifier or a url, not both (OpenAPI 3.1)');
  }
  return { access, info: Object.freeze({ ...info, ...(license === undefined ? {} : { license: Object.freeze({ ...license }) }) }) };
}

/**
 * The version the document gives when `info.version` is not: the app's, read once from the
 * `package.json` of the working directory (where `npm start` runs it); else `fallback`.
 */
export function appVersion(fallback: string, dir: string = process.cwd()): string {
  try {
    const { version } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof version === 'string' && version !== '' ? version : fallback;
  } catch {
    return fallback;
  }
}

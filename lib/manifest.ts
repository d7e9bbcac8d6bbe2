import fs from 'node:fs';
import path from 'node:path';

/** This package's own folder (a checkout, or an installed copy in some node_modules): beside lib/ and dist/ alike. */
export const PACKAGE_ROOT = path.resolve(__dirname, '..');

/** What this package's own package.json says that its code reads. */
interface OwnManifest {
  version: string;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

let manifest: OwnManifest | undefined;

/** This package's package.json, read once, when first asked for. */
export function ownManifest(): OwnManifest {
  manifest ??= JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as OwnManifest;
  return manifest;
}

/**
 * `window.bcms`, typed for plugin UIs: any import from `bcms-extensions/sdk` (or
 * `"types": ["bcms-extensions/sdk"]` in tsconfig) declares it, and every .tsx file gets completion.
 */
import type { BcmsGlobal } from './types';

declare global {
  interface Window {
    bcms: BcmsGlobal;
  }
}

// Every type of the SDK, so that the list here cannot drift from types.ts.
export type * from './types';

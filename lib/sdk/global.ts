/**
 * `window.bcms.sdk`, typed for plugin UIs: any import from `bcms-extensions/sdk` (or
 * `"types": ["bcms-extensions/sdk"]` in tsconfig) declares it, and every .tsx file gets completion.
 */
import type { BcmsSdk } from './types';

declare global {
  interface Window {
    bcms: { sdk: BcmsSdk };
  }
}

export type { BcmsSdk, BcmsSdkError, BcmsSdkFunction, BcmsSdkPlugin, BcmsEntry, BcmsTemplate } from './types';

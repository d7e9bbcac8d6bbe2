/**
 * `window.bcms.sdk`, typed for plugin UIs: add `/// <reference types="bcms-extensions/sdk" />` (or
 * `"types": ["bcms-extensions/sdk"]` in tsconfig) and every .tsx file gets completion for it.
 */
import type { BcmsSdk } from './types';

declare global {
  interface Window {
    bcms: { sdk: BcmsSdk };
  }
}

export type { BcmsSdk, BcmsSdkError, BcmsSdkFunction, BcmsSdkPlugin, BcmsEntry, BcmsTemplate } from './types';

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

export type {
  BcmsEntry,
  BcmsEntryCreateData,
  BcmsEntryLite,
  BcmsEntryMeta,
  BcmsEntryUpdateData,
  BcmsGlobal,
  BcmsJwt,
  BcmsNotification,
  BcmsSdk,
  BcmsSdkError,
  BcmsSdkFunction,
  BcmsSdkPlugin,
  BcmsSdkPluginPolicy,
  BcmsSdkSendConfig,
  BcmsTemplate,
  BcmsTemplateCreateData,
  BcmsTemplateUpdateData,
  BcmsThrowable,
  BcmsUser,
  BcmsUserCustomPool,
} from './types';

/**
 * `bcms-extensions/ui`: what BCMS plugin UIs import from `@becomes/cms-ui` (components, directives,
 * types), for Vue 3. The look comes with `import 'bcms-extensions/ui/styles.css'`.
 */
export {
  BCMSButton,
  BCMSCodeEditor,
  BCMSIcon,
  BCMSManagerNav,
  BCMSModalWrapper,
  BCMSPasswordInput,
  BCMSPluginLayout,
  BCMSSpinner,
  BCMSSpinnerSmall,
  BCMSTextAreaInput,
  BCMSTextInput,
  BCMSToggleInput,
} from './components.js';
export type { BCMSManagerNavItem } from './components.js';
export { clickOutside, cy, tooltip } from './directives.js';
export type { BCMSTooltipInput } from './directives.js';
export type { BCMSGlobalScopeMain, BCMSModalInputDefaults, BCMSModalServiceItem, BCMSStoreGetterQuery } from './types.js';

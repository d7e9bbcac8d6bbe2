export { bcmsExtensions } from './router';
export type { BcmsExtensionsRouter, BcmsRegistry } from './router';
export type { BcmsExtensionsOptions } from './options';
export * from './api';

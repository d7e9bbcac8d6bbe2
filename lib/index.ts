import { bcmsLayer } from './bcms/layer'; // BCMS layer
import { addLayer } from './layer'; // BCMS layer

// The package's entry point composes the core with its layers (lib/layer.ts). The BCMS layer is
// lib/bcms/: without that folder and the lines marked "BCMS layer" here, in api.ts and in
// cli/bin.ts, the core stands alone.
addLayer(bcmsLayer); // BCMS layer

export { bcmsExtensions } from './router';
export type { BcmsExtensionsRouter, BcmsRegistry } from './router';
export type { BcmsExtensionsOptions } from './options';
export * from './api';

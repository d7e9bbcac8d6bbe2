/** purple-cheetah's and BCMS's type names that plugins import, as aliases of this package's own. */
import type { BcmsController, BcmsPluginPolicy, PreRequestHandler } from '../plugin/types';

/** purple-cheetah's `Controller`: what `createController` returns. */
export type Controller = BcmsController<unknown>;
/** purple-cheetah's `Middleware`: a plugin may list some; they are accepted but not mounted (the host owns its middleware). */
export type Middleware = unknown;
/** One setting of a plugin's policy (`createBcmsPlugin({ policy })`). */
export type BCMSPluginPolicy = BcmsPluginPolicy;
/** purple-cheetah's pre-request handler type: what `createControllerMethod({ preRequestHandler })` takes. */
export type ControllerMethodPreRequestHandler<Result = unknown> = PreRequestHandler<Result>;

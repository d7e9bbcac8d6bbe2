import type { BcmsController, BcmsControllerMethods, BcmsPlugin } from './types';

/**
 * Each controller's methods, made once: `setup()` (BCMS's, run once when a controller is mounted),
 * then `methods(setupResult)`. Kept by controller object, so a controller that several routers or
 * route tables share is set up once, as BCMS sets it up once.
 */
const made = new WeakMap<BcmsController, BcmsControllerMethods>();
const settingUp = new WeakMap<BcmsController, Promise<void>>();

/** Whether a controller's methods wait for its `setup` to run. */
export function awaitsSetup(controller: BcmsController): boolean {
  return typeof controller.setup === 'function' && !made.has(controller);
}

/**
 * A controller's methods, made now if it has no `setup` (`methods({})`); `undefined` while its
 * setup has not run. Throws what `methods` throws, naming the controller.
 */
export function methodsOf(controller: BcmsController, owner: string): BcmsControllerMethods | undefined {
  const known = made.get(controller);
  if (known !== undefined) return known;
  if (typeof controller.setup === 'function') return undefined;
  return make(controller, {}, owner);
}

function make(controller: BcmsController, setupResult: unknown, owner: string): BcmsControllerMethods {
  if (typeof controller.methods !== 'function') throw new TypeError(`${owner}: methods must be a function returning the methods`);
  const methods = controller.methods(setupResult ?? {});
  if (methods === null || typeof methods !== 'object') throw new TypeError(`${owner}: methods() must return an object of methods`);
  made.set(controller, methods);
  return methods;
}

/**
 * Runs the `setup` of every controller of these plugins that has one and has not run, one at a
 * time in the order they are declared (setups may depend on what an earlier one built), and makes
 * their methods. Rejects with the first that throws, naming its plugin and controller.
 */
export async function setUpControllers(plugins: readonly BcmsPlugin[]): Promise<void> {
  for (const plugin of plugins) {
    for (const controller of plugin.controllers ?? []) {
      if (controller === null || typeof controller !== 'object' || !awaitsSetup(controller)) continue;
      let running = settingUp.get(controller);
      if (running === undefined) {
        const owner = `plugin "${plugin.name}", controller "${controller.name}"`;
        running = (async () => {
          let result: unknown;
          try {
            result = await (controller.setup as NonNullable<BcmsController['setup']>)({ controllerName: controller.name, controllerPath: controller.path });
          } catch (error) {
            throw new Error(`${owner}: setup() threw: ${(error as Error)?.message ?? String(error)}`, { cause: error });
          }
          make(controller, result, owner);
        })();
        settingUp.set(controller, running);
        // A setup that failed may be tried again by a later router or deployment.
        running.catch(() => settingUp.delete(controller));
      }
      await running;
    }
  }
}

import { eventManagerOf } from '../events/emit';
import type { BcmsEventManager } from '../events/types';
import { boundStore } from './repo';

/** BCMS's name for the manager's type, and for the manager itself. */
export type BCMSEventManager = BcmsEventManager;
/** BCMS's event manager: `emit` goes to the database of the router built last (in an isolate, its own session). */
export const BCMSEventManager: BcmsEventManager = eventManagerOf(() => boundStore('useBcmsEventManager().emit'));

/** BCMS's `useBcmsEventManager()`: events emitted with it reach every matching handler, on every instance. */
export function useBcmsEventManager(): BcmsEventManager {
  return BCMSEventManager;
}

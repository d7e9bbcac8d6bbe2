import type { ContentStore } from '../db/store';
import type { BcmsEventManager } from './types';

/**
 * An event manager over a store's database: `emit` records the event, and a delivery per matching
 * handler, in one statement (`bcms_emit_event`, which runs as the service's tables' owner), so it
 * is delivered as a write's events are: at least once, once across instances. In an isolate the
 * store is extension code's own session, which may call that function and nothing else of these tables.
 */
export function eventManagerOf(store: () => ContentStore): BcmsEventManager {
  return {
    async emit(scope, method, payload) {
      if (typeof scope !== 'string' || scope === '' || typeof method !== 'string' || method === '') {
        throw new TypeError('emit(scope, method, payload): scope and method must be strings (BCMSEventConfigScope, BCMSEventConfigMethod, or your own)');
      }
      const json = JSON.stringify(payload ?? null);
      await store().run((db) => db.raw('select bcms_emit_event(?, ?, null, ?::jsonb)', [scope, method, json]));
    },
  };
}

import type { ContentStore } from '../db/store';
import type { BcmsEventManager } from './types';

/** The largest payload `emit` takes, in bytes of its JSON (`bcms_emit_event` holds to it as well). */
export const EMIT_PAYLOAD_LIMIT = 1024 * 1024;
/** Scopes only writes fire (and `ALL`, which handlers listen to, not events carry). */
const FIRED_BY_WRITES = new Set(['ENTRY', 'TEMPLATE', 'ALL']);

/**
 * An event manager over a store's database: `emit` records the event, and a delivery per matching
 * handler, in one statement (`bcms_emit_event`, which runs as the tables' owner), so that it is
 * delivered as a write's events are: at least once, once across instances. In an isolate the store
 * is extension code's own session, which may call that function and nothing else of these tables.
 */
export function eventManagerOf(store: () => ContentStore): BcmsEventManager {
  return {
    async emit(scope, method, payload) {
      for (const [name, value] of [
        ['scope', scope],
        ['method', method],
      ] as const) {
        if (typeof value !== 'string' || value === '' || value.length > 200) {
          throw new TypeError(`emit(scope, method, payload): ${name} must be a string of 1 to 200 characters (BCMSEventConfigScope, BCMSEventConfigMethod, or your own)`);
        }
      }
      if (FIRED_BY_WRITES.has(scope)) throw new TypeError(`emit: ${scope} events are fired by the writes themselves (every write of an entry or a template); emit a scope of your own`);
      const json = JSON.stringify(payload ?? null);
      if (Buffer.byteLength(json) > EMIT_PAYLOAD_LIMIT) throw new TypeError('emit: the payload is larger than 1 MB as JSON; emit an id and let the handler read the rest');
      await store().run((db) => db.raw('select bcms_emit_event(?, ?, ?::jsonb)', [scope, method, json]));
    },
  };
}

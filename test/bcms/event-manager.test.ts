import { bcmsExtensions, BCMSEventManager, createBcmsEvent, useBcmsEventManager, type BCMSEventHandlerData } from '../../lib';
import { memoryLogger } from '../support/app';
import { sharedTestDatabase } from '../support/database';
import { until } from '../support/wait';

// BCMS's event manager (DESIGN.md "Events and jobs"): `useBcmsEventManager().emit(scope, method,
// payload)` records a custom event on the database of the router built last, delivered as the
// router's own `emit` delivers it.

test('useBcmsEventManager().emit reaches the handlers of its scope; BCMSEventManager is the same manager', async () => {
  const seen: BCMSEventHandlerData[] = [];
  const handler = createBcmsEvent(async () => ({ name: 'bcms-manager-test', config: { scope: 'BCMS_MANAGER_TEST', method: 'ALL' }, handler: async (data) => void seen.push(data) }));
  const router = bcmsExtensions({ events: [handler] }, { database: (await sharedTestDatabase()).knex, logger: memoryLogger().logger });
  try {
    await router.ready;
    expect(useBcmsEventManager()).toBe(BCMSEventManager);
    await useBcmsEventManager().emit('BCMS_MANAGER_TEST', 'PING', { n: 1 });
    await BCMSEventManager.emit('BCMS_MANAGER_TEST', 'PONG', { n: 2 });
    await until(() => seen.length >= 2);
    expect(seen.map((data) => [data.method, data.payload]).sort()).toEqual([
      ['PING', { n: 1 }],
      ['PONG', { n: 2 }],
    ]);
    await expect(useBcmsEventManager().emit('TEMPLATE', 'ADD', {})).rejects.toThrow(/TEMPLATE events are fired by the writes themselves/);
  } finally {
    await router.close();
  }
});

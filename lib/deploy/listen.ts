import type { Knex } from 'knex';
import type { Logger } from '../logger';
import { DEPLOYMENTS_CHANNEL } from './store';

interface PgNotification {
  channel: string;
  payload?: string;
}

interface PgConnection {
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: PgNotification) => void): void;
  on(event: 'error' | 'end', listener: (error?: Error) => void): void;
}

interface PgliteLike {
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
}

const RECONNECT_MS = 1000;

/**
 * Calls `onChange` whenever a deployment changes, on any instance: LISTEN on a connection of its
 * own (the Postgres server), or PGlite's own listen (the embedded database, one process). A lost
 * connection is made again, and `onChange` then runs once, for what was missed meanwhile.
 * Resolves to a function that stops listening.
 */
export async function listenForDeployments(knex: Knex, logger: Logger, onChange: () => void): Promise<() => Promise<void>> {
  const client = knex.client as { config: { client?: unknown; connection?: { pglite?: PgliteLike } }; acquireRawConnection(): Promise<PgConnection>; destroyRawConnection(c: PgConnection): Promise<void> };
  const pglite = client.config.connection?.pglite;
  if (pglite !== undefined && typeof pglite.listen === 'function') {
    const unlisten = await pglite.listen(DEPLOYMENTS_CHANNEL, () => onChange());
    return unlisten;
  }
  let stopped = false;
  let connection: PgConnection | undefined;
  const connect = async (): Promise<void> => {
    while (!stopped) {
      try {
        const made = await client.acquireRawConnection();
        made.on('notification', (message) => {
          if (message.channel === DEPLOYMENTS_CHANNEL) onChange();
        });
        const lost = (error?: Error): void => {
          if (stopped || connection !== made) return;
          connection = undefined;
          logger.warn({ err: error }, 'bcms-extensions: lost the connection that listens for deployments; connecting again');
          setTimeout(() => void connect().then(onChange), RECONNECT_MS).unref();
        };
        made.on('error', lost);
        made.on('end', lost);
        await made.query(`LISTEN ${DEPLOYMENTS_CHANNEL}`);
        connection = made;
        return;
      } catch (error) {
        logger.warn({ err: error }, 'bcms-extensions: cannot listen for deployments yet; trying again');
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS).unref());
      }
    }
  };
  await connect();
  return async () => {
    stopped = true;
    const open = connection;
    connection = undefined;
    if (open !== undefined) await client.destroyRawConnection(open).catch(() => {});
  };
}

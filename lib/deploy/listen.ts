import type { Knex } from 'knex';
import type { Logger } from '../logger';
import { DEPLOYMENTS_CHANNEL } from './store';

interface PgNotification {
  channel: string;
  payload?: string;
}

interface PgConnection {
  /** pg's socket: unref'd, so that listening never keeps the process alive by itself. */
  connection?: { stream?: { unref?(): void } };
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: PgNotification) => void): void;
  on(event: 'error' | 'end', listener: (error?: Error) => void): void;
}

interface PgliteLike {
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
}

const RECONNECT_MS = 1000;
const MAX_WAIT_MS = 30_000;

/**
 * Calls `onChange` whenever a deployment changes, on any instance (see `listenOn`); each time it is
 * listening again, `onChange` runs once, for what it may have missed.
 */
export function listenForDeployments(knex: Knex, logger: Logger, onChange: () => void): () => Promise<void> {
  return listenOn(knex, logger, { channel: DEPLOYMENTS_CHANNEL, what: 'deployments', onNotify: () => onChange(), onListening: onChange });
}

/**
 * Calls `onNotify` with the payload of every NOTIFY on `channel`, from any instance: LISTEN on a
 * connection of its own (the Postgres server), or PGlite's own listen (the embedded database, one
 * process). Until the database answers, and after a lost connection, it tries again (1 s, then
 * longer, up to 30 s), and calls `onListening` each time it listens again. Returns at once a
 * function that stops it, whatever state it is in.
 */
export function listenOn(knex: Knex, logger: Logger, options: { channel: string; what: string; onNotify: (payload: string | undefined) => void; onListening?: () => void }): () => Promise<void> {
  const { channel, what, onNotify, onListening } = options;
  const client = knex.client as {
    pool?: unknown;
    config: { connection?: { pglite?: PgliteLike } };
    acquireRawConnection(): Promise<PgConnection>;
    destroyRawConnection(c: PgConnection): Promise<void>;
  };
  let stopped = false;
  const pglite = client.config.connection?.pglite;
  if (pglite !== undefined && typeof pglite.listen === 'function') {
    const unlisten = pglite
      .listen(channel, (payload) => onNotify(payload))
      .catch((error: unknown) => {
        logger.error({ err: error }, `bcms-extensions: cannot listen for ${what}`);
        return async () => {};
      });
    return async () => {
      stopped = true;
      await (await unlisten)().catch(() => {});
    };
  }
  let connection: PgConnection | undefined;
  let wait = RECONNECT_MS;
  // Stopped by close(), or when the pool is gone (a Knex instance the host destroyed).
  const over = (): boolean => stopped || client.pool === undefined;
  const connect = async (): Promise<void> => {
    while (!over()) {
      try {
        const made = await client.acquireRawConnection();
        if (over()) {
          await client.destroyRawConnection(made).catch(() => {});
          return;
        }
        made.on('notification', (message) => {
          if (message.channel === channel) onNotify(message.payload);
        });
        const lost = (error?: Error): void => {
          if (over() || connection !== made) return;
          connection = undefined;
          logger.warn({ err: error }, `bcms-extensions: lost the connection that listens for ${what}; connecting again`);
          setTimeout(() => void connect(), RECONNECT_MS).unref();
        };
        made.on('error', lost);
        made.on('end', lost);
        await made.query(`LISTEN ${channel}`);
        if (over()) {
          // Stopped while LISTEN was on its way: nobody else would close this connection.
          await client.destroyRawConnection(made).catch(() => {});
          return;
        }
        connection = made;
        made.connection?.stream?.unref?.();
        wait = RECONNECT_MS;
        onListening?.();
        return;
      } catch (error) {
        if (over()) return;
        logger.warn({ err: error, retryInMs: wait }, `bcms-extensions: cannot listen for ${what} yet; trying again`);
        await new Promise((resolve) => setTimeout(resolve, wait).unref());
        wait = Math.min(wait * 2, MAX_WAIT_MS);
      }
    }
  };
  void connect();
  // A Knex instance destroyed without router.close() (the host's, say): let its LISTEN go too.
  const watch = setInterval(() => {
    if (!over() || connection === undefined) return;
    const open = connection;
    connection = undefined;
    void client.destroyRawConnection(open).catch(() => {});
  }, 1000);
  watch.unref();
  return async () => {
    stopped = true;
    clearInterval(watch);
    const open = connection;
    connection = undefined;
    if (open !== undefined) await client.destroyRawConnection(open).catch(() => {});
  };
}

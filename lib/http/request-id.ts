import { randomBytes } from 'node:crypto';

/**
 * Request ids: a random prefix per router and a counter, unique across restarts and instances
 * (48 random bits) and far cheaper per request than a random UUID.
 */
export function createRequestIds(): () => string {
  const prefix = randomBytes(6).toString('hex');
  let count = 0;
  return () => `${prefix}-${(++count).toString(36)}`;
}

import { defaultOptions } from '../options';
import { EXTENSION_ROLE, extensionRoleSql } from '../db/extension-role';
import { parseArgs, UsageError, type Io } from './_io';

export const DB_USAGE = `  db extension-role [--schema NAME] [--role NAME] [--timeout-ms MS]
                                            Print the SQL that makes the database role extension
                                            queries run as (content tables only), for a superuser
                                            to run where the service's user may not make roles.
                                            --schema: the service's schema (default: the first of
                                            the search path). --role: default ${EXTENSION_ROLE} (another
                                            name needs database.extensionUrl). --timeout-ms: its
                                            statement and idle-transaction time-outs (default
                                            ${defaultOptions.functionTimeoutMs}).
`;

/** `bcms-ext db extension-role`: prints the SQL (with a new random password); runs nothing. */
export async function runDb(args: string[], io: Io): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'extension-role') throw new UsageError(`expected "extension-role", got ${JSON.stringify(sub ?? '')}`);
  const { positionals, flags } = parseArgs(rest, { schema: 'string', role: 'string', 'timeout-ms': 'string' });
  if (positionals.length > 0) throw new UsageError(`unexpected ${JSON.stringify(positionals.join(' '))}`);
  const schema = flags.schema as string | undefined;
  const role = flags.role as string | undefined;
  const timeout = flags['timeout-ms'] === undefined ? defaultOptions.functionTimeoutMs : Number(flags['timeout-ms']);
  if (!Number.isInteger(timeout) || timeout <= 0) throw new UsageError(`--timeout-ms must be a positive integer of milliseconds, got ${String(flags['timeout-ms'])}`);
  for (const [flag, value] of [
    ['--schema', schema],
    ['--role', role],
  ] as const) {
    if (value !== undefined && (value === '' || value.includes('\0'))) throw new UsageError(`${flag} must be a name`);
  }
  io.out(`${extensionRoleSql({ schema, role, timeoutMs: timeout })}\n`);
  return 0;
}

/** Where a command writes and what it reads: injectable, so that tests run the CLI without spawning. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  env: NodeJS.ProcessEnv;
  /** Where project files (bcms-bundle/, .env) are; default the working directory. */
  cwd?: string;
}

export function defaultIo(): Io {
  return { out: (text) => process.stdout.write(text), err: (text) => process.stderr.write(text), env: process.env };
}

/** A command's mistake in its arguments or setup: printed as `bcms-ext <command>: <message>`, exit 1. */
export class UsageError extends Error {}

/**
 * Splits arguments into positionals and `--flag value` / `--flag=value` / boolean `--flag`.
 * An unknown flag, or one without its value, is a UsageError.
 */
export function parseArgs(
  args: readonly string[],
  spec: Readonly<Record<string, 'string' | 'boolean'>>,
): { positionals: string[]; flags: Record<string, string | true | undefined> } {
  const positionals: string[] = [];
  const flags: Record<string, string | true | undefined> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const equals = arg.indexOf('=');
    const name = arg.slice(2, equals === -1 ? undefined : equals);
    const kind = spec[name];
    if (kind === undefined) throw new UsageError(`unknown option --${name} (known: ${Object.keys(spec).map((known) => `--${known}`).join(', ') || 'none'})`);
    if (kind === 'boolean') {
      if (equals !== -1) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    const value = equals === -1 ? args[++i] : arg.slice(equals + 1);
    if (value === undefined || (equals === -1 && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
    flags[name] = value;
  }
  return { positionals, flags };
}

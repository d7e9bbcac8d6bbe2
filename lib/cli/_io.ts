import { parseArgs as parseArgsOf } from 'node:util';

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
 * Splits arguments into positionals and `--flag value` / `--flag=value` / boolean `--flag`, with
 * `node:util`'s parseArgs. An unknown flag, or one without its value, is a UsageError that says so.
 */
export function parseArgs(args: readonly string[], spec: Readonly<Record<string, 'string' | 'boolean'>>): { positionals: string[]; flags: Record<string, string | true | undefined> } {
  const options = Object.fromEntries(Object.entries(spec).map(([name, type]) => [name, { type }]));
  // `--data -1` is a value, as it always was here: parseArgs would call any value starting with "-"
  // ambiguous, so a string flag and its value become `--data=-1` first. A value starting with "--"
  // is still taken for a flag, and the flag for one without its value.
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const next = args[i + 1];
    if (arg.startsWith('--') && !arg.includes('=') && spec[arg.slice(2)] === 'string' && next !== undefined && !next.startsWith('--')) {
      joined.push(`${arg}=${next}`);
      i++;
    } else {
      joined.push(arg);
    }
  }
  let parsed: ReturnType<typeof parseArgsOf<{ args: string[]; options: typeof options; strict: true; allowPositionals: true }>>;
  try {
    parsed = parseArgsOf({ args: joined, options, strict: true, allowPositionals: true });
  } catch (error) {
    throw usageErrorOf(error, spec);
  }
  const flags: Record<string, string | true | undefined> = {};
  for (const [name, value] of Object.entries(parsed.values)) if (value !== undefined && value !== false) flags[name] = value as string | true;
  return { positionals: parsed.positionals, flags };
}

/** parseArgs's errors, worded as the rest of the CLI words them. */
function usageErrorOf(error: unknown, spec: Readonly<Record<string, 'string' | 'boolean'>>): Error {
  const { code, message } = error as { code?: string; message?: string };
  const flag = /'(-[^' ]+)/.exec(message ?? '')?.[1] ?? '';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const known =
      Object.keys(spec)
        .map((name) => `--${name}`)
        .join(', ') || 'none';
    return new UsageError(`unknown option ${flag} (known: ${known})`);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    return new UsageError(spec[flag.replace(/^-+/, '')] === 'boolean' ? `${flag} takes no value` : `${flag} needs a value`);
  }
  return error as Error;
}

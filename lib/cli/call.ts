import fs from 'node:fs';
import { createFunctionClient, FunctionCallError, type FunctionClient, type SigningKey } from '../client';
import { parseArgs, UsageError, type Io } from './_io';
import { readDotEnv } from './dotenv';

export const CALL_USAGE = `  call NAME [--data JSON | --data @FILE] [--url URL] [--idempotency-key KEY]
                                            Call a function and print its result. Signed when
                                            BCMS_KEY_ID is set, with BCMS_KEY_SECRET (hmac-sha256)
                                            or BCMS_PRIVATE_KEY_FILE (rsa-sha256, ed25519).
                                            Service: --url, else BCMS_URL, else http://localhost:8080.
                                            Variables come from the environment, then a .env here.
                                            With --idempotency-key, calling again with the same
                                            key and data gets the first answer (24 h), never a
                                            second run: retry that way after a 503 or no answer.
`;

/** What to do next, by the code a call failed with. */
const NEXT: Readonly<Record<string, string>> = {
  SIGNATURE_REQUIRED: 'The function is private: set BCMS_KEY_ID and BCMS_KEY_SECRET to a key that lists it (bcms-ext keys create).',
  SIGNATURE_INVALID: 'Check BCMS_KEY_ID and its BCMS_KEY_SECRET (or BCMS_PRIVATE_KEY_FILE), and that the key still exists (bcms-ext keys list).',
  SIGNATURE_EXPIRED: "This machine's clock and the service's differ by more than the accepted skew: set the clock right.",
  SIGNATURE_REPLAYED: 'The service had already accepted this very request: call again (each call is signed anew).',
  DIGEST_MISMATCH: 'Something between here and the service changed the body (a proxy?): the body must arrive as it was signed.',
  BODY_ALREADY_PARSED: "The service's app parses bodies before bcms-extensions: its router must be mounted before express.json().",
  KEY_FORBIDDEN: 'The key is blocked, or does not list this function: create a key with --functions NAME.',
  FUNCTION_NOT_FOUND: 'Check the function name; the service lists no function by that name.',
  NETWORK_ERROR: 'Is the service running there? Set BCMS_URL (or --url) to where it listens.',
  INVALID_RESPONSE: 'Set BCMS_URL (or --url) to the service that mounts bcms-extensions.',
  DATABASE_OUTCOME_UNKNOWN: 'The write may or may not have been made: call again with the same --idempotency-key (and data) to learn which, without writing twice.',
  IDEMPOTENCY_KEY_REUSED: 'This key was used with other data: give every different call a key of its own.',
  IDEMPOTENCY_KEY_IN_USE: 'A call with this key is still running: call again in a moment with the same key.',
  IDEMPOTENCY_KEY_INVALID: 'Give --idempotency-key 1 to 255 printable ASCII characters, such as a UUID.',
};

export async function runCall(args: readonly string[], io: Io): Promise<number> {
  const { positionals, flags } = parseArgs(args, { data: 'string', url: 'string', 'idempotency-key': 'string' });
  if (positionals.length !== 1) throw new UsageError('call takes one function name: bcms-ext call NAME [--data JSON]');
  const name = positionals[0] as string;
  const body = readData(flags.data as string | undefined);
  // The environment, then a .env here, as the other commands read them.
  const dotEnv = readDotEnv(io.cwd ?? process.cwd());
  const env = { ...dotEnv, ...io.env };
  const url = (flags.url as string | undefined) ?? (env.BCMS_URL || 'http://localhost:8080');
  // A key's secret or private key file from one place: the environment's when it sets either (a
  // project's .env names its deploy key's file, which must not pair with a secret given here).
  const material = io.env.BCMS_KEY_SECRET || io.env.BCMS_PRIVATE_KEY_FILE ? io.env : dotEnv;
  let client: FunctionClient;
  try {
    client = createFunctionClient({ url, key: signingKey({ ...env, BCMS_KEY_SECRET: material.BCMS_KEY_SECRET, BCMS_PRIVATE_KEY_FILE: material.BCMS_PRIVATE_KEY_FILE }) });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  try {
    const idempotencyKey = flags['idempotency-key'] as string | undefined;
    const result = await client.call(name, body, idempotencyKey === undefined ? undefined : { idempotencyKey });
    io.out(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof FunctionCallError)) throw error;
    const status = error.status === 0 ? '' : `${error.status} `;
    const next = NEXT[error.code];
    io.err(`bcms-ext call: ${status}${error.code}: ${error.message}\n${next === undefined ? '' : `${next}\n`}`);
    return 1;
  }
}

/** `--data '<json>'`, or `--data @file.json`; none sends no body. */
function readData(data: string | undefined): unknown {
  if (data === undefined) return undefined;
  let text = data;
  if (data.startsWith('@')) {
    try {
      text = fs.readFileSync(data.slice(1), 'utf8');
    } catch (error) {
      throw new UsageError(`cannot read ${data.slice(1)}: ${(error as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`--data is not JSON: ${text.length > 80 ? `${text.slice(0, 80)}...` : text}`);
  }
}

function signingKey(env: NodeJS.ProcessEnv): SigningKey | undefined {
  const keyId = env.BCMS_KEY_ID;
  if (!keyId) {
    if (env.BCMS_KEY_SECRET || env.BCMS_PRIVATE_KEY_FILE) throw new UsageError('BCMS_KEY_SECRET or BCMS_PRIVATE_KEY_FILE is set without BCMS_KEY_ID');
    return undefined;
  }
  if (env.BCMS_KEY_SECRET && env.BCMS_PRIVATE_KEY_FILE) throw new UsageError('set BCMS_KEY_SECRET or BCMS_PRIVATE_KEY_FILE, not both');
  if (env.BCMS_KEY_SECRET) return { keyId, secret: env.BCMS_KEY_SECRET };
  if (env.BCMS_PRIVATE_KEY_FILE) {
    try {
      return { keyId, privateKey: fs.readFileSync(env.BCMS_PRIVATE_KEY_FILE, 'utf8') };
    } catch (error) {
      throw new UsageError(`cannot read BCMS_PRIVATE_KEY_FILE: ${(error as Error).message}`);
    }
  }
  throw new UsageError('BCMS_KEY_ID is set: set BCMS_KEY_SECRET (hmac-sha256) or BCMS_PRIVATE_KEY_FILE (rsa-sha256, ed25519) too');
}

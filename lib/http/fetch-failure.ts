/** Why fetch could not reach a server, in a word or two: `ECONNREFUSED`, `ENOTFOUND`, `bad port`... (fetch itself only says "fetch failed"). */
export function fetchFailure(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return (error as Error)?.message ?? String(error);
}

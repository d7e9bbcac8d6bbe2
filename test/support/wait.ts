/**
 * Resolves once `check()` holds, looking again every `everyMs`. It has no time limit of its own:
 * on a loaded machine what is awaited comes later, never otherwise, so the test's own time-out
 * (Jest's) is the only limit, and a test that asserts the condition after it fails only when the
 * condition never comes.
 */
export async function until(check: () => boolean | Promise<boolean>, everyMs = 25): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, everyMs));
}

/**
 * Options for a router whose limits are not what a test checks: calls and loads get all the time a
 * loaded machine may need (ten minutes), so that a slow machine delays an answer but never changes
 * it. A test of a time-out itself uses a router of its own with that one limit short, and code
 * that never finishes.
 */
export const ROOMY = { functionTimeoutMs: 600_000, pluginTimeoutMs: 600_000, loadTimeoutMs: 600_000 } as const;

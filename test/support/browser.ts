import type { Frame, Page } from 'playwright-core';

/**
 * Waits until `expression` (JavaScript, as a string) is truthy in the page, asking it every 50 ms.
 * Playwright's waitForFunction compiles its predicate inside the page, which a Content-Security-
 * Policy without 'unsafe-eval' (the admin shell's) refuses; `evaluate` goes through the debugger
 * protocol, which the policy does not govern.
 */
export async function waitUntil(page: Page | Frame, expression: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > until) throw new Error(`not within ${timeoutMs} ms: ${expression}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

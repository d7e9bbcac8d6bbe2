import fs from 'node:fs';
import type { Frame, Page } from 'playwright-core';

/** Debian's Chromium, or CHROMIUM_PATH. */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/**
 * `describe` for tests that drive Chromium. Without one they are skipped, and the run says so
 * plainly; in CI (or with BCMS_REQUIRE_BROWSER) a missing browser fails instead.
 */
export function describeInChromium(name: string, body: () => void): void {
  if (fs.existsSync(CHROMIUM)) {
    describe(name, body);
    return;
  }
  process.stderr.write(`\nBrowser tests NOT RUN: no Chromium at ${CHROMIUM}. Install it (apt-get install chromium) or set CHROMIUM_PATH.\n\n`);
  if (process.env.CI || process.env.BCMS_REQUIRE_BROWSER) {
    test('Chromium is installed for the browser tests', () => {
      throw new Error(`no Chromium at ${CHROMIUM}: the browser tests cannot run`);
    });
  }
  describe.skip(name, body);
}

/**
 * Waits until `expression` (JavaScript, as a string) is truthy in the page, asking it every 50 ms.
 * Playwright's waitForFunction compiles its predicate inside the page, which a Content-Security-
 * Policy without 'unsafe-eval' (the admin shell's) refuses; `evaluate` goes through the debugger
 * protocol, which the policy does not govern. No limit of its own unless given one: a busy machine
 * gets there later, and the test's own time-out is the limit.
 */
export async function waitUntil(page: Page | Frame, expression: string, timeoutMs = Number.POSITIVE_INFINITY): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > until) throw new Error(`not within ${timeoutMs} ms: ${expression}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

import fs from 'node:fs';

/** Jest's global teardown: a run without a browser says so again at its end, where it is read. */
export default function browserNotice(): void {
  const chromium = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
  if (!fs.existsSync(chromium)) {
    process.stderr.write(`\nBrowser tests NOT RUN (test/ui/shell.test.ts, test/ui/todo-plugin.test.ts): no Chromium at ${chromium}. Install it (apt-get install chromium) or set CHROMIUM_PATH.\n`);
  }
}

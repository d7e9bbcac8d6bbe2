// Refreshes the screenshots in docs/screenshots/: the admin shell with the example app's plugin open,
// and the sign-in page, at a desktop width (1280 px) and a phone's (400 px).
//
//   npm run build && npm run build:example-ui
//   node scripts/screenshots.mjs            (CHROMIUM_PATH if Chromium is not /usr/bin/chromium)
//
// It starts the example app as `npm start` does, on a free port and a fresh data directory, so the
// pictures show the seed (plus one form submission sent here), never someone's own data.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'docs', 'screenshots');
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const EMAIL = 'admin@example.com';
const PASSWORD = 'screenshot-password';
const WIDTHS = [
  { name: 'desktop', viewport: { width: 1280, height: 800 } },
  { name: 'phone', viewport: { width: 400, height: 800 } },
];

function fail(message) {
  process.stderr.write(`screenshots: ${message}\n`);
  process.exit(1);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** The example app in a child process; resolves once it says it is ready. */
function startExampleApp(port, dataDir) {
  const env = { ...process.env, PORT: String(port), EXAMPLE_DATA_DIR: dataDir, ADMIN_EMAIL: EMAIL, ADMIN_PASSWORD: PASSWORD, LOG_LEVEL: 'warn' };
  delete env.DATABASE_URL; // the embedded database in dataDir, never a server's data
  const child = spawn(process.execPath, [path.join(ROOT, 'example-app', 'server.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const collect = (chunk) => {
      output += chunk;
      if (output.includes('Stop with Ctrl+C.')) resolve(child);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('exit', (code) => reject(new Error(`the example app exited (${code}) before it was ready:\n${output}`)));
  });
}

/** One submission through the example's submit-form function, so the plugin's table is not empty. */
async function seedSubmission(base) {
  const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email: EMAIL, password: PASSWORD }) });
  const { accessToken } = await login.json();
  const sent = await fetch(`${base}/api/function/submit-form`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${accessToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', message: 'Hello from the contact page' }),
  });
  if (!sent.ok) throw new Error(`submit-form answered ${sent.status}: ${await sent.text()}`);
}

/** The sign-in page, then the shell after signing in (the example's only plugin opens by itself). */
async function shoot(browser, base, { name, viewport }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  await page.goto(`${base}/bcms`);
  await page.getByRole('heading', { name: 'Sign in to BCMS' }).waitFor();
  await page.screenshot({ path: path.join(OUT, `sign-in-${name}.png`) });
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const plugin = page.frameLocator('iframe[title="Content stats plugin"]');
  await plugin.getByRole('cell', { name: 'Ada Lovelace' }).waitFor();
  await page.evaluate(() => document.fonts.ready);
  await page.screenshot({ path: path.join(OUT, `shell-${name}.png`) });
  // On a phone the navigation is folded into the menu: its picture too.
  const menu = page.getByRole('button', { name: 'Menu' });
  if (await menu.isVisible()) {
    await menu.click();
    await page.getByRole('navigation', { name: 'BCMS navigation' }).waitFor();
    await page.screenshot({ path: path.join(OUT, `shell-${name}-menu.png`) });
  }
  await context.close();
}

async function main() {
  if (!fs.existsSync(CHROMIUM)) fail(`no Chromium at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
  if (!fs.existsSync(path.join(ROOT, 'dist', 'index.js'))) fail('no dist/: run npm run build first');
  if (!fs.existsSync(path.join(ROOT, 'example-app', 'plugins', 'content-stats-ui', 'dist', 'index.html'))) fail("the example plugin's UI is not built: run npm run build:example-ui first");
  fs.mkdirSync(OUT, { recursive: true });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-screenshots-'));
  const port = await freePort();
  const app = await startExampleApp(port, dataDir);
  let browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    const base = `http://localhost:${port}`;
    await seedSubmission(base);
    for (const width of WIDTHS) await shoot(browser, base, width);
  } finally {
    await browser?.close();
    app.kill('SIGTERM');
    await new Promise((resolve) => app.once('exit', resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  for (const file of fs.readdirSync(OUT).sort()) process.stdout.write(`${path.join('docs', 'screenshots', file)}\n`);
}

main().catch((error) => fail(error.stack ?? String(error)));

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { freePort } from '../support/app';
import { start, stopStartedApps } from '../support/example';
import type { BcmsGlobal } from '../../lib/sdk/types';
import { CHROMIUM, describeInChromium, waitUntil } from '../support/browser';

// window.bcms.sdk.socket in a real Chromium, against the example app: the events the BCMS layer
// serves (GET /api/extensions/events) arrive live in the shell.
const PASSWORD = 'socket-test-password';

describeInChromium('sdk.socket in the shell, in Chromium', () => {
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    const port = await freePort();
    await start(port, fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-socket-')), { ADMIN_PASSWORD: PASSWORD });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    page = await browser.newPage();
    await page.goto(`http://localhost:${port}/bcms`);
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await waitUntil(page, 'window.bcms?.sdk.getAccessToken() != null');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    stopStartedApps();
  });

  test('entry events arrive live; the stream closes with its last subscriber', async () => {
    const result = await page.evaluate(async () => {
      const bcms = (globalThis as unknown as { bcms: BcmsGlobal }).bcms;
      const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const got: { e: string; tm: string; t: string }[] = [];
      const unsubscribe = bcms.sdk.socket.subscribe('entry', async (data: { e: string; tm: string; t: string }) => void got.push(data));
      while (!bcms.sdk.socket.connected()) await pause(50);
      const template = await bcms.sdk.template.create({ label: `Live ${Date.now()}` });
      // The service starts listening with its first stream: write until an event comes back (however
      // long a busy machine takes: the test's own time-out is the limit).
      const written: string[] = [];
      while (got.length === 0) {
        written.push((await bcms.sdk.entry.create({ templateId: template._id, meta: [{ lng: 'en', props: [] }] }))._id);
        for (let j = 0; j < 10 && got.length === 0; j++) await pause(50);
      }
      unsubscribe();
      return { first: got[0], written, templateId: template._id, disconnected: !bcms.sdk.socket.connected() };
    });
    expect(result.first).toEqual({ e: expect.any(String), tm: result.templateId, t: 'UPDATE' });
    expect(result.written).toContain(result.first?.e);
    expect(result.disconnected).toBe(true);
  });
  test("in a plugin's sandboxed frame, through the bridge: the shell's stream carries its events, and closes with the frame's last subscriber", async () => {
    await waitUntil(page, "document.querySelector('iframe[sandbox]') !== null");
    const frame = page.frames().find((candidate) => candidate.url().includes('/plugin/'));
    if (frame === undefined) throw new Error('the plugin frame is not open');
    const result = await frame.evaluate(async () => {
      const bcms = (globalThis as unknown as { bcms: BcmsGlobal }).bcms;
      const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const got: { e: string; tm: string; t: string }[] = [];
      const unsubscribe = bcms.sdk.socket.subscribe('entry', (data: { e: string; tm: string; t: string }) => void got.push(data));
      while (!bcms.sdk.socket.connected()) await pause(50);
      const connected = bcms.sdk.socket.connected();
      const template = await bcms.sdk.template.create({ label: `Framed ${Date.now()}` });
      const written: string[] = [];
      while (got.length === 0) {
        written.push((await bcms.sdk.entry.create({ templateId: template._id, meta: [{ lng: 'en', props: [] }] }))._id);
        for (let j = 0; j < 10 && got.length === 0; j++) await pause(50);
      }
      unsubscribe();
      while (bcms.sdk.socket.connected()) await pause(50);
      return { connected, first: got[0], written, templateId: template._id, disconnected: !bcms.sdk.socket.connected() };
    });
    expect(result.connected).toBe(true);
    expect(result.first).toEqual({ e: expect.any(String), tm: result.templateId, t: 'UPDATE' });
    expect(result.written).toContain(result.first?.e);
    expect(result.disconnected).toBe(true);
  });
});

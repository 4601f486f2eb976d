// What the browser tests share: Debian's Chromium driven by playwright-core, headless, closed when
// the test ends, and the folder their screenshots go to (test-artifacts/, outside git).
import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { atEnd, requireService } from './helpers.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = path.resolve('test-artifacts');

/** Whether Chromium is installed (else the test is skipped with how to install it, or fails in CI). */
export const requireChromium = (t: TestContext) =>
  requireService(t, fs.existsSync(CHROMIUM), 'Chromium', 'apt-get install -y chromium (or bash scripts/services.sh)');

/** Debian's Chromium, headless, closed when the test ends; the screenshot folder made. */
export async function launchChromium() {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  atEnd(() => browser.close());
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  return browser;
}

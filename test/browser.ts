// What the browser tests share: Debian's Chromium driven by playwright-core, headless, one per test
// process (a launch costs about a second of CPU and a browser process tree: a file's tests share it,
// each in contexts of its own), closed when the file ends; and the folder their screenshots go to
// (test-artifacts/, outside git).
import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import type { Browser, BrowserContext, BrowserContextOptions, Page } from 'playwright-core';
import { atEnd, requireService } from './helpers.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = path.resolve('test-artifacts');

/** Whether Chromium is installed (else the test is skipped with how to install it, or fails in CI). */
export const requireChromium = (t: TestContext) =>
  requireService(t, fs.existsSync(CHROMIUM), 'Chromium', 'apt-get install -y chromium (or bash scripts/services.sh)');

let shared: Promise<Browser> | undefined;
/** The process's one Chromium, launched on first use and closed when the file ends. */
function sharedChromium(): Promise<Browser> {
  shared ??= (async () => {
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
  })();
  return shared;
}

/** A test's view of the shared browser: its pages and contexts are its own, and `close` closes them (not the browser). */
export interface TestBrowser {
  newPage(options?: BrowserContextOptions): Promise<Page>;
  newContext(options?: BrowserContextOptions): Promise<BrowserContext>;
  close(): Promise<void>;
}

/** Debian's Chromium, headless: the process's shared one, seen through contexts of this caller's own. */
export async function launchChromium(): Promise<TestBrowser> {
  const browser = await sharedChromium();
  const contexts = new Set<BrowserContext>();
  const newContext = async (options?: BrowserContextOptions) => {
    const c = await browser.newContext(options);
    contexts.add(c);
    c.on('close', () => contexts.delete(c));
    return c;
  };
  const close = async () => {
    await Promise.all([...contexts].map((c) => c.close().catch(() => undefined)));
  };
  // Closed when the file ends, before the apps started ahead of this call (cleanups run last
  // first): a page's open stream would otherwise hold its app's close.
  atEnd(close);
  return {
    newContext,
    // As Browser.newPage: a page in a context of its own, closed with it.
    newPage: async (options) => {
      const c = await newContext(options);
      const page = await c.newPage();
      page.on('close', () => void c.close().catch(() => undefined));
      return page;
    },
    close,
  };
}

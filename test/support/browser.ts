import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';

/**
 * Debian's Chromium driven by playwright-core, for the browser tests (tier 5). Never `npx playwright
 * install`: it downloads a browser. CI installs the `chromium` package (.ci/run).
 */

export const CHROMIUM_PATH = process.env.SHOAL_CHROMIUM ?? '/usr/bin/chromium';
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const DASHBOARD_DIST = join(REPO_ROOT, 'dashboard', 'dist');
export const SCREENSHOT_DIR = join(REPO_ROOT, 'test-artifacts', 'screenshots');

export const DESKTOP = { width: 1280, height: 860 };
export const PHONE = { width: 390, height: 844 };

/** Builds the dashboard when this checkout has no build yet (the tests run after `npm run build`, which builds it). */
export function ensureDashboardBuilt(): void {
  if (existsSync(join(DASHBOARD_DIST, 'index.html'))) return;
  const result = spawnSync(process.execPath, [join(REPO_ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', 'dashboard', '--logLevel', 'warn'], { cwd: REPO_ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`building the dashboard failed (exit ${result.status}): run 'npm run build'`);
}

/** `extraArgs`: more Chromium switches (a test maps a foreign host name to loopback with `--host-resolver-rules`). */
export async function launchBrowser(extraArgs: string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: install Debian's package (apt-get install chromium) or set SHOAL_CHROMIUM`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    // Root in a container cannot use Chromium's sandbox; the rest keeps the browser off the network.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', ...extraArgs],
  });
}

/** A page on a dashboard, with every console error, page error and failed request it had. */
export interface DashboardPage extends AsyncDisposable {
  page: Page;
  context: BrowserContext;
  /** Console errors, uncaught exceptions and requests that failed or answered >= 400. */
  problems: string[];
  /** Every URL the page requested (to check that none leaves the node). */
  requests: string[];
}

export async function openDashboard(browser: Browser, baseUrl: string, options: { viewport?: { width: number; height: number }; hash?: string; colorScheme?: 'light' | 'dark' } = {}): Promise<DashboardPage> {
  const context = await browser.newContext({ viewport: options.viewport ?? DESKTOP, colorScheme: options.colorScheme ?? 'light' });
  const page = await context.newPage();
  const problems: string[] = [];
  const requests: string[] = [];
  page.on('console', (message: ConsoleMessage) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()} (${message.location().url})`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('request', (request) => requests.push(request.url()));
  page.on('requestfailed', (request) => {
    // A stream the page closes itself (leaving a page, Stop in the chat) ends as an aborted request.
    const failure = request.failure()?.errorText ?? '';
    if (!/ERR_ABORTED|net::ERR_ABORTED|aborted/i.test(failure)) problems.push(`request failed: ${request.method()} ${request.url()}: ${failure}`);
  });
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()}: ${response.request().method()} ${response.url()}`);
  });
  await page.goto(`${baseUrl}/${options.hash ?? ''}`);
  return { page, context, problems, requests, [Symbol.asyncDispose]: async () => context.close() };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  // From the top, so the sticky header sits where it belongs in a full-page shot.
  await page.evaluate('window.scrollTo(0, 0)');
  await page.screenshot({ path, fullPage: true });
  return path;
}

import { seedLeases, startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { parseConfigText } from '@iop/validate';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { chromium, type Browser } from 'playwright-core';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { startExporter, type RunningExporter } from '../src/exporter';

/** Debian's chromium (`apt-get install -y chromium`); `CHROMIUM_PATH` overrides. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
/**
 * Where the screenshot goes: `tmp/dashboard.png` (ignored by git), so a test run never rewrites a
 * tracked file; `UPDATE_DASHBOARD_PNG=1` refreshes the README's image `docs/dashboard.png` instead.
 */
const SCREENSHOT = path.resolve(
  __dirname,
  '../../..',
  process.env['UPDATE_DASHBOARD_PNG'] === '1' ? 'docs/dashboard.png' : 'tmp/dashboard.png',
);

describe('exporter dashboard in headless Chromium', () => {
  let redis: TestRedis;
  let exporter: RunningExporter;
  let browser: Browser;
  const closers: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(
        `${CHROMIUM} not found: install the Debian package chromium (apt-get install -y chromium) or set CHROMIUM_PATH`,
      );
    redis = await startRedis();
    const prefix = configPrefix('dashboard');
    const loaded = parseConfigText(exporterYaml({ prefix, redisUrl: redis.url }), {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    // Live counts in Redis, as gateways would leave them: llama-a 2/3 in flight + 1 queued, llama-b full (2/2) + 4 queued.
    for (const [providerId, active, waiting] of [
      ['llama-a', 2, 1],
      ['llama-b', 2, 4],
    ] as const) {
      closers.push(await seedLeases(redis.url, prefix, providerId, active, waiting));
    }
    exporter = await startExporter({
      config: loaded.config,
      configHash: loaded.hash,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await exporter?.close();
    for (const close of closers.reverse()) await close();
    await redis?.stop();
  });

  it('renders one row per resource with state, in_flight / max_concurrency bars and queued, and refreshes itself', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 520 } });
    const external: string[] = [];
    page.on('request', (req) => {
      if (!req.url().startsWith(exporter.url)) external.push(req.url());
    });
    await page.goto(`${exporter.url}/`);
    await page.waitForSelector('tr[data-resource="llama-a"]');

    const rows = await page.$$eval('tr[data-resource]', (trs) =>
      trs.map((tr) => ({
        id: tr.getAttribute('data-resource'),
        node: tr.closest('section')?.getAttribute('data-node'),
        state: tr.querySelector('[data-field="state"]')?.textContent,
        inFlight: tr.querySelector('[data-field="in_flight"]')?.textContent,
        queued: tr.querySelector('[data-field="queued"]')?.textContent,
      })),
    );
    expect(rows).toEqual([
      { id: 'llama-a', node: 'gpu-a', state: 'ready', inFlight: '2 / 3', queued: '1' },
      { id: 'llama-b', node: 'gpu-a', state: 'ready', inFlight: '2 / 2', queued: '4' },
      { id: 'echo-cli', node: 'gpu-a', state: 'ready', inFlight: '—', queued: '—' },
      { id: 'codex-cli', node: 'laptop', state: 'ready', inFlight: '—', queued: '—' },
    ]);
    expect(await page.$eval('tr[data-resource="llama-b"] .bar', (el) => el.classList.contains('full'))).toBe(true);

    // It polls /status every 2 s: the next snapshot replaces the rows.
    const firstMeta = await page.textContent('#meta');
    await waitUntil(async () => (await page.textContent('#meta')) !== firstMeta, 6000, 'the dashboard to refresh');

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(5000);
    expect(external).toEqual([]);
    await page.close();
  });
});

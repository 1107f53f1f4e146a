import { RedisProviderQueue, type QueueClient } from '@iop/dispatch';
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
 * Where the screenshots go: `tmp/dashboard.png` and `tmp/queue-board.png` (ignored by git), so a test
 * run never rewrites a tracked file; `UPDATE_DASHBOARD_PNG=1` refreshes the README's images
 * `docs/dashboard.png` and `docs/queue-board.png` instead.
 */
const SCREENSHOT = path.resolve(
  __dirname,
  '../../..',
  process.env['UPDATE_DASHBOARD_PNG'] === '1' ? 'docs/dashboard.png' : 'tmp/dashboard.png',
);

/** The status key the pages are behind; the browser is given it as Basic auth credentials, as an operator types them. */
const STATUS_KEY = 'status-key-dashboard-1';
const CHAT: QueueClient = { id: 'chat-ui', band: 10, weight: 1 };
const BATCH: QueueClient = { id: 'nightly-batch', band: -1, weight: 1, maxInFlight: 4 };
const RESEARCH: QueueClient = {
  id: 'research',
  band: 0,
  weight: 3,
  tokenBudgets: { perMinute: 20000, perDay: 500000 },
};

describe('exporter dashboard and queue board in headless Chromium', () => {
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
    const yaml = exporterYaml({
      prefix,
      redisUrl: redis.url,
      statusKeys: [STATUS_KEY],
      clients: [
        { id: 'chat-ui', settings: 'priority: 10' },
        { id: 'nightly-batch', settings: 'priority: -1, max_in_flight: 4' },
        { id: 'research', settings: 'weight: 3, max_queued: 20, tokens_per_minute: 20000, tokens_per_day: 500000' },
      ],
    });
    const loaded = parseConfigText(yaml, {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    // Live counts in Redis, as gateways would leave them: llama-a 2/3 in flight + 1 queued, llama-b full (2/2) + 4 queued;
    // chat-ui holds 1 and waits for 1, nightly-batch holds 3 and waits for 4.
    const pool = 'pool.llama-a';
    // research used 6000 tokens of its budgets (a finished call, released with its usage); nothing of it is in flight.
    const charger = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: pino({ level: 'silent' }) });
    const provider = { providerId: 'llama-a', maxConcurrency: 3, maxQueued: 1, pool };
    await charger.configure([provider]);
    const lease = await charger.acquireLease({
      modelGroupKey: 'llama',
      candidates: [provider],
      maxWaitMs: 5000,
      client: RESEARCH,
    });
    await lease.release({ tokens: 6000, reported: true });
    await charger.close();
    closers.push(
      await seedLeases(redis.url, prefix, 'llama-a', 2, 1, { pool, leaseClients: [CHAT, BATCH], waitClients: [CHAT] }),
    );
    closers.push(
      await seedLeases(redis.url, prefix, 'llama-b', 2, 4, {
        pool,
        leaseClients: [BATCH, BATCH],
        waitClients: [BATCH, BATCH, BATCH, BATCH],
      }),
    );
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

  it('renders one row per resource with state, in_flight / max_concurrency bars and queued, the clients, and refreshes itself', async () => {
    // The browser asks for the key (401 with a Basic challenge) and sends it with the page's own fetches too.
    const page = await browser.newPage({
      viewport: { width: 1100, height: 760 },
      httpCredentials: { username: 'ops', password: STATUS_KEY },
    });
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

    // The clients: every configured one, with band, weight, caps and fleet-wide counts.
    const clients = await page.$$eval('tr[data-client]', (trs) =>
      trs.map((tr) =>
        ['client', 'band', 'weight', 'max_in_flight', 'max_queued', 'in_flight', 'queued'].map(
          (f) => tr.querySelector(`[data-field="${f}"]`)?.textContent,
        ),
      ),
    );
    // chat-ui and nightly-batch set no max_queued: half of gateway.max_connections (4096).
    expect(clients).toEqual([
      ['chat-ui', '10', '1', 'none', '2048', '1', '1'],
      ['nightly-batch', '-1', '1', '4', '2048', '3', '4'],
      ['research', '0', '3', 'none', '20', '0', '0'],
    ]);
    // Token budgets: none for clients without one; research's used + reserved of each limit, what remains, the reset.
    expect(await page.textContent('tr[data-client="chat-ui"] [data-field="token_budgets"]')).toBe('none');
    const budgets = await page.$$eval('tr[data-client="research"] [data-window]', (lines) =>
      lines.map((l) => [
        l.getAttribute('data-window'),
        l.querySelector('.bar em')?.textContent,
        l.querySelector('[data-part="left"]')?.textContent,
      ]),
    );
    expect(budgets).toEqual([
      ['minute', '6000 + 0 / 20000', expect.stringMatching(/^14000 left · resets in (?:[1-5]?\ds|1m[01]s)$/)],
      ['day', '6000 + 0 / 500000', expect.stringMatching(/^494000 left · resets in 2[34]h\d+m$/)],
    ]);

    // It polls /status every 2 s: the next snapshot replaces the rows.
    const firstMeta = await page.textContent('#meta');
    await waitUntil(async () => (await page.textContent('#meta')) !== firstMeta, 6000, 'the dashboard to refresh');

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(5000);
    expect(external).toEqual([]);
    await page.close();
  });

  it('opens the read-only queue board behind the same key: every provider queue with its waiting and active counts', async () => {
    const page = await browser.newPage({
      viewport: { width: 1280, height: 800 },
      httpCredentials: { username: 'ops', password: STATUS_KEY },
    });
    const external: string[] = [];
    page.on('requestfinished', (req) => {
      if (!req.url().startsWith(exporter.url)) external.push(req.url());
    });
    // From the dashboard's own link, as an operator goes there.
    await page.goto(`${exporter.url}/`);
    await page.click('header a[href="queues"]');
    await page.waitForURL(`${exporter.url}/queues`);
    for (const id of ['llama-a', 'llama-b']) await page.getByText(id, { exact: true }).first().waitFor();
    // The queue page of llama-b: its 4 waiting requests are BullMQ's prioritized jobs.
    await page.goto(`${exporter.url}/queues/queue/provider.llama-b?status=prioritized`);
    await page.getByText('lease', { exact: true }).first().waitFor();
    const text = (await page.textContent('body')) ?? '';
    expect(text).toMatch(/prioritized\s*4/i);
    expect(text).toMatch(/active\s*2/i);
    // Read-only: the board offers no action on the queue or its jobs.
    for (const action of ['Retry', 'Clean', 'Pause', 'Promote', 'Add job', 'Empty', 'Obliterate'])
      expect(await page.getByRole('button', { name: action }).count()).toBe(0);
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: path.join(path.dirname(SCREENSHOT), 'queue-board.png') });
    // Its stylesheet names a web font on a third-party host: the board's CSP keeps the browser from fetching it.
    expect(external).toEqual([]);
    await page.close();
  });
});

import { freePort, scanKeys, spawnRedis, uniquePrefix } from '@iop/dispatch/testing';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnGateway, type GatewayProcess } from './testing/gateway-process';

/**
 * CLI programs against a real gateway process holding real secrets (README "Security",
 * "Adapters"): a program cannot read them by any path, a CLI adapter runs at most its
 * `max_concurrency` programs (the rest wait, then 429), and a burst of CLI completions leaves the
 * gateway answering `/healthz` at once, with no sweep of `/proc`. Direct routes leave nothing in Redis.
 */
const dir = mkdtempSync(join(tmpdir(), 'cli-isolation-'));
const script = (name: string, source: string) => {
  const file = join(dir, name);
  writeFileSync(file, source);
  return file;
};
const CONFIG = join(dir, 'edge.yaml');
const LOG = join(dir, 'runs');

/** Everything of other processes it can reach, and the file named in argv[2] (the gateway's config). */
const SNOOP = script(
  'snoop.js',
  `const fs = require('node:fs');
const read = (file) => { try { return fs.readFileSync(file, 'latin1'); } catch (e) { return 'unreadable: ' + e.code; } };
const seen = { own: read('/proc/self/environ'), config: read(process.argv[2]), proc: {} };
const pids = fs.readdirSync('/proc').filter((e) => /^\\d+$/.test(e));
for (const pid of new Set([String(process.ppid), '1', ...pids])) {
  seen.proc[pid] = read('/proc/' + pid + '/environ') + ' ' + read('/proc/' + pid + '/cmdline');
}
process.stdout.write(JSON.stringify(seen));`,
);
/** Records its start and end in argv[2] (appends are atomic), 300 ms apart. */
const RECORDS = script(
  'records.js',
  `const fs = require('node:fs');
fs.appendFileSync(process.argv[2], '+\\n');
setTimeout(() => { fs.appendFileSync(process.argv[2], '-\\n'); process.stdout.write('ran'); }, 300);`,
);
/** Answers at once, after starting a child in its group that the end of the run kills. */
const QUICK = script(
  'quick.js',
  `require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
process.stdout.write('quick');
process.exit(0);`,
);

const secrets = {
  EDGE_API_KEY: 'sk-client-key-never-for-the-cli',
  UPSTREAM_KEY_A: 'sk-upstream-a-never-for-the-cli',
  UPSTREAM_KEY_B: 'sk-upstream-b-never-for-the-cli',
  STATUS_KEY: 'sk-status-key-never-for-the-cli',
};
const LITERAL_IN_FILE = 'sk-literal-in-the-file-never-for-the-cli';
const REDIS_PASSWORD = 'redis-pass-never-for-the-cli';
const ALL_SECRETS = [...Object.values(secrets), LITERAL_IN_FILE, REDIS_PASSWORD];
const node = (...args: string[]) => JSON.stringify([process.execPath, ...args]);
const prefix = uniquePrefix('cli-isolation');

writeFileSync(
  CONFIG,
  `
version: 1
gateway: { api_keys: ["\${EDGE_API_KEY}"], request_timeout_ms: 30000 }
queue: { prefix: "${prefix}" }
status: { api_keys: ["\${STATUS_KEY}", "${LITERAL_IN_FILE}"] }
nodes:
  - id: n
    adapters:
      - { id: up-a, type: openai_compat, base_url: "http://127.0.0.1:9/v1", api_key: "\${UPSTREAM_KEY_A}" }
      - { id: up-b, type: vllm, base_url: "http://127.0.0.1:9/v1", api_key: "\${UPSTREAM_KEY_B}" }
      - { id: snoop-cli, type: cli, command: ${node(SNOOP, CONFIG)} }
      - { id: bounded-cli, type: cli, command: ${node(RECORDS, LOG)}, max_concurrency: 2, max_waiting: 4 }
      - { id: quick-cli, type: cli, command: ${node(QUICK)}, max_concurrency: 4, max_waiting: 200 }
    providers:
      - { id: pa, category: openai_compat, adapter: up-a, models: [pool-a], max_concurrency: 1 }
      - { id: pb, category: vllm, adapter: up-b, models: [pool-b], max_concurrency: 1 }
      - { id: snoop, category: cli, adapter: snoop-cli, models: [snoop] }
      - { id: bounded, category: cli, adapter: bounded-cli, models: [bounded] }
      - { id: quick, category: cli, adapter: quick-cli, models: [quick] }
routes:
  - { model: bounded-legacy, node: n, adapter: bounded-cli }
`,
);

type Kind = 'chat' | 'chat stream' | 'responses' | 'responses stream';
const KINDS: Kind[] = ['chat', 'chat stream', 'responses', 'responses stream'];

describe('CLI programs in a gateway process that holds secrets', () => {
  let gateway: GatewayProcess;
  let redis: ChildProcess;
  let redisUrl = '';

  beforeAll(async () => {
    const port = await freePort();
    // A user with a password: the URL on the gateway's command line carries it.
    redis = await spawnRedis(port, ['--user', 'gateway', 'on', `>${REDIS_PASSWORD}`, '~*', '&*', '+@all']);
    redisUrl = `redis://gateway:${REDIS_PASSWORD}@127.0.0.1:${port}`;
    gateway = await spawnGateway(CONFIG, { env: { ...secrets, LOG_LEVEL: 'info' }, args: ['--redis', redisUrl] });
  });
  afterAll(async () => {
    await gateway?.stop();
    redis?.kill('SIGKILL');
  });

  /** Polls `/healthz` every 20 ms until `stop()`, which resolves to each answer's time in ms. */
  const probeHealthz = () => {
    const times: number[] = [];
    let polling = true;
    const done = (async () => {
      while (polling) {
        const started = performance.now();
        expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
        times.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    return {
      stop: async () => {
        polling = false;
        await done;
        return times;
      },
    };
  };

  const call = (kind: Kind, model: string, content = 'x') =>
    fetch(`${gateway.url}/v1/${kind.startsWith('chat') ? 'chat/completions' : 'responses'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secrets.EDGE_API_KEY}` },
      body: JSON.stringify(
        kind.startsWith('chat')
          ? { model, messages: [{ role: 'user', content }], stream: kind.endsWith('stream') }
          : { model, input: content, stream: kind.endsWith('stream') },
      ),
    });

  it.each(KINDS)(
    "%s: the program reads its own /proc, but none of the gateway's environment, command line or config file",
    async (kind) => {
      const res = await call(kind, 'snoop');
      expect(res.status).toBe(200);
      const body = await res.text();
      // It really read: its own environment, and the config file it was refused.
      expect(body).toContain('IOP_EDGE_CLI_RUN=');
      expect(body).toMatch(/unreadable: EACCES/);
      for (const secret of ALL_SECRETS) expect(body).not.toContain(secret);
    },
  );

  it('runs at most max_concurrency programs of an adapter shared by a provider and a legacy route; the rest wait, then 429', async () => {
    writeFileSync(LOG, '');
    const probe = probeHealthz();
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(KINDS[i % 4], i % 2 === 0 ? 'bounded' : 'bounded-legacy').then(async (res) => ({
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          body: await res.text(),
        })),
      ),
    );
    const healthz = await probe.stop();
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    // 2 ran at once, 4 waited and ran next; the other 24 were refused at once.
    expect([ok.length, refused.length]).toEqual([6, 24]);
    for (const a of refused) {
      expect(a.retryAfter).toBe('1');
      expect(JSON.parse(a.body)).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
    }
    let running = 0;
    let peak = 0;
    for (const line of readFileSync(LOG, 'utf8').split('\n')) {
      running += line === '+' ? 1 : line === '-' ? -1 : 0;
      peak = Math.max(peak, running);
    }
    expect(peak).toBe(2);
    expect(Math.max(...healthz)).toBeLessThan(1000);
  });

  it('stays responsive through a burst of 160 CLI completions, and never sweeps /proc for runs that left no survivor', async () => {
    const probe = probeHealthz();
    const statuses = await Promise.all(
      Array.from({ length: 160 }, (_, i) =>
        call(KINDS[i % 4], 'quick').then(async (res) => (await res.text(), res.status)),
      ),
    );
    const healthz = await probe.stop();
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(healthz.length).toBeGreaterThan(0);
    expect(Math.max(...healthz)).toBeLessThan(1000);
    // A survivor would be declared 1 s after its run's end: wait past that for a sweep line.
    await new Promise((r) => setTimeout(r, 1500));
    await gateway.waitForOutput('CLI programs run in the bwrap sandbox');
    await gateway.settled();
    expect(gateway.output()).not.toContain('swept /proc');
  }, 60_000);

  it('direct routes left nothing in Redis: no key names a CLI provider, adapter or model', async () => {
    const keys = await scanKeys(redisUrl, prefix);
    expect(keys.filter((k) => /snoop|bounded|quick/.test(k))).toEqual([]);
  });
});

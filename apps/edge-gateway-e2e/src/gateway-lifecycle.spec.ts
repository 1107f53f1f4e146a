import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { GATEWAY_MAIN, spawnGateway, writeTempConfig } from './testing/gateway-process';

/** A pool provider on `upstream` and a CLI model, on the backend `queue` says. */
const lifecycleYaml = (upstream: string, queue = 'queue: { backend: memory }') =>
  [
    'version: 1',
    queue,
    'nodes:',
    '  - id: node-1',
    '    adapters:',
    `      - { id: gpu, type: vllm, base_url: "${upstream}" }`,
    '      - { id: echo, type: cli, command: ["node", "examples/cli/echo-llm.mjs"] }',
    '    providers:',
    '      - { id: gpu-1, category: vllm, adapter: gpu, models: [m1], max_concurrency: 2 }',
    '      - { id: echo-1, category: cli, adapter: echo, models: [echo] }',
  ].join('\n');

describe('the gateway process: bundle, environment, ways out', () => {
  let upstream: FakeUpstream;
  let redis: TestRedis;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    redis = await startRedis();
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });

  it('bundles no code of the test fake upstream (apps import libs only)', () => {
    const bundle = readFileSync(GATEWAY_MAIN, 'utf8');
    const sources = (JSON.parse(readFileSync(`${GATEWAY_MAIN}.map`, 'utf8')) as { sources: string[] }).sources;
    expect(sources.some((s) => s.includes('apps/edge-gateway/src/main.ts'))).toBe(true);
    expect(sources.filter((s) => s.includes('fake-upstream'))).toEqual([]);
    expect(bundle).not.toMatch(/fake-upstream|startFakeUpstream|x-fake-/);
  });

  it.each([
    ['IOP_SHUTDOWN_GRACE_MS', 'abc', 'a whole number of milliseconds, 0 or more'],
    ['IOP_SHUTDOWN_GRACE_MS', '-5', 'a whole number of milliseconds, 0 or more'],
    ['LOG_LEVEL', 'loud', 'one of fatal, error, warn, info, debug, trace, silent'],
    ['OTEL_BSP_SCHEDULE_DELAY', '1.5s', 'a whole number of milliseconds, 0 or more'],
  ])('refuses %s=%j at start: exit 2, naming the variable, its value and what is expected', (name, value, expected) => {
    const run = spawnSync(
      process.execPath,
      [GATEWAY_MAIN, '--config', writeTempConfig(lifecycleYaml(upstream.url)), '--listen', '127.0.0.1:0'],
      {
        encoding: 'utf8',
        env: { ...process.env, REDIS_URL: '', LOG_LEVEL: 'warn', [name]: value },
        timeout: 15_000,
      },
    );
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(`environment variable ${name}=${JSON.stringify(value)}: expected ${expected}`);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(run.stdout).not.toContain('listening on');
  });

  it('takes a good IOP_SHUTDOWN_GRACE_MS: requests still running when it ends get a 503 or the error event, not a bare cut', async () => {
    const gateway = await spawnGateway(writeTempConfig(lifecycleYaml(upstream.url)), {
      env: { IOP_SHUTDOWN_GRACE_MS: '300', LOG_LEVEL: 'error' },
    });
    const post = (body: object) =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(
        async (res) => ({ status: res.status, text: await res.text() }),
        (err: Error) => err,
      );
    const calledBefore = upstream.stats().total;
    // The upstream holds one answer 10 s and streams the other slowly (fields outside the OpenAI reference reach vLLM as sent).
    const slow = post({ model: 'm1', messages: [{ role: 'user', content: 'slow' }], fake: { delay_ms: 10_000 } });
    const stream = post({
      model: 'm1',
      messages: [{ role: 'user', content: 'stream' }],
      stream: true,
      fake: { chunks: 100, chunk_gap_ms: 100 },
    });
    await waitUntil(() => upstream.stats().current >= 2, 5_000, 'both requests at the upstream');
    // gpu-1 takes 2 at once: a third request waits in the queue.
    const queued = post({ model: 'm1', messages: [{ role: 'user', content: 'queued' }] });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    expect(await gateway.stop()).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
    const cut = await slow;
    expect(cut).toMatchObject({ status: 503 });
    expect(JSON.parse((cut as { text: string }).text)).toMatchObject({
      error: { code: 'shutting_down', type: 'server_error' },
    });
    const waited = await queued;
    expect(waited).toMatchObject({ status: 503 });
    expect(JSON.parse((waited as { text: string }).text)).toMatchObject({ error: { code: 'shutting_down' } });
    // The queued request never reached the upstream.
    expect(upstream.stats().total).toBe(calledBefore + 2);
    const streamed = await stream;
    expect(streamed).toMatchObject({ status: 200 });
    const text = (streamed as { text: string }).text;
    expect(text).toContain('data: {"id"');
    expect(text).toMatch(/data: \{"error":\{[^\n]*"code":"shutting_down"/);
    expect(text).not.toContain('data: [DONE]');
  });

  it('a listen failure exits 1 with the address and closes everything it opened (Redis, queue, adapters, prober, watcher)', async () => {
    const first = await spawnGateway(writeTempConfig(lifecycleYaml(upstream.url)));
    try {
      const taken = first.url.replace('http://', '');
      const yaml = lifecycleYaml(upstream.url, `queue: { backend: redis, prefix: "${uniquePrefix('listen-fail')}" }`);
      const t0 = Date.now();
      const run = spawnSync(process.execPath, [GATEWAY_MAIN, '--config', writeTempConfig(yaml), '--listen', taken], {
        encoding: 'utf8',
        env: { ...process.env, REDIS_URL: redis.url, LOG_LEVEL: 'info' },
        timeout: 15_000,
      });
      expect(run.status).toBe(1);
      expect(Date.now() - t0).toBeLessThan(10_000);
      expect(run.stderr).toContain(`cannot listen on ${taken}: listen EADDRINUSE`);
      expect(run.stdout).not.toContain('edge-gateway listening on');
      const stopped = run.stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; closed?: string[] })
        .find((l) => l.msg === 'stopped: cannot listen');
      expect(stopped?.closed).toEqual(['config watcher', 'prober', 'adapters', 'queue', 'redis']);
    } finally {
      expect(await first.stop()).toBe(0);
    }
  });
});

import { startRedis, uniquePrefix, waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { writeFileSync } from 'node:fs';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/** Runtime config refresh (README "Operating a running fleet") against the built gateway process, memory backend. */
describe('config refresh on SIGHUP', () => {
  let upstream: FakeUpstream;
  let gateway: GatewayProcess | undefined;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterEach(async () => {
    await gateway?.stop();
    gateway = undefined;
  });
  afterAll(async () => {
    await upstream.close();
  });

  const env = () => ({ UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' });
  const chat = (model: string, fake: Record<string, number> = {}) =>
    fetch(`${gateway!.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake }),
    });

  /** This replica's counts per resource, from its `/status` (docs/architecture.md, "Status model"). */
  async function resourceCounts(): Promise<Record<string, { in_flight: number; queued: number }>> {
    const status = (await (await fetch(`${gateway!.url}/status`)).json()) as {
      nodes: Array<{ resources: Array<{ id: string; in_flight: number; queued: number }> }>;
    };
    return Object.fromEntries(status.nodes.flatMap((n) => n.resources.map((r) => [r.id, r])));
  }

  const resourceMax = (status: unknown, id: string) =>
    (status as { nodes: Array<{ resources: Array<{ id: string; max_concurrency: number | null }> }> }).nodes
      .flatMap((n) => n.resources)
      .find((r) => r.id === id)?.max_concurrency;

  it('applies a raised max_concurrency under load: the upstream sees the new limit and never more', async () => {
    const file = writeTempConfig(fleetYaml());
    gateway = await spawnGateway(file, { env: env() });
    const statusBefore = (await (await fetch(`${gateway.url}/status`)).json()) as { config_hash: string };
    const configInfo = async () =>
      /^iop_edge_config_info\{hash="([0-9a-f]+)"\} 1$/m.exec(
        await (await fetch(`${gateway!.url}/metrics`)).text(),
      )?.[1];
    // The gauge's hash is the start of /status's config_hash (README "Metrics, dashboard and traces").
    expect(await configInfo()).toBe(statusBefore.config_hash.slice(0, 12));
    upstream.reset();
    const requests = Array.from({ length: 9 }, () => chat('small', { delay_ms: 300 }));
    await waitUntil(() => upstream.stats().current === 1, 5000, 'the first request upstream');
    expect(upstream.stats().byModel['small']?.max ?? 1).toBe(1);
    writeFileSync(
      file,
      fleetYaml().replace(
        '{ id: solo, category: openai_compat, adapter: compat-0, models: [small], max_concurrency: 1 }',
        '{ id: solo, category: openai_compat, adapter: compat-0, models: [small], max_concurrency: 3 }',
      ),
    );
    gateway.child.kill('SIGHUP');
    const statuses = (await Promise.all(requests)).map((r) => r.status);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(upstream.stats().byModel['small'].max).toBe(3);
    const statusAfter = (await (await fetch(`${gateway.url}/status`)).json()) as {
      config_hash: string;
      config_loaded_at: string;
    };
    expect(statusAfter.config_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(statusAfter.config_hash).not.toBe(statusBefore.config_hash);
    expect(await configInfo()).toBe(statusAfter.config_hash.slice(0, 12));
    expect(resourceMax(statusAfter, 'solo')).toBe(3);
  });

  it('keeps serving on the old config when the new file is invalid, and logs why', async () => {
    const file = writeTempConfig(fleetYaml());
    gateway = await spawnGateway(file, { env: env() });
    writeFileSync(file, fleetYaml().replace('max_concurrency: 2', 'max_concurrency: "two"'));
    gateway.child.kill('SIGHUP');
    // Two triggers read the invalid file: the SIGHUP at once, the file watch 250 ms after the write.
    // Each rejection is logged (its line written within the logger's flush interval) and counted.
    const rejected = (reason: string) =>
      gateway!
        .output()
        .split('\n')
        .filter((l) => l.includes('config reload rejected') && l.includes(`"reason":"${reason}"`)).length;
    await waitUntil(
      () => rejected('SIGHUP') === 1 && rejected('file changed') === 1,
      5000,
      'the SIGHUP and the file-change rejections to be logged',
    );
    expect(gateway.output()).toMatch(/max_concurrency/);
    const res = await chat('llama');
    expect(res.status).toBe(200);
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    expect(metrics).toMatch(/^iop_edge_config_reload_failures_total 2$/m);
  });

  it('moves waiting requests of a removed provider to a sibling, or answers 503 no_available_provider; none waits forever', async () => {
    const file = writeTempConfig(fleetYaml());
    gateway = await spawnGateway(file, { env: env() });
    upstream.reset();
    // llama: pool-a (2) + pool-b (1); small: solo (1). Fill both pools and queue behind them.
    const llama = Array.from({ length: 8 }, () => chat('llama', { delay_ms: 400 }));
    const small = Array.from({ length: 3 }, () => chat('small', { delay_ms: 400 }));
    await waitUntil(
      async () => {
        const counts = await resourceCounts();
        return (
          counts['pool-a']?.in_flight === 2 &&
          counts['pool-b']?.in_flight === 1 &&
          counts['solo']?.queued === 2 &&
          counts['pool-a'].queued + counts['pool-b'].queued === 5
        );
      },
      5000,
      'both pools saturated with requests waiting',
    );
    writeFileSync(
      file,
      fleetYaml()
        .replace(/\n\s+- \{ id: pool-b,[^\n]+/, '')
        .replace(/\n\s+- \{ id: solo,[^\n]+/, ''),
    );
    gateway.child.kill('SIGHUP');
    const llamaStatuses = await Promise.all(llama.map(async (r) => (await r).status));
    const smallBodies = await Promise.all(
      small.map(async (r) => {
        const res = await r;
        return { status: res.status, body: await res.text() };
      }),
    );
    expect(llamaStatuses.every((s) => s === 200)).toBe(true);
    // The request already on solo finishes on the config it started with; the waiting ones fail fast.
    expect(smallBodies.filter((b) => b.status === 200)).toHaveLength(1);
    const failed = smallBodies.filter((b) => b.status !== 200);
    expect(failed).toHaveLength(2);
    for (const f of failed) {
      expect(f.status).toBe(503);
      expect(JSON.parse(f.body).error.code).toBe('no_available_provider');
    }
    expect((await chat('small')).status).toBe(404);
  });

  it('applies a raised max_concurrency across Redis-backed replicas at once: the upstream sees the new limit and never more', async () => {
    const redis = await startRedis();
    const prefix = uniquePrefix('reload');
    const yaml = fleetYaml().replace('backend: memory', `backend: redis\n  prefix: "${prefix}"`);
    const file = writeTempConfig(yaml);
    const replicaEnv = { ...env(), REDIS_URL: redis.url };
    const a = await spawnGateway(file, { env: replicaEnv });
    const b = await spawnGateway(file, { env: replicaEnv });
    try {
      upstream.reset();
      const requests = Array.from({ length: 12 }, (_, i) =>
        fetch(`${(i % 2 ? a : b).url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: 300 } }),
        }),
      );
      await waitUntil(() => upstream.stats().current === 1, 5000, 'the first request upstream');
      writeFileSync(
        file,
        yaml.replace('models: [small], max_concurrency: 1 }', 'models: [small], max_concurrency: 3 }'),
      );
      // One replica's reload raises the shared limit for every replica.
      a.child.kill('SIGHUP');
      b.child.kill('SIGHUP');
      const statuses = (await Promise.all(requests)).map((r) => r.status);
      expect(statuses.every((s) => s === 200)).toBe(true);
      expect(upstream.stats().byModel['small'].max).toBe(3);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      await redis.stop();
    }
  });
});

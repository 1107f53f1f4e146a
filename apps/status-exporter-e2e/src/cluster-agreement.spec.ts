import { startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, configPrefix, exporterYaml } from '@iop/fake-upstream';
import type { ResourceStatus, StatusSnapshot } from '@iop/status';
import {
  EXPORTER_MAIN,
  GATEWAY_MAIN,
  spawnService,
  writeTempConfig,
  type ServiceProcess,
} from './testing/exporter-fixtures';

describe('the exporter and two gateway replicas on one Redis agree (cluster-wide counts)', () => {
  let redis: TestRedis;
  let upA: FakeUpstream;
  let upB: FakeUpstream;
  let gateways: ServiceProcess[] = [];
  let exporter: ServiceProcess | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    upA = await startFakeUpstream({ name: 'a' });
    upB = await startFakeUpstream({ name: 'b' });
  });
  afterAll(async () => {
    await exporter?.stop();
    for (const g of gateways) await g.stop();
    await Promise.all([upA?.close(), upB?.close()]);
    await redis?.stop();
  });

  it("reports each provider's in_flight equal to its upstream's observed concurrency while requests are held open", async () => {
    const prefix = configPrefix('cluster');
    const yaml = exporterYaml({ prefix, upstream: upA.url, upstreamB: upB.url });
    const file = writeTempConfig(yaml);
    const env = { REDIS_URL: redis.url };
    gateways = await Promise.all(
      [0, 1].map(() => spawnService(GATEWAY_MAIN, ['serve', '--config', file, '--listen', '127.0.0.1:0'], { env })),
    );
    for (const g of gateways) expect(g.url).toBeDefined();
    exporter = await spawnService(EXPORTER_MAIN, ['--config', file, '--listen', '127.0.0.1:0'], { env });
    expect(exporter.url).toBeDefined();

    const status = async () => (await (await fetch(`${exporter!.url}/status`)).json()) as StatusSnapshot;
    const res = (s: StatusSnapshot, id: string): ResourceStatus =>
      s.nodes.flatMap((n) => n.resources).find((r) => r.id === id)!;

    // 7 held requests over both replicas: llama-a (max 3) and llama-b (max 2) saturate, 2 wait.
    const abort = new AbortController();
    const held = Array.from({ length: 7 }, (_, i) =>
      fetch(`${gateways[i % 2].url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // fake-upstream's delay_ms knob holds the upstream answer open (the gateway passes the body through).
        body: JSON.stringify({
          model: 'llama',
          messages: [{ role: 'user', content: `held ${i}` }],
          fake: { delay_ms: 30_000 },
        }),
        signal: abort.signal,
      }).catch(() => undefined),
    );
    try {
      let last = '';
      await waitUntil(
        async () => {
          const s = await status();
          last = JSON.stringify({
            a: upA.stats().current,
            b: upB.stats().current,
            la: res(s, 'llama-a'),
            lb: res(s, 'llama-b'),
          });
          return (
            upA.stats().current === 3 &&
            upB.stats().current === 2 &&
            res(s, 'llama-a').queued! + res(s, 'llama-b').queued! === 2
          );
        },
        15_000,
        'both providers saturated with 2 waiting',
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}; last seen ${last}; gateway output: ${gateways.map((g) => g.output()).join('\n')}`,
        );
      });
      const s = await status();
      expect(res(s, 'llama-a').in_flight).toBe(upA.stats().current);
      expect(res(s, 'llama-b').in_flight).toBe(upB.stats().current);
      expect([res(s, 'llama-a').in_flight, res(s, 'llama-b').in_flight]).toEqual([3, 2]);
      expect(res(s, 'llama-a').queued! + res(s, 'llama-b').queued!).toBe(2);
      // Each replica's own /status shows the same cluster-wide counts (Redis counts are shared).
      for (const g of gateways) {
        const own = (await (await fetch(`${g.url}/status`)).json()) as StatusSnapshot;
        expect(res(own, 'llama-a').in_flight).toBe(3);
        expect(res(own, 'llama-b').in_flight).toBe(2);
      }
    } finally {
      abort.abort();
      await Promise.all(held);
    }
    await waitUntil(
      async () => {
        const s = await status();
        return (
          res(s, 'llama-a').in_flight === 0 &&
          res(s, 'llama-b').in_flight === 0 &&
          res(s, 'llama-a').queued === 0 &&
          res(s, 'llama-b').queued === 0
        );
      },
      15_000,
      'every lease released',
    );
    expect(upA.stats().current + upB.stats().current).toBe(0);
  }, 60_000);
});

import { startRedis, type TestRedis } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import path from 'node:path';
import { EXPORTER_MAIN, GATEWAY_MAIN, spawnService, type ServiceProcess } from './testing/exporter-fixtures';

/** What `npm start` serves; it says `queue.backend: memory`. */
const EXAMPLE = path.resolve(__dirname, '../../../examples/edge.yaml');

/**
 * The gateways' rule (README "Configuration", `queue.backend`) in the exporter: a Redis URL from
 * `--redis` or `REDIS_URL` selects redis over `queue.backend: memory`, so the exporter reads the
 * Redis the gateways use. Real processes on examples/edge.yaml and a real Redis.
 */
describe('status-exporter queue backend selection on examples/edge.yaml', () => {
  let redis: TestRedis;
  const procs: ServiceProcess[] = [];
  beforeAll(async () => {
    // An own server: examples/edge.yaml has the shared default prefix.
    redis = await startRedis({ forceOwn: true });
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) await p.stop();
  });
  afterAll(async () => {
    await redis.stop();
  });
  const run = async (main: string, args: string[], env: Record<string, string>) => {
    const p = await spawnService(main, args, { env: { REDIS_URL: '', LOG_LEVEL: 'info', ...env } });
    procs.push(p);
    return p;
  };
  const llamaA = async (exporter: ServiceProcess) => {
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    return s.nodes.flatMap((n) => n.resources).find((r) => r.id === 'demo-llama-a');
  };

  it.each([
    ['REDIS_URL', [] as string[], (url: string) => ({ REDIS_URL: url }), 'REDIS_URL overrides queue.backend: memory'],
    ['--redis', ['--redis', 'URL'], () => ({}), '--redis overrides queue.backend: memory'],
  ])('%s: a gateway and the exporter on the same file both run on that Redis', async (_how, flags, env, reason) => {
    const args = flags.map((f) => (f === 'URL' ? redis.url : f));
    const gateway = await run(
      GATEWAY_MAIN,
      ['serve', '--config', EXAMPLE, '--listen', '127.0.0.1:0', ...args],
      env(redis.url),
    );
    expect(
      ((await (await fetch(`${gateway.url}/readyz`)).json()) as { queue: { backend: string } }).queue.backend,
    ).toBe('redis');
    const exporter = await run(
      EXPORTER_MAIN,
      ['--config', EXAMPLE, '--listen', '127.0.0.1:0', ...args],
      env(redis.url),
    );
    expect(exporter.url).toBeDefined();
    await exporter.waitForOutput(`queue backend: redis at ${redis.url} (${reason})`);
    await gateway.waitForOutput(`queue backend: redis at ${redis.url} (${reason})`);
    // Counts come from that Redis (null would mean it could not read them).
    expect(await llamaA(exporter)).toMatchObject({ max_concurrency: 4, in_flight: 0, queued: 0 });
    const metrics = await (await fetch(`${exporter.url}/metrics`)).text();
    expect(metrics).toMatch(/^iop_edge_status_counts_up 1$/m);
  });

  it('refuses to start without --redis or REDIS_URL, saying the file chose memory', async () => {
    const p = await run(EXPORTER_MAIN, ['--config', EXAMPLE, '--listen', '127.0.0.1:0'], {});
    expect(p.url).toBeUndefined();
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('the queue backend is "memory" (queue.backend: memory)');
  });
});

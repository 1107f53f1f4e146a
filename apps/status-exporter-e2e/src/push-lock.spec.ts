import { startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EXPORTER_MAIN, spawnService, writeTempConfig, type ServiceProcess } from './testing/exporter-fixtures';

/** The push lock's TTL in the exporter (README "Status", push): a dead holder is replaced within it. */
const PUSH_LOCK_TTL_MS = 10_000;

/**
 * README "Status", push: every pod of a Deployment runs an exporter sidecar on the same Redis, and
 * only one of them pushes. Two exporter processes, one SIGKILLed: the other takes over.
 */
describe('status exporters as processes: one pushes at a time', () => {
  let redis: TestRedis;
  let receiver: Server;
  const posts: { at: number; from: string }[] = [];
  const procs: ServiceProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        posts.push({ at: Date.now(), from: String(req.headers['x-iop-status-pusher']) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    for (const p of procs) await p.stop();
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
    await redis.stop();
  });

  it('exactly one of two exporters pushes; after a SIGKILL of that one the other pushes within the lock TTL', async () => {
    const pushUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/push`;
    const file = writeTempConfig(exporterYaml({ prefix: configPrefix('push-lock'), pushUrl, intervalMs: 100 }));
    for (let i = 0; i < 2; i++)
      procs.push(
        await spawnService(EXPORTER_MAIN, ['--config', file, '--listen', '127.0.0.1:0'], {
          env: { REDIS_URL: redis.url, LOG_LEVEL: 'info' },
        }),
      );
    await waitUntil(() => posts.length >= 20, 10_000, 'twenty pushes');
    const owners = [...new Set(posts.map((p) => p.from))];
    expect(owners).toHaveLength(1);
    // The owner names the exporter: <hostname>:<pid>:<random>.
    const pidOf = (owner: string) => Number(owner.split(':')[1]);
    const [holder, standby] = pidOf(owners[0]) === procs[0].child.pid ? procs : [procs[1], procs[0]];
    expect(pidOf(owners[0])).toBe(holder.child.pid);
    const before = posts.length;
    await new Promise((r) => setTimeout(r, 1000));
    // One pusher: about one POST per 100 ms, not two.
    expect(posts.length - before).toBeLessThanOrEqual(12);

    holder.child.kill('SIGKILL');
    await holder.exited;
    const killed = Date.now();
    const firstFromStandby = () => posts.find((p) => pidOf(p.from) === standby.child.pid);
    await waitUntil(() => firstFromStandby() !== undefined, PUSH_LOCK_TTL_MS + 5000, 'the other exporter to push');
    expect((firstFromStandby()?.at ?? Infinity) - killed).toBeLessThanOrEqual(PUSH_LOCK_TTL_MS + 500);
    await standby.waitForOutput(/took the push lock/);
  }, 60_000);
});

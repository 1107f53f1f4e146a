import { startRedis, type TestRedis } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { EXPORTER_MAIN, spawnService, writeTempConfig, type ServiceProcess } from './testing/exporter-fixtures';

describe('status-exporter as a process (node dist/apps/status-exporter/main.js)', () => {
  let redis: TestRedis;
  const procs: ServiceProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    for (const p of procs.splice(0)) await p.stop();
  });
  afterAll(async () => {
    await redis.stop();
  });
  const run = async (args: string[], env: Record<string, string> = {}) => {
    const p = await spawnService(EXPORTER_MAIN, args, { env: { REDIS_URL: '', ...env } });
    procs.push(p);
    return p;
  };

  it('prints every config problem and exits 1 on an invalid file', async () => {
    const file = writeTempConfig('version: 1\nnodes:\n  - id: a\n    adapterz: []\n');
    const p = await run(['--config', file, '--redis', redis.url]);
    expect(p.url).toBeUndefined();
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/edge\.yaml:4:5 nodes\[0\]\.adapterz: .*Fix:/);
    expect(p.output()).toMatch(/refusing to start/);
  });

  it("refuses to start on the memory backend, pointing at the gateway's own /status", async () => {
    const p = await run([
      '--config',
      writeTempConfig(exporterYaml({ prefix: configPrefix('proc-memory') })),
      '--listen',
      '127.0.0.1:0',
    ]);
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/queue backend is "memory".*gateway's own GET \/status/s);
  });

  it('serves /status with --redis and --listen, pushes to status.push_url, and exits 0 on SIGTERM', async () => {
    const received: string[] = [];
    const receiver: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    try {
      const pushUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/push`;
      const file = writeTempConfig(exporterYaml({ prefix: configPrefix('proc-ok'), pushUrl, intervalMs: 100 }));
      const p = await run(['--config', file, '--redis', redis.url, '--listen', '127.0.0.1:0']);
      expect(p.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const s = (await (await fetch(`${p.url}/status`)).json()) as StatusSnapshot;
      expect(s.nodes[0].resources[0]).toMatchObject({ id: 'llama-a', in_flight: 0, queued: 0 });
      const deadline = Date.now() + 5000;
      while (received.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect((JSON.parse(received[0]) as StatusSnapshot).nodes.map((n) => n.node_id)).toEqual(['gpu-a', 'laptop']);
      expect(await p.stop()).toBe(0);
    } finally {
      receiver.closeAllConnections();
      await new Promise<void>((r) => receiver.close(() => r()));
    }
  });

  it('reloads edge.yaml on SIGHUP: /status shows the new catalog and config hash at once', async () => {
    const yaml = exporterYaml({ prefix: configPrefix('proc-reload') });
    const file = writeTempConfig(yaml);
    const p = await run(['--config', file, '--redis', redis.url, '--listen', '127.0.0.1:0']);
    const before = (await (await fetch(`${p.url}/status`)).json()) as StatusSnapshot;
    writeFileSync(file, yaml.replace('models: [llama], max_concurrency: 3', 'models: [llama], max_concurrency: 9'));
    p.child.kill('SIGHUP');
    const deadline = Date.now() + 5000;
    let after = before;
    while (after.config_hash === before.config_hash && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      after = (await (await fetch(`${p.url}/status`)).json()) as StatusSnapshot;
    }
    expect(after.config_hash).not.toBe(before.config_hash);
    expect(after.nodes[0].resources.find((r) => r.id === 'llama-a')?.max_concurrency).toBe(9);
  });

  it('applies a changed status.push_url and status.interval_ms on reload, and says so when a reload changes nothing', async () => {
    const receivers: Array<{ server: Server; received: number; url: string }> = [];
    for (let i = 0; i < 2; i++) {
      const entry = { server: undefined as unknown as Server, received: 0, url: '' };
      entry.server = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          entry.received++;
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => entry.server.listen(0, '127.0.0.1', () => r()));
      entry.url = `http://127.0.0.1:${(entry.server.address() as AddressInfo).port}/push`;
      receivers.push(entry);
    }
    const waitFor = async (check: () => boolean, what: string) => {
      const deadline = Date.now() + 5000;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    try {
      const prefix = configPrefix('proc-push-reload');
      const file = writeTempConfig(exporterYaml({ prefix }));
      const p = await run(['--config', file, '--redis', redis.url, '--listen', '127.0.0.1:0'], { LOG_LEVEL: 'info' });
      p.child.kill('SIGHUP');
      await waitFor(() => /config reload: the file is unchanged/.test(p.output()), 'the unchanged reload to be logged');
      writeFileSync(file, exporterYaml({ prefix, pushUrl: receivers[0].url, intervalMs: 100 }));
      p.child.kill('SIGHUP');
      await waitFor(() => receivers[0].received >= 2, 'pushes to the first push_url');
      writeFileSync(file, exporterYaml({ prefix, pushUrl: receivers[1].url, intervalMs: 100 }));
      p.child.kill('SIGHUP');
      await waitFor(() => receivers[1].received >= 2, 'pushes to the new push_url');
      const first = receivers[0].received;
      await new Promise((r) => setTimeout(r, 400));
      expect(receivers[0].received).toBe(first);
      await p.waitForOutput(/status-exporter: push settings reloaded/);
    } finally {
      for (const { server } of receivers) {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      }
    }
  });
});

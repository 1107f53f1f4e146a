import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { spawnSync } from 'node:child_process';
import { GATEWAY_MAIN, spawnGateway, writeTempConfig } from './testing/gateway-process';

describe('the built gateway process', () => {
  let upstream: FakeUpstream;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it('serves models and a chat completion, then stops cleanly on SIGTERM', async () => {
    const gateway = await spawnGateway(writeTempConfig(fleetYaml()), {
      env: { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' },
    });
    try {
      const models = (await (await fetch(`${gateway.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toContain('llama');
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'process' }] }),
      });
      expect(res.status).toBe(200);
      expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  });

  it('refuses to start on an invalid file and prints every problem with its line', async () => {
    const file = writeTempConfig(
      'version: 1\nnodes:\n  - id: a\n    adapters:\n      - { id: x, type: vllm, base_url: "http://h/v1", enabeld: true }\n    providers:\n      - { id: p, category: vllm, adapter: x, models: [], max_concurrency: 1 }\n',
    );
    const run = spawnSync(process.execPath, [GATEWAY_MAIN, 'serve', '--config', file], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/:5:\d+ nodes\[0\]\.adapters\[0\]/);
    expect(run.stderr).toMatch(/:7:\d+ nodes\[0\]\.providers\[0\]\.models/);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('validate exits 0 with a one-line summary for a valid file and 1 with problems for an invalid one', () => {
    const ok = spawnSync(process.execPath, [GATEWAY_MAIN, 'validate', writeTempConfig(fleetYaml())], {
      encoding: 'utf8',
      env: { ...process.env, UPSTREAM: 'http://127.0.0.1:1/v1', UPSTREAM_KEY: 'k' },
    });
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(
      /valid \(2 nodes, 5 providers, 1 route; config_hash [0-9a-f]{12}, file sha256 [0-9a-f]{12}\)/,
    );
    const bad = spawnSync(process.execPath, [GATEWAY_MAIN, 'validate', writeTempConfig(fleetYaml())], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH },
    });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('UPSTREAM');
  });

  it('exits 1 with the address when it cannot listen, instead of claiming to listen', async () => {
    const first = await spawnGateway(writeTempConfig(fleetYaml()), {
      env: { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' },
    });
    try {
      const taken = first.url.replace('http://', '');
      const run = spawnSync(
        process.execPath,
        [GATEWAY_MAIN, '--config', writeTempConfig(fleetYaml()), '--listen', taken],
        {
          encoding: 'utf8',
          env: { ...process.env, UPSTREAM: upstream.url, UPSTREAM_KEY: 'k', LOG_LEVEL: 'warn' },
        },
      );
      expect(run.status).toBe(1);
      expect(run.stderr).toContain(`cannot listen on ${taken}`);
      expect(run.stdout).not.toContain('listening on');
    } finally {
      await first.stop();
    }
  });

  it.each([
    [['--listen', '127.0.0.1:99999'], /--listen: .*port from 0 to 65535/],
    [['--redis', 'http://nope'], /--redis: .*redis:\/\//],
  ])('rejects %j with a usage error (exit 2), no stack trace', (flags, message) => {
    const run = spawnSync(process.execPath, [GATEWAY_MAIN, '--config', 'examples/edge.yaml', ...flags], {
      encoding: 'utf8',
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });
});

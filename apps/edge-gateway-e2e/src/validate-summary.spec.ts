import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fleetYaml } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { parsePrometheusText } from '@iop/status/testing';
import { GATEWAY_MAIN, spawnGateway, writeTempConfig } from './testing/gateway-process';

/**
 * README "Configuration": `validate` prints the `config_hash` a gateway on the same file and
 * environment shows in `/status` and `iop_edge_config_info{hash}`, and, labelled apart, the
 * sha256 of the file's bytes.
 */
describe('validate names the config_hash the running processes report', () => {
  const env = { UPSTREAM: 'http://127.0.0.1:9/v1', UPSTREAM_KEY: 'k-1' };

  it('config_hash equals /status and the metric; file sha256 is the bytes', async () => {
    const file = writeTempConfig(fleetYaml());
    const run = spawnSync(process.execPath, [GATEWAY_MAIN, 'validate', file], {
      encoding: 'utf8',
      env: { ...process.env, REDIS_URL: '', ...env },
    });
    expect(run.status).toBe(0);
    const [, configHash, fileSha] =
      /; config_hash ([0-9a-f]{12}), file sha256 ([0-9a-f]{12})\)$/m.exec(run.stdout) ?? [];
    expect(configHash).toMatch(/^[0-9a-f]{12}$/);
    expect(fileSha).toBe(createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 12));
    expect(configHash).not.toBe(fileSha);

    const gateway = await spawnGateway(file, { env });
    try {
      const status = (await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot;
      expect(status.config_hash?.slice(0, 12)).toBe(configHash);
      const metrics = parsePrometheusText(await (await fetch(`${gateway.url}/metrics`)).text());
      expect(metrics.filter((s) => s.name === 'iop_edge_config_info').map((s) => s.labels.hash)).toEqual([configHash]);
    } finally {
      await gateway.stop();
    }
  });
});

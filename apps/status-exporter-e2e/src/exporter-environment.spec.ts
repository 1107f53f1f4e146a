import { startRedis, type TestRedis } from '@iop/dispatch/testing';
import { spawnSync } from 'node:child_process';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { EXPORTER_MAIN, spawnService, writeTempConfig } from './testing/exporter-fixtures';

describe('the exporter process reads its environment once, at start', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it.each(['loud', 'INFO', '30'])(
    'refuses LOG_LEVEL=%j: exit 2, naming the variable, its value and what is expected',
    (value) => {
      const file = writeTempConfig(exporterYaml({ prefix: configPrefix('env') }));
      const run = spawnSync(
        process.execPath,
        [EXPORTER_MAIN, '--config', file, '--redis', redis.url, '--listen', '127.0.0.1:0'],
        {
          encoding: 'utf8',
          env: { ...process.env, REDIS_URL: '', LOG_LEVEL: value },
          timeout: 15_000,
        },
      );
      expect(run.status).toBe(2);
      expect(run.stderr).toContain(
        `environment variable LOG_LEVEL=${JSON.stringify(value)}: expected one of fatal, error, warn, info, debug, trace, silent`,
      );
      expect(run.stderr).not.toMatch(/\n\s+at /);
      expect(run.stdout).not.toContain('listening on');
    },
  );

  it('takes a good LOG_LEVEL (silent logs nothing) and an empty one as the default (info)', async () => {
    for (const [value, infoLines] of [
      ['silent', false],
      ['', true],
    ] as const) {
      const file = writeTempConfig(exporterYaml({ prefix: configPrefix('env') }));
      const p = await spawnService(EXPORTER_MAIN, ['--config', file, '--redis', redis.url, '--listen', '127.0.0.1:0'], {
        env: { REDIS_URL: '', LOG_LEVEL: value },
      });
      expect(p.url).toBeDefined();
      // At once: the SIGTERM handler is in place before the "listening on" line.
      expect(await p.stop()).toBe(0);
      expect(p.output().includes('"level":30')).toBe(infoLines);
    }
  });
});

import type { RedisCostResults, RedisCostRun } from './redis-cost';
import { flowControlCostTable, redisCostChecks, redisCostSection } from './redis-cost-report';
import { spread } from './stats';

const run = (variant: RedisCostRun['variant'], commands: number, cpuMs: number, queued?: number): RedisCostRun => ({
  variant,
  replicas: 1,
  maxConcurrency: variant.startsWith('contended') ? 4 : 2000,
  concurrency: variant.startsWith('contended') ? 64 : 16,
  rounds: [],
  commandsPerRequest: spread([commands]),
  netCommandsPerRequest: spread([commands]),
  cpuMsPerRequest: spread([cpuMs]),
  netCpuMsPerRequest: spread([cpuMs]),
  rps: spread([1000]),
  ...(queued !== undefined ? { queuedShare: spread([0.99]), commandsPerQueuedRequest: spread([queued]) } : {}),
  breakdown: [],
  failures: 0,
});

const cost = (runs: RedisCostRun[]): RedisCostResults => ({
  redisVersion: '7',
  loadAvg: [1, 1],
  options: {
    requests: 100,
    concurrency: [16],
    contendedConcurrency: 64,
    contendedMaxConcurrency: 4,
    idleSeconds: 1,
    rounds: 1,
    warmupRequests: 10,
  },
  idle: [{ replicas: 1, seconds: 1, commandsPerS: 15, perReplicaPerS: 15, cpuMsPerS: 1, breakdown: [] }],
  runs,
});

describe('redis cost report: flow control off and on', () => {
  const measured = cost([
    run('pooled', 16, 0.05),
    run('contended', 29, 0.08, 29.4),
    run('pooled-clients', 20, 0.12),
    run('contended-clients', 41, 0.09, 41.5),
  ]);

  it('checks off against the build before flow control and on against 25 commands and 0.1 ms', () => {
    const checks = redisCostChecks(measured);
    const met = (pattern: RegExp) => checks.find((c) => pattern.test(c.goal))?.met;
    expect(met(/off: no more commands per pooled request than before flow control \(20\.01\)/)).toBe(true);
    expect(met(/off: no more commands per queued request than before flow control \(29\.7\)/)).toBe(true);
    expect(met(/on .*≤ 25 Redis commands per pooled request/)).toBe(true);
    expect(met(/on: ≤ 0\.1 ms of Redis CPU per pooled request/)).toBe(false);
    expect(met(/an idle replica/)).toBe(true);
  });

  it('misses "no more than before" when the queued cost without clients is above 29.7', () => {
    const checks = redisCostChecks(cost([run('contended', 31, 0.08, 31.2)]));
    expect(checks.find((c) => /queued request than before/.test(c.goal))).toMatchObject({
      measured: '×1 c=64: 31.2',
      met: false,
    });
  });

  it('puts each figure of off and on side by side with its target and result', () => {
    const lines = flowControlCostTable(measured)?.split('\n') ?? [];
    expect(lines[2]).toBe('| Redis commands, pooled request | ×1 c=16 | 16.00 | ≤ 20.01: met | 20.00 | ≤ 25: met |');
    expect(lines[3]).toBe('| Redis CPU ms, pooled request | ×1 c=16 | 0.0500 | ≤ 0.15: met | 0.1200 | ≤ 0.1: MISSED |');
    expect(lines[4]).toBe('| Redis commands, queued request | ×1 c=64 | 29.4 | ≤ 29.7: met | 41.5 | — |');
    expect(lines).toHaveLength(6);
  });
});

describe('redis cost report: the round-trip floor', () => {
  const measured = cost([run('pooled', 14, 0.05), run('pooled-clients', 18, 0.12), run('floor', 2, 0.03)]);

  it('shows what each pooled run costs Redis over two bare round trips at the same concurrency', () => {
    const lines = flowControlCostTable(measured)?.split('\n') ?? [];
    expect(lines[4]).toBe(
      '| Redis CPU ms, pooled request, less the two-round-trip floor | ×1 c=16 | 0.0200 | — | 0.0900 | — |',
    );
  });

  it('leaves the targets to the gateway runs, and describes the floor', () => {
    const checks = redisCostChecks(measured);
    expect(checks.find((c) => /off: ≤ 0\.15 ms/.test(c.goal))?.measured).toBe('×1 c=16: 0.0500 ms');
    expect(redisCostSection(measured)).toContain('making 2 bare `PING`s per request on one connection');
    expect(redisCostSection(measured)).toContain('Redis CPU 0.0300 ms per request at c=16');
  });

  it('has no floor row without a floor run', () => {
    const lines = flowControlCostTable(cost([run('pooled', 14, 0.05)]))?.split('\n') ?? [];
    expect(lines.some((l) => l.includes('less the two-round-trip floor') && !l.includes('| — | — | — | — |'))).toBe(
      false,
    );
  });
});

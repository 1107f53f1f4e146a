import type { BenchResults, ThroughputRow } from './bench-results';
import type { LoadPoint } from './closed-loop-load';
import { leanPathChecks } from './report';
import { spread } from './stats';
import type { TargetId } from './target-ids';

/** A throughput row from per-round req/s and (for c=1) mean overheads over direct, ms. */
function row(target: TargetId, concurrency: number, rps: number[], overheadMs?: number[]): ThroughputRow {
  const rounds = rps.map((r) => ({ rps: r, p50Ms: 1 }) as LoadPoint);
  return {
    target,
    label: target,
    concurrency,
    rounds,
    rps: spread(rps),
    meanMs: spread(rps.map((r) => (1000 * concurrency) / r)),
    p50Ms: spread(rps.map(() => 1)),
    p99Ms: spread(rps.map(() => 2)),
    overheadMs: overheadMs ? spread(overheadMs) : undefined,
    failures: 0,
  };
}

const results = (throughput: ThroughputRow[]) => ({ throughput }) as unknown as BenchResults;

describe('leanPathChecks', () => {
  it('pairs the rounds and judges the four throughput targets of the request path near the floor', () => {
    const checks = leanPathChecks(
      results([
        row('node-floor', 64, [10000, 12000, 8000]),
        // 50%, 40%, 50% of the floor, round by round: the median 50% meets 45%.
        row('memory', 64, [5000, 4800, 4000]),
        // 0.7, 0.9, 0.75 of memory: the median 0.75 misses 0.8.
        row('bullmq-1', 64, [3500, 4320, 3000]),
        row('memory', 1, [2000, 2000, 2000], [0.2, 0.3, 0.24]),
        row('bullmq-1', 1, [1000, 1000, 1000], [0.5, 0.46, 0.44]),
      ]),
    );
    expect(checks.map((c) => [c.met, c.measured])).toEqual([
      [true, '50 (40…50)% (4800 vs 10000 req/s)'],
      [false, '75 (70…90)% (3500 vs 4800 req/s)'],
      [true, '+0.240 (+0.200…+0.300) ms'],
      [false, '+0.460 (+0.440…+0.500) ms'],
    ]);
    expect(checks.map((c) => c.goal)).toEqual([
      "memory backend: throughput ≥ 45% of the bare Node proxy's (node-floor) at c=64",
      "Redis backend (1 replica): throughput ≥ 80% of the memory backend's at c=64",
      'memory backend: overhead over direct ≤ 0.25 ms at c=1 (mean, 1000/req·s)',
      'Redis backend (1 replica): overhead over direct ≤ 0.45 ms at c=1 (mean, 1000/req·s)',
    ]);
  });

  it('says "not measured" for a target whose rows did not run', () => {
    const checks = leanPathChecks(results([row('memory', 64, [5000]), row('memory', 1, [2000], [0.2])]));
    expect(checks.map((c) => c.met)).toEqual([null, null, true, null]);
    expect(checks[0].measured).toBe('not measured');
  });
});

import { summarize, type RedisCostRun } from './redis-cost';
import { diffSnapshots, parseCommandStats, parseCpuSeconds, type RedisSnapshot } from './redis-stats';
import { spread } from './stats';

const COMMANDSTATS = `# Commandstats\r
cmdstat_evalsha:calls=4000,usec=60000,usec_per_call=15.00,rejected_calls=0,failed_calls=0\r
cmdstat_llen:calls=4000,usec=2000,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r
cmdstat_client|list:calls=2,usec=40,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r
cmdstat_info:calls=7,usec=300,usec_per_call=42.86,rejected_calls=0,failed_calls=0\r
`;

const CPU = `# CPU\r
used_cpu_sys:1.250000\r
used_cpu_user:0.750000\r
used_cpu_sys_children:0.000000\r
used_cpu_sys_main_thread:1.240000\r
`;

const snapshot = (commands: Record<string, [number, number]>, cpuS: number): RedisSnapshot => ({
  commands: new Map(Object.entries(commands).map(([k, [calls, usec]]) => [k, { calls, usec }])),
  cpuS,
});

describe('redis stats', () => {
  it('reads calls and usec of every command, subcommands included, from INFO commandstats', () => {
    const stats = parseCommandStats(COMMANDSTATS);
    expect(stats.get('evalsha')).toEqual({ calls: 4000, usec: 60000 });
    expect(stats.get('client|list')).toEqual({ calls: 2, usec: 40 });
    expect(stats.size).toBe(4);
  });

  it('adds used_cpu_sys and used_cpu_user (not the main-thread or children lines)', () => {
    expect(parseCpuSeconds(CPU)).toBeCloseTo(2, 10);
    expect(() => parseCpuSeconds('# CPU\r\nused_cpu_sys:1\r\n')).toThrow(/used_cpu_user/);
  });

  it("diffs two snapshots, leaves out the reader's own INFO calls and drops commands that did not run", () => {
    const before = snapshot({ evalsha: [10, 100], llen: [5, 5], info: [3, 30], ping: [1, 1] }, 1.0);
    const after = snapshot({ evalsha: [30, 400], llen: [45, 45], info: [5, 50], ping: [1, 1], publish: [2, 4] }, 1.004);
    const delta = diffSnapshots(before, after, 2);
    expect(delta.commands).toEqual([
      { command: 'llen', calls: 40, usec: 40 },
      { command: 'evalsha', calls: 20, usec: 300 },
      { command: 'publish', calls: 2, usec: 4 },
    ]);
    expect(delta.totalCalls).toBe(62);
    expect(delta.cpuMs).toBeCloseTo(4, 6);
  });

  it('counts from zero when the counters were reset in between (CONFIG RESETSTAT)', () => {
    const delta = diffSnapshots(snapshot({ llen: [100, 100] }, 0), snapshot({ llen: [7, 8] }, 0), 0);
    expect(delta.commands).toEqual([{ command: 'llen', calls: 7, usec: 8 }]);
  });
});

describe('redis cost per request', () => {
  const run = (variant: 'pooled' | 'contended', rounds: RedisCostRun['rounds']): RedisCostRun => ({
    variant,
    replicas: 1,
    maxConcurrency: 2000,
    concurrency: 16,
    rounds,
    commandsPerRequest: spread([]),
    netCommandsPerRequest: spread([]),
    cpuMsPerRequest: spread([]),
    netCpuMsPerRequest: spread([]),
    rps: spread([]),
    breakdown: [],
    failures: 0,
  });
  const round = (commands: number, cpuMs: number, seconds: number, publishes = 0) => ({
    requests: 1000,
    ok: 1000,
    failures: 0,
    seconds,
    rps: 1000 / seconds,
    p50Ms: 1,
    commands,
    cpuMs,
    publishes,
  });

  it("divides by the requests, and the net figures take off the idle rate over the round's seconds", () => {
    const r = run('pooled', [round(20_100, 60, 2), round(20_050, 50, 1)]);
    summarize(
      r,
      new Map([['evalsha', { calls: 4000, usec: 30_000 }]]),
      2000,
      { commandsPerS: 50, cpuMsPerS: 5 },
      undefined,
    );
    expect(r.commandsPerRequest.median).toBeCloseTo(20.075, 10);
    expect([r.commandsPerRequest.min, r.commandsPerRequest.max, r.commandsPerRequest.n]).toEqual([20.05, 20.1, 2]);
    expect(r.netCommandsPerRequest.median).toBeCloseTo(20, 10);
    expect(r.cpuMsPerRequest.median).toBeCloseTo(0.055, 10);
    expect(r.netCpuMsPerRequest.median).toBeCloseTo(0.0475, 10);
    expect(r.breakdown).toEqual([{ command: 'evalsha', perRequest: 2, usecPerRequest: 15 }]);
    expect(r.queuedShare).toBeUndefined();
  });

  it('spreads the extra commands of a contended round over its queued requests', () => {
    // 900 of 1000 queued; 20 commands for a request granted at once, 29 per request in all → 30 per queued request.
    const r = run('contended', [round(29_000, 50, 1, 900)]);
    summarize(r, new Map(), 1000, { commandsPerS: 0, cpuMsPerS: 0 }, { netCommandsPerRequest: spread([20]) });
    expect(r.queuedShare?.median).toBeCloseTo(0.9, 10);
    expect(r.commandsPerQueuedRequest?.median).toBeCloseTo(30, 10);
  });
});

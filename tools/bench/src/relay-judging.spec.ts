import {
  relayChecks,
  relayRound,
  relayRows,
  streamTtfbChecks,
  type RelayOptions,
  type RelayRound,
} from './relay-judging';

const opts: RelayOptions = { streams: 400, chunks: 200, gapMs: 20, rounds: 3 };

/** A round with the given CPU per 1,000 chunks, gap p99 and TTFB (1,000 chunks received). */
function round(cpuMsPer1000Chunks: number, gapP99Ms: number, ttfbMs: number, failures = 0): RelayRound {
  return {
    streams: 5,
    failures,
    chunks: 1000,
    cpuMs: cpuMsPer1000Chunks,
    cpuMsPer1000Chunks,
    ttfbMs,
    gapP50Ms: 20,
    gapP99Ms,
    seconds: 4,
  };
}

describe('relayRound', () => {
  it('divides the CPU by the chunks received and takes gap percentiles over every stream', () => {
    const gaps = Array.from({ length: 99 }, () => 20);
    const r = relayRound(
      [
        { ttfbMs: 1, contentEvents: 100, gapsMs: gaps },
        { ttfbMs: 3, contentEvents: 100, gapsMs: [...gaps.slice(1), 60] },
        { ttfbMs: 2, contentEvents: 50, gapsMs: [] },
      ],
      1,
      75,
      4.2,
      'boom',
    );
    expect(r).toMatchObject({ streams: 3, failures: 1, firstError: 'boom', chunks: 250, cpuMs: 75, ttfbMs: 2 });
    expect(r.cpuMsPer1000Chunks).toBeCloseTo(300);
    expect(r.gapP50Ms).toBe(20);
    // 198 gaps: the 99th percentile is the 197th smallest, still 20; the single 60 is the maximum.
    expect(r.gapP99Ms).toBe(20);
  });

  it('has no CPU per chunk without chunks or without processes', () => {
    expect(relayRound([], 2, 10, 1).cpuMsPer1000Chunks).toBeNaN();
    expect(relayRound([{ ttfbMs: 1, contentEvents: 10, gapsMs: [] }], 0, NaN, 1).cpuMsPer1000Chunks).toBeNaN();
  });
});

describe('relayRows and relayChecks', () => {
  const rows = relayRows(
    new Map([
      ['direct', [round(NaN, 21, 1), round(NaN, 22, 1), round(NaN, 21, 1)]],
      ['node-floor', [round(30, 25, 2), round(40, 30, 2), round(35, 27, 2)]],
      ['memory', [round(36, 28, 2.3), round(60, 36, 2.8), round(42, 31, 2.4)]],
      ['bullmq-1', [round(45, 29, 2.1), round(50, 31, 2.2), round(70, 33, 2.3, 1)]],
    ]),
    {},
  );

  it('pairs every target with the floor round by round', () => {
    const memory = rows.find((r) => r.target === 'memory');
    expect(memory?.cpuVsFloor?.median).toBeCloseTo(1.2);
    expect(memory?.cpuVsFloor?.max).toBeCloseTo(1.5);
    expect(memory?.gapP99OverFloorMs?.median).toBeCloseTo(4);
    expect(memory?.ttfbOverFloorMs?.median).toBeCloseTo(0.4);
    expect(rows.find((r) => r.target === 'direct')?.cpuVsFloor).toBeUndefined();
    expect(rows.find((r) => r.target === 'node-floor')?.cpuVsFloor).toBeUndefined();
  });

  it('meets the limits on medians and fails a target whose streams failed', () => {
    const checks = relayChecks(rows, opts);
    expect(checks).toHaveLength(4);
    expect(checks[0].goal).toContain('20,000 chunks/s');
    expect(checks.slice(0, 2).map((c) => c.met)).toEqual([true, true]);
    // bullmq-1: CPU 1.43× (missed), gap +4 ms (within), but one stream failed.
    expect(checks.slice(2).map((c) => c.met)).toEqual([false, false]);
    expect(checks[2].measured).toContain('1 streams failed');
  });

  it('says not measured without a floor', () => {
    const alone = relayRows(new Map([['memory', [round(36, 28, 2.3)]]]), {});
    expect(relayChecks(alone, opts).map((c) => c.met)).toEqual([null, null, null, null]);
  });
});

describe('streamTtfbChecks', () => {
  it('pairs sequential-stream TTFB with the floor per round', () => {
    const ttfb: Record<string, number[]> = {
      'node-floor': [1.0, 1.2, 1.1],
      memory: [1.3, 1.9, 1.5],
      'bullmq-1': [1.8, 2.0],
    };
    const checks = streamTtfbChecks((id) => ttfb[id]);
    expect(checks.map((c) => c.met)).toEqual([true, false]);
    expect(checks[0].measured).toBe('+0.40 (+0.30…+0.70) ms');
    expect(streamTtfbChecks(() => undefined).map((c) => c.met)).toEqual([null, null]);
  });
});

import type { TargetId } from './bench-targets';
import type { TargetCheck } from './bench-results';
import { fmtSpread } from './markdown';
import { median, pairedDifferences, pairedRatios, percentile, spread, type Spread } from './stats';

/** Knobs of the streaming relay cost scenario (`--scenarios relay`). */
export interface RelayOptions {
  /** Streams open at once per target and round. @defaultValue 400 */
  streams: number;
  /** Content chunks per stream. @defaultValue 200 */
  chunks: number;
  /** Gap the upstream leaves between chunks, ms. @defaultValue 20 (400 × 1000/20 = 20,000 chunks/s) */
  gapMs: number;
  rounds: number;
}

/** One target's window of one round: `streams` concurrent streams, read to their end. */
export interface RelayRound {
  /** Streams that ended well, and that failed. */
  streams: number;
  failures: number;
  firstError?: string;
  /** Content chunks the client received. */
  chunks: number;
  /** CPU (user + system) of the target's processes over the window, ms; NaN for `direct`. */
  cpuMs: number;
  /** `cpuMs` per 1,000 received chunks. */
  cpuMsPer1000Chunks: number;
  /** Median over streams of request sent → first content event, ms. */
  ttfbMs: number;
  /** Percentiles of every gap between consecutive content events at the client, ms. */
  gapP50Ms: number;
  gapP99Ms: number;
  /** Wall time of the window, s. */
  seconds: number;
}

/** One target over every round, with its paired comparisons against the Node floor. */
export interface RelayRow {
  target: TargetId;
  label: string;
  rounds: RelayRound[];
  cpuMsPer1000Chunks: Spread;
  gapP99Ms: Spread;
  ttfbMs: Spread;
  failures: number;
  /** CPU per chunk over the floor's, paired per round. */
  cpuVsFloor?: Spread;
  /** Gap p99 minus the floor's, ms, paired per round. */
  gapP99OverFloorMs?: Spread;
  /** TTFB minus the floor's, ms, paired per round. */
  ttfbOverFloorMs?: Spread;
}

/** What the client saw of one stream (a subset of `StreamSample`). */
export interface RelayStream {
  ttfbMs: number;
  contentEvents: number;
  gapsMs: number[];
}

/**
 * Sums up one target's window: `cpuMs` of its processes over the window (NaN when it has none),
 * the streams the client read, the failures and the wall time in seconds.
 */
export function relayRound(
  streams: RelayStream[],
  failures: number,
  cpuMs: number,
  seconds: number,
  firstError?: string,
): RelayRound {
  const gaps = streams.flatMap((s) => s.gapsMs);
  const chunks = streams.reduce((n, s) => n + s.contentEvents, 0);
  return {
    streams: streams.length,
    failures,
    firstError,
    chunks,
    cpuMs,
    cpuMsPer1000Chunks: chunks > 0 ? (cpuMs * 1000) / chunks : NaN,
    ttfbMs: median(streams.map((s) => s.ttfbMs)),
    gapP50Ms: percentile(gaps, 50),
    gapP99Ms: percentile(gaps, 99),
    seconds,
  };
}

/** Rows of every target (in the given order), paired round by round against `node-floor` when it ran. */
export function relayRows(rounds: Map<TargetId, RelayRound[]>, labels: Record<string, string>): RelayRow[] {
  const floor = rounds.get('node-floor');
  return [...rounds].map(([target, rs]) => {
    const row: RelayRow = {
      target,
      label: labels[target] ?? target,
      rounds: rs,
      cpuMsPer1000Chunks: spread(rs.map((r) => r.cpuMsPer1000Chunks)),
      gapP99Ms: spread(rs.map((r) => r.gapP99Ms)),
      ttfbMs: spread(rs.map((r) => r.ttfbMs)),
      failures: rs.reduce((n, r) => n + r.failures, 0),
    };
    if (floor && target !== 'node-floor' && target !== 'direct') {
      const of = (pick: (r: RelayRound) => number) => [rs.map(pick), floor.map(pick)] as const;
      row.cpuVsFloor = spread(pairedRatios(...of((r) => r.cpuMsPer1000Chunks)));
      row.gapP99OverFloorMs = spread(pairedDifferences(...of((r) => r.gapP99Ms)));
      row.ttfbOverFloorMs = spread(pairedDifferences(...of((r) => r.ttfbMs)));
    }
    return row;
  });
}

/**
 * Limits of the streaming relay targets, against the Node floor of the same run. TTFB is judged on
 * the streaming scenario's sequential streams (`streamTtfbChecks`): at 400 streams opened at once it
 * measures the burst, not the path.
 */
export const RELAY_LIMITS = { cpuVsFloor: 1.3, gapP99OverFloorMs: 5, ttfbOverFloorMs: 0.5 } as const;

const RELAY_JUDGED: ReadonlyArray<[TargetId, string]> = [
  ['memory', 'memory backend'],
  ['bullmq-1', 'Redis backend, 1 replica'],
];

/**
 * The streaming relay targets for the memory and Redis backends: CPU per chunk ≤ 1.3× the floor's,
 * chunk-gap p99 ≤ the floor's + 5 ms (medians of paired rounds; failed streams fail the target).
 */
export function relayChecks(rows: RelayRow[], opts: RelayOptions): TargetCheck[] {
  const rate = Math.round((opts.streams * 1000) / opts.gapMs).toLocaleString('en-US');
  const checks: TargetCheck[] = [];
  for (const [id, name] of RELAY_JUDGED) {
    const row = rows.find((r) => r.target === id);
    const judged = (s: Spread | undefined) => (row && s?.n ? row.failures === 0 : null);
    const failed = row?.failures ? `, ${row.failures} streams failed` : '';
    checks.push(
      {
        goal: `streaming relay (${name}): CPU per chunk ≤ ${RELAY_LIMITS.cpuVsFloor}× the Node floor's at ${rate} chunks/s`,
        measured: row?.cpuVsFloor?.n
          ? `${fmtSpread(row.cpuVsFloor, 2)}× (${row.cpuMsPer1000Chunks.median.toFixed(1)} ms per 1,000 chunks)${failed}`
          : 'not measured',
        met: judged(row?.cpuVsFloor) && (row?.cpuVsFloor?.median ?? Infinity) <= RELAY_LIMITS.cpuVsFloor,
      },
      {
        goal: `streaming relay (${name}): chunk-gap p99 ≤ the Node floor's + ${RELAY_LIMITS.gapP99OverFloorMs} ms`,
        measured: row?.gapP99OverFloorMs?.n
          ? `${fmtSpread(row.gapP99OverFloorMs, 2, true)} ms${failed}`
          : 'not measured',
        met:
          judged(row?.gapP99OverFloorMs) &&
          (row?.gapP99OverFloorMs?.median ?? Infinity) <= RELAY_LIMITS.gapP99OverFloorMs,
      },
    );
  }
  return checks;
}

/**
 * TTFB of one stream at a time (the streaming scenario's rounds, `ttfbMs` per round) ≤ the Node
 * floor's + 0.5 ms, paired per round, for the memory and Redis backends.
 */
export function streamTtfbChecks(ttfbRounds: (id: TargetId) => number[] | undefined): TargetCheck[] {
  const floor = ttfbRounds('node-floor');
  return RELAY_JUDGED.map(([id, name]) => {
    const rounds = ttfbRounds(id);
    const over = floor && rounds ? spread(pairedDifferences(rounds, floor)) : undefined;
    return {
      goal: `streaming: TTFB ≤ the Node floor's + ${RELAY_LIMITS.ttfbOverFloorMs} ms (${name}, one stream at a time)`,
      measured: over?.n ? `${fmtSpread(over, 2, true)} ms` : 'not measured',
      met: over?.n ? over.median <= RELAY_LIMITS.ttfbOverFloorMs : null,
    };
  });
}

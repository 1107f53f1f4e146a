import { inversionsWhileWaiting, sharesBetween, type JudgedCall, type WaitingSample } from '@iop/fake-upstream';
import { FLOW_BENCH_CLIENTS, type FlowAnswers, type FlowClientId, type FlowOptions } from './flow-config';

/** One client of the `flow` run, judged over the measured window. */
export interface FlowClientResult {
  id: FlowClientId;
  band: number;
  weight: number;
  /** Requests the client kept outstanding. */
  lanes: number;
  /** Calls of the client that started in the window. */
  grants: number;
  /** Band 0: its share of the band-0 grants in the window; null for other bands. */
  share: number | null;
  /** Band 0: its weight over the band's weights, the share SFQ gives while every band-0 client is backlogged. */
  weightShare: number | null;
  /** Share of the window's samples in which the client had a request waiting (1 = backlogged throughout). */
  backlogged: number;
  /** What its requests got over the whole run (`queueFull`: 429 queue_full, a full line or shed). */
  answers: FlowAnswers[FlowClientId];
}

/** A pair of band-0 clients: the first one's share of the pair's grants in the window, against its target. */
export interface FlowPairResult {
  a: FlowClientId;
  b: FlowClientId;
  /** What sets the pair apart, in words. */
  what: string;
  grants: number;
  aShare: number;
  /** The first one's share must fall in [low, high]. */
  target: [number, number];
}

/** The `flow` scenario, as written to `latest.json`. */
export interface FlowResults {
  options: FlowOptions;
  /** Length of the run, s. */
  seconds: number;
  /** Measured window, ms after the start: from the warm-up's end to the stop. */
  window: [number, number];
  /** Every call that started in the window. */
  grants: number;
  /** Reads of the clients' waiting counts in the window. */
  samples: number;
  clients: FlowClientResult[];
  pairs: FlowPairResult[];
  /** Grants to a lower band made, for certain, while a higher band's request waited (`inversionsWhileWaiting`). */
  inversions: number;
  /** Grants to a lower band made after a read that showed a higher band waiting: those that were judged. */
  judged: number;
  /** The first few inversions: client, band and start (ms after the start). */
  inversionExamples: Array<{ client: string; band: number; atMs: number }>;
  error?: string;
}

/** The band-0 pairs and their targets (README "Benchmarks"). */
export const FLOW_PAIRS: ReadonlyArray<Omit<FlowPairResult, 'grants' | 'aShare'>> = [
  { a: 'heavy', b: 'light', what: 'equal weights, heavy keeps 10× the requests outstanding', target: [0.45, 0.55] },
  { a: 'w3', b: 'w1', what: 'weights 3 and 1', target: [0.72, 0.78] },
];

/**
 * Judges a `flow` run from the upstream's journal and the waiting counts (docs/architecture.md,
 * "Clients, priority and fair share"). The window starts after a warm-up of a tenth of the run (at
 * most 5 s, so every backlog stands) and ends at the stop; inversions are judged on the calls that
 * started before the stop, when no request had been aborted yet.
 */
export function judgeFlow(run: {
  opts: FlowOptions;
  calls: readonly JudgedCall[];
  samples: readonly WaitingSample[];
  answers: FlowAnswers;
  startedAt: number;
  stoppedAt: number;
}): FlowResults {
  const { opts, calls, samples, answers, startedAt, stoppedAt } = run;
  const from = startedAt + Math.min(5000, (stoppedAt - startedAt) / 10);
  const to = stoppedAt;
  const inWindow = calls.filter((c) => c.startedAt >= from && c.startedAt < to);
  const windowSamples = samples.filter((s) => s.sentAt >= from && s.receivedAt < to);
  const band0 = FLOW_BENCH_CLIENTS.filter((c) => c.band === 0);
  const band0Weights = band0.reduce((n, c) => n + c.weight, 0);
  const band0Shares = sharesBetween(
    inWindow.filter((c) => c.band === 0),
    from,
    to,
  );
  const clients = FLOW_BENCH_CLIENTS.map((c): FlowClientResult => ({
    id: c.id,
    band: c.band,
    weight: c.weight,
    lanes: c.lanes,
    grants: inWindow.filter((x) => x.client === c.id).length,
    share: c.band === 0 ? (band0Shares.get(c.id) ?? 0) : null,
    weightShare: c.band === 0 ? c.weight / band0Weights : null,
    backlogged: windowSamples.length
      ? windowSamples.filter((s) => (s.waiting.get(c.id) ?? 0) > 0).length / windowSamples.length
      : 0,
    answers: answers[c.id],
  }));
  const pairs = FLOW_PAIRS.map((p): FlowPairResult => {
    const pairCalls = inWindow.filter((c) => c.client === p.a || c.client === p.b);
    return { ...p, grants: pairCalls.length, aShare: sharesBetween(pairCalls, from, to).get(p.a) ?? 0 };
  });
  const bands = new Map<string, number>(FLOW_BENCH_CLIENTS.map((c) => [c.id, c.band]));
  const beforeStop = calls.filter((c) => c.startedAt < stoppedAt);
  const judged = inversionsWhileWaiting(beforeStop, samples, bands);
  return {
    options: { ...opts },
    seconds: (stoppedAt - startedAt) / 1000,
    window: [from - startedAt, to - startedAt],
    grants: inWindow.length,
    samples: windowSamples.length,
    clients,
    pairs,
    inversions: judged.inversions.length,
    judged: judged.judged,
    inversionExamples: judged.inversions
      .slice(0, 5)
      .map((c) => ({ client: c.client, band: c.band, atMs: c.startedAt - startedAt })),
  };
}

/** The results of a `flow` run that failed before it could be judged. */
export function emptyFlow(opts: FlowOptions, error: string): FlowResults {
  return {
    options: { ...opts },
    seconds: 0,
    window: [0, 0],
    grants: 0,
    samples: 0,
    clients: [],
    pairs: [],
    inversions: 0,
    judged: 0,
    inversionExamples: [],
    error,
  };
}

import type { BenchResults, RssRow, StreamingRow, TargetCheck, ThroughputRow } from './bench-results';
import { TARGET_SHORT, type TargetId } from './target-ids';
import type { ProfileSummary } from './cpu-profile';
import { flowChecks, flowSection } from './flow-report';
import { redisCostChecks, redisCostSection } from './redis-cost-report';
import { relayTable } from './relay-cost';
import { relayChecks, streamTtfbChecks } from './relay-judging';
import { tokenEstimateSection } from './token-estimate-report';
import { instructionsSection } from './instructions-report';
import { redisInstructionsSection } from './redis-instructions';
import { fmtSpread, table } from './markdown';
import { pairedDifferences, pairedRatios, spread, type Spread } from './stats';

/** Limits of the issue's targets. */
export const LIMITS = {
  memoryOverheadC1Ms: 0.5,
  /** "The request path near the Node floor": memory backend overhead over direct at c=1, ms (mean). */
  leanOverheadC1Ms: 0.25,
  /** The same for the Redis backend, one replica, ms (mean). */
  redisOverheadC1Ms: 0.45,
  /** Memory backend throughput as a share of the bare Node proxy's at c=64. */
  shareOfNodeFloorC64: 0.45,
  /** Redis backend (one replica) throughput as a share of the memory backend's at c=64. */
  redisShareOfMemoryC64: 0.8,
  throughputVsPortkeyC64: 4,
  streamTtfbOverheadMs: 1,
  streamGapP99OverheadMs: 1,
  /** Share of chunk gaps allowed to be bunched: a busy machine can delay any process for a moment. */
  streamBunchedShare: 0.01,
  /** Reads per stream at least this share of the chunks ("reads ≈ chunks": no coalescing). */
  streamReadsPerChunk: 0.98,
  bullmqP50OverMemoryMs: 1.5,
  rssAtOpenStreamsBytes: 150 * 1024 * 1024,
} as const;

const MiB = 1024 * 1024;

function findThroughput(results: BenchResults, target: TargetId, concurrency: number): ThroughputRow | undefined {
  return results.throughput.find((r) => r.target === target && r.concurrency === concurrency);
}

/** `a`'s throughput over `b`'s, paired round by round, as a spread; undefined when either row is missing. */
function rpsRatio(a: ThroughputRow | undefined, b: ThroughputRow | undefined): Spread | undefined {
  if (!a || !b) return undefined;
  return spread(
    pairedRatios(
      a.rounds.map((p) => p.rps),
      b.rounds.map((p) => p.rps),
    ),
  );
}

function findStreaming(results: BenchResults, target: TargetId): StreamingRow | undefined {
  return results.streaming.find((r) => r.target === target);
}

function findRss(results: BenchResults, target: TargetId): RssRow | undefined {
  return results.rss.find((r) => r.target === target);
}

const verdict = (met: boolean | null) => (met === null ? 'not measured' : met ? 'met' : 'MISSED');

/** Checks each target of the issue against what this run measured (medians of paired rounds). */
export function evaluateTargets(results: BenchResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const memC1 = findThroughput(results, 'memory', 1);
  checks.push({
    goal: `memory backend: overhead over direct ≤ ${LIMITS.memoryOverheadC1Ms} ms at c=1 (mean, 1000/req·s)`,
    measured: memC1?.overheadMs?.n ? `${fmtSpread(memC1.overheadMs, 3, true)} ms` : 'not measured',
    met: memC1?.overheadMs?.n ? memC1.overheadMs.median <= LIMITS.memoryOverheadC1Ms : null,
  });

  const memC64 = findThroughput(results, 'memory', 64);
  checks.push(...leanPathChecks(results));
  const pkC64 = findThroughput(results, 'portkey', 64);
  const ratio = rpsRatio(memC64, pkC64);
  checks.push({
    goal: `memory backend: throughput ≥ ${LIMITS.throughputVsPortkeyC64}× Portkey at c=64`,
    measured: ratio?.n
      ? `${fmtSpread(ratio, 2)}× (${memC64?.rps.median.toFixed(0)} vs ${pkC64?.rps.median.toFixed(0)} req/s)`
      : 'not measured',
    met: ratio?.n ? ratio.median >= LIMITS.throughputVsPortkeyC64 : null,
  });

  const memStream = findStreaming(results, 'memory');
  const directStream = findStreaming(results, 'direct');
  checks.push({
    goal: `streaming: time-to-first-byte overhead ≤ ${LIMITS.streamTtfbOverheadMs} ms (memory backend)`,
    measured: memStream?.ttfbOverheadMs?.n ? `${fmtSpread(memStream.ttfbOverheadMs, 3, true)} ms` : 'not measured',
    met: memStream?.ttfbOverheadMs?.n ? memStream.ttfbOverheadMs.median <= LIMITS.streamTtfbOverheadMs : null,
  });
  if (memStream && directStream && memStream.rounds.length > 0) {
    const { chunks } = results.options;
    const p99Over = memStream.gapP99Ms.median - directStream.gapP99Ms.median;
    const share = (row: StreamingRow) => (row.gaps ? row.bunched / row.gaps : 0);
    const met =
      memStream.failures === 0 &&
      memStream.minContentEvents === chunks &&
      memStream.readsPerStream.median >= LIMITS.streamReadsPerChunk * chunks &&
      share(memStream) <= LIMITS.streamBunchedShare &&
      p99Over <= LIMITS.streamGapP99OverheadMs;
    checks.push({
      goal:
        `streaming: no chunk held back (every stream has all ${chunks} chunks; reads/stream ≥ ${LIMITS.streamReadsPerChunk * 100}% of chunks; ` +
        `≤ ${LIMITS.streamBunchedShare * 100}% of gaps bunched; gap p99 ≤ direct's + ${LIMITS.streamGapP99OverheadMs} ms)`,
      measured:
        `chunks/stream ≥ ${memStream.minContentEvents}, reads/stream ${memStream.readsPerStream.median} (direct ${directStream.readsPerStream.median}), ` +
        `bunched ${memStream.bunched} of ${memStream.gaps} gaps (direct ${directStream.bunched} of ${directStream.gaps}), ` +
        `gap p99 ${memStream.gapP99Ms.median.toFixed(2)} ms (direct ${directStream.gapP99Ms.median.toFixed(2)} ms)`,
      met,
    });
  } else checks.push({ goal: 'streaming: no chunk held back', measured: 'not measured', met: null });

  for (const id of ['bullmq-1', 'bullmq-3'] as const) {
    const bull = findThroughput(results, id, 1);
    const p50Over =
      bull && memC1
        ? spread(
            pairedDifferences(
              bull.rounds.map((p) => p.p50Ms),
              memC1.rounds.map((p) => p.p50Ms),
            ),
          )
        : undefined;
    const skipped = results.targets.find((t) => t.id === id && t.status === 'skipped');
    checks.push({
      goal: `Redis backend, pooled (${id === 'bullmq-1' ? '1 replica' : '3 replicas'}): p50 ≤ memory's + ${LIMITS.bullmqP50OverMemoryMs} ms (c=1)`,
      measured: p50Over?.n
        ? `${fmtSpread(p50Over, 3, true)} ms`
        : skipped
          ? `skipped: ${skipped.reason}`
          : 'not measured',
      met: p50Over?.n ? p50Over.median <= LIMITS.bullmqP50OverMemoryMs : null,
    });
  }

  const bullmqAdmission = results.admission.find((r) => r.backend === 'bullmq-1');
  checks.push({
    goal: `Redis backend admission (acquireLease + release, idle pool, 1 replica): median ≤ memory's + ${LIMITS.bullmqP50OverMemoryMs} ms`,
    measured: bullmqAdmission?.idleMedianOverMemoryMs?.n
      ? `${fmtSpread(bullmqAdmission.idleMedianOverMemoryMs, 3, true)} ms`
      : 'not measured',
    met: bullmqAdmission?.idleMedianOverMemoryMs?.n
      ? bullmqAdmission.idleMedianOverMemoryMs.median <= LIMITS.bullmqP50OverMemoryMs
      : null,
  });

  for (const id of ['memory', 'memory-semi4', 'bullmq-1'] as const) {
    const row = findRss(results, id);
    const peak = row?.result?.peakRss;
    const allOpen = row?.result?.opened === results.options.openStreams;
    checks.push({
      goal: `RSS at ${results.options.openStreams.toLocaleString('en-US')} open streams ≤ 150 MB (${TARGET_SHORT[id]})`,
      measured:
        peak !== undefined
          ? `${(peak / MiB).toFixed(1)} MB peak (VmHWM) with ${row?.result?.opened} of ${results.options.openStreams} streams open`
          : row?.error
            ? `failed: ${row.error}`
            : 'not measured',
      met: peak !== undefined ? peak <= LIMITS.rssAtOpenStreamsBytes && allOpen : null,
    });
  }
  checks.push(...streamTtfbChecks((id) => findStreaming(results, id)?.rounds.map((r) => r.ttfbMs)));
  checks.push(...relayChecks(results.relay ?? [], results.options.relay));
  checks.push(...redisCostChecks(results.redisCost));
  checks.push(...flowChecks(results.flow));
  return checks;
}

/**
 * The throughput targets of "the request path near the Node floor", each a median of rounds paired
 * within this run: the memory backend's req/s at c=64 ≥ 45% of the bare Node proxy's (`node-floor`),
 * the Redis backend's (one replica) ≥ 0.8× the memory backend's at c=64, and the mean overhead over
 * direct at c=1 ≤ 0.25 ms (memory) and ≤ 0.45 ms (Redis). A target whose rows did not run is
 * `met: null` ("not measured").
 */
export function leanPathChecks(results: BenchResults): TargetCheck[] {
  const memC64 = findThroughput(results, 'memory', 64);
  const shareCheck = (goal: string, a: ThroughputRow | undefined, b: ThroughputRow | undefined, limit: number) => {
    const share = rpsRatio(a, b);
    return {
      goal,
      measured: share?.n
        ? `${fmtSpread({ ...share, median: share.median * 100, min: share.min * 100, max: share.max * 100 }, 0)}% (${a?.rps.median.toFixed(0)} vs ${b?.rps.median.toFixed(0)} req/s)`
        : 'not measured',
      met: share?.n ? share.median >= limit : null,
    };
  };
  const overheadCheck = (name: string, row: ThroughputRow | undefined, limitMs: number) => ({
    goal: `${name}: overhead over direct ≤ ${limitMs} ms at c=1 (mean, 1000/req·s)`,
    measured: row?.overheadMs?.n ? `${fmtSpread(row.overheadMs, 3, true)} ms` : 'not measured',
    met: row?.overheadMs?.n ? row.overheadMs.median <= limitMs : null,
  });
  return [
    shareCheck(
      `memory backend: throughput ≥ ${LIMITS.shareOfNodeFloorC64 * 100}% of the bare Node proxy's (node-floor) at c=64`,
      memC64,
      findThroughput(results, 'node-floor', 64),
      LIMITS.shareOfNodeFloorC64,
    ),
    shareCheck(
      `Redis backend (1 replica): throughput ≥ ${LIMITS.redisShareOfMemoryC64 * 100}% of the memory backend's at c=64`,
      findThroughput(results, 'bullmq-1', 64),
      memC64,
      LIMITS.redisShareOfMemoryC64,
    ),
    overheadCheck('memory backend', findThroughput(results, 'memory', 1), LIMITS.leanOverheadC1Ms),
    overheadCheck('Redis backend (1 replica)', findThroughput(results, 'bullmq-1', 1), LIMITS.redisOverheadC1Ms),
  ];
}

/** The non-streaming table: one row per concurrency and target. */
export function throughputTable(rows: ThroughputRow[]): string {
  return table(
    ['c', 'target', 'req/s', 'mean ms (1000·c/req·s)', 'p50 ms', 'p99 ms', 'mean overhead vs direct, ms', 'errors'],
    rows.map((r) => [
      String(r.concurrency),
      r.label,
      fmtSpread(r.rps, 0),
      fmtSpread(r.meanMs, 3),
      fmtSpread(r.p50Ms, 2),
      fmtSpread(r.p99Ms, 2),
      r.target === 'direct' ? '(floor)' : fmtSpread(r.overheadMs, 3, true),
      String(r.failures),
    ]),
  );
}

/** The streaming table: TTFB and chunk gaps as the client saw them. */
export function streamingTable(rows: StreamingRow[]): string {
  return table(
    [
      'target',
      'TTFB ms',
      'TTFB overhead ms',
      'gap p50 ms',
      'gap p99 ms',
      'gap max ms',
      'bunched',
      'chunks/stream (min)',
      'reads/stream',
      'failed',
    ],
    rows.map((r) => [
      r.label,
      fmtSpread(r.ttfbMs, 2),
      r.target === 'direct' ? '(floor)' : fmtSpread(r.ttfbOverheadMs, 2, true),
      fmtSpread(r.gapP50Ms, 2),
      fmtSpread(r.gapP99Ms, 2),
      fmtSpread(r.gapMaxMs, 1),
      String(r.bunched),
      String(r.minContentEvents),
      fmtSpread(r.readsPerStream, 0),
      String(r.failures),
    ]),
  );
}

/** The memory table: one fresh process (or replica set) per target. */
export function rssTable(rows: RssRow[], streams: number): string {
  return table(
    [
      'target',
      'processes',
      `streams open (of ${streams})`,
      'time to open all, ms',
      'RSS after start MB',
      'RSS warm, idle MB',
      'peak RSS MB (VmHWM)',
      'sampled peak VmRSS MB',
    ],
    rows.map((r) =>
      r.result
        ? [
            r.label,
            String(r.processes),
            String(r.result.opened) + (r.result.failed ? ` (${r.result.failed} failed)` : ''),
            Number.isFinite(r.result.openMs) ? r.result.openMs.toFixed(0) : '—',
            r.freshRss === undefined ? '—' : (r.freshRss / MiB).toFixed(1),
            (r.result.idleRss / MiB).toFixed(1),
            (r.result.peakRss / MiB).toFixed(1),
            (r.result.sampledPeakRss / MiB).toFixed(1),
          ]
        : [r.label, String(r.processes), `failed: ${r.error ?? '?'}`, '—', '—', '—', '—', '—'],
    ),
  );
}

/** Throughput ratios per concurrency, paired per round: the Redis backend against memory, itself and Portkey. */
export function throughputRatioTable(rows: ThroughputRow[]): string | undefined {
  const pairs: Array<[TargetId, TargetId, string]> = [
    ['memory', 'node-floor', 'memory / Node floor'],
    ['express-floor', 'node-floor', 'express floor / Node floor'],
    ['memory', 'express-floor', 'memory / express floor'],
    ['bullmq-1', 'memory', 'Redis ×1 / memory'],
    ['bullmq-3', 'memory', 'Redis ×3 / memory'],
    ['bullmq-3', 'bullmq-1', 'Redis ×3 / Redis ×1'],
    ['bullmq-1', 'portkey', 'Redis ×1 / Portkey'],
    ['bullmq-3', 'portkey', 'Redis ×3 / Portkey'],
    ['memory', 'portkey', 'memory / Portkey'],
  ];
  const find = (target: TargetId, c: number) => rows.find((r) => r.target === target && r.concurrency === c);
  const concurrencies = [...new Set(rows.map((r) => r.concurrency))];
  const present = pairs.filter(([a, b]) => concurrencies.some((c) => find(a, c) && find(b, c)));
  if (present.length === 0) return undefined;
  return table(
    ['c', ...present.map(([, , label]) => label)],
    concurrencies.map((c) => [
      String(c),
      ...present.map(([a, b]) => {
        const ratio = rpsRatio(find(a, c), find(b, c));
        return ratio ? `${fmtSpread(ratio, 2)}×` : '—';
      }),
    ]),
  );
}

const pct = (share: number) => `${(share * 100).toFixed(1)}%`;

/** Hot spots of a profile: categories, then the gateway's own functions by self and total time. */
export function profileSection(summary: ProfileSummary): string {
  return [
    `Busy ${summary.busyMs.toFixed(0)} ms of ${summary.wallMs.toFixed(0)} ms profiled; shares are of busy time.`,
    '',
    table(
      ['self time by category', 'share'],
      summary.categories.slice(0, 12).map((c) => [c.category, pct(c.selfShare)]),
    ),
    '',
    table(
      ['hottest functions (self)', 'category', 'self', 'total'],
      summary.top.map((s) => [`\`${s.where}\``, s.category, pct(s.selfShare), pct(s.totalShare)]),
    ),
    '',
    table(
      ['gateway code (self time)', 'self', 'total'],
      summary.gatewayBySelf.map((s) => [`\`${s.where}\``, pct(s.selfShare), pct(s.totalShare)]),
    ),
    '',
    'Total time includes callees; for an express middleware that is everything after its `next()`, so read it for the handlers, not the middlewares.',
    '',
    table(
      ['gateway code (total time, callees included)', 'self', 'total'],
      summary.gatewayByTotal.map((s) => [`\`${s.where}\``, pct(s.selfShare), pct(s.totalShare)]),
    ),
  ].join('\n');
}

/** The whole report, `latest.md`. */
export function renderMarkdown(results: BenchResults): string {
  const { meta, options } = results;
  const out: string[] = [];
  out.push(`# iop-edge benchmark`);
  out.push('');
  out.push(
    `${meta.date} · \`${meta.command}\` · Node ${meta.node} · ${meta.cpus} cores (${meta.cpuModel}), ${meta.totalMemGiB.toFixed(0)} GiB · ` +
      `commit ${meta.gitCommit} · ${meta.durationS.toFixed(0)} s · load average ${meta.loadAvgStart.toFixed(2)} at start, ${meta.loadAvgEnd.toFixed(2)} at end`,
  );
  out.push('');
  out.push(
    `Everything runs on this machine over loopback, load generator included, each server its own process. ` +
      `${options.rounds} interleaved round(s) × ${options.seconds} s per point (targets in rotated order each round); ` +
      `cells are the median over rounds with (min…max) as the noise. Overheads are paired per round against direct. ` +
      `Load: autocannon, closed loop, keep-alive, one small non-streaming Chat Completion (\`max_tokens: 32\`).`,
  );
  out.push('');
  out.push('## Targets of the issue');
  out.push('');
  out.push(
    table(
      ['target', 'measured (median, range over rounds)', 'result'],
      results.checks.map((c) => [c.goal, c.measured, verdict(c.met)]),
    ),
  );
  out.push('');
  out.push('## Systems');
  out.push('');
  out.push(
    table(
      ['id', 'system', 'status'],
      results.targets.map((t) => [
        t.id,
        t.label,
        t.status === 'ran' ? `ran${t.note ? `; ${t.note}` : ''}` : `skipped: ${t.reason ?? ''}`,
      ]),
    ),
  );
  if (results.throughput.length) {
    out.push('');
    out.push('## Non-streaming Chat Completions');
    out.push('');
    out.push(throughputTable(results.throughput));
    const ratios = throughputRatioTable(results.throughput);
    if (ratios) {
      out.push('');
      out.push('Throughput ratios (req/s, paired per round; median (min…max)):');
      out.push('');
      out.push(ratios);
    }
    out.push('');
    out.push(
      "mean = 1000 · c / (req/s) by Little's law (client time between requests included); p50/p99 from per-request times at sub-ms precision.",
    );
  }
  if (results.streaming.length) {
    out.push('');
    out.push(`## Streaming (${options.chunks} chunks, ${options.chunkGapMs} ms apart)`);
    out.push('');
    out.push(streamingTable(results.streaming));
    out.push('');
    out.push(
      `${options.streamsPerRound} sequential streams per target and round. TTFB: request sent → first content event. ` +
        `Gaps: between consecutive content events as the client read them; direct shows what the upstream sent. ` +
        `bunched: gaps under ${(options.chunkGapMs / 4).toFixed(2)} ms (a quarter of the upstream's), i.e. chunks delivered together.`,
    );
  }
  if (results.relay?.length) {
    const r = options.relay;
    out.push('');
    out.push(
      `## Streaming relay cost (${r.streams} streams at once × ${r.chunks} chunks, ${r.gapMs} ms apart: ` +
        `${Math.round((r.streams * 1000) / r.gapMs).toLocaleString('en-US')} chunks/s)`,
    );
    out.push('');
    out.push(relayTable(results.relay));
    out.push('');
    out.push(
      "CPU: user + system time of the target's processes (`/proc/<pid>/stat`) over the window, per 1,000 content chunks the client received. " +
        'Gaps: between consecutive content events at the client (all streams); TTFB: median over streams of request sent → first content event. ' +
        "Against the floor: paired per round. Direct shows what the upstream sent (its CPU is not the proxy's).",
    );
  }
  if (results.rss.length) {
    out.push('');
    out.push(`## Memory at ${options.openStreams.toLocaleString('en-US')} open streams`);
    out.push('');
    out.push(rssTable(results.rss, options.openStreams));
    out.push('');
    out.push(
      'A fresh process per target (replicas summed), warmed by 1 s of load, then every stream opened at once on its own connection and held ' +
        '1 s after the last one delivered content (chunks 500 ms apart); VmHWM and VmRSS from /proc/<pid>/status.',
    );
  }
  if (results.admission.length) {
    out.push('');
    out.push('## Admission cost of the ProviderQueue backends (in process)');
    out.push('');
    out.push(
      table(
        [
          'backend',
          'idle acquire+release p50 ms',
          'idle p99 ms',
          'p50 over memory ms',
          'saturated hand-offs/s (limit 4, 32 callers)',
        ],
        results.admission.map((r) => [
          r.backend,
          fmtSpread(r.idleMedianMs, 3),
          fmtSpread(r.idleP99Ms, 3),
          fmtSpread(r.idleMedianOverMemoryMs, 3, true),
          fmtSpread(r.saturatedPerS, 0),
        ]),
      ),
    );
    out.push('');
    out.push(
      '`acquireLease` + `release` called directly on the queue (no HTTP), rounds interleaved; the Redis backend on its own redis-server, 3 replicas = 3 queue instances in one process sharing a prefix.',
    );
  }
  if (results.redisCost) {
    out.push('');
    out.push('## Redis cost of the Redis backend (commands and Redis CPU per request, idle replicas)');
    out.push('');
    out.push(redisCostSection(results.redisCost));
  }
  if (results.flow) {
    out.push('');
    out.push('## Flow control: shares and priority inversions (scenario `flow`)');
    out.push('');
    out.push(flowSection(results.flow));
  }
  if (results.tokenEstimate) {
    out.push('');
    out.push('## Token-weight estimate against real tokenizers (scenario `token-estimate`)');
    out.push('');
    out.push(tokenEstimateSection(results.tokenEstimate));
  }
  if (results.redisInstructions) {
    out.push('');
    out.push('## Redis instructions per pooled request (scenario `redis-instructions`)');
    out.push('');
    out.push(redisInstructionsSection(results.redisInstructions));
  }
  if (results.instructions) {
    out.push('');
    out.push('## Instructions and syscalls per request (scenario `instructions`)');
    out.push('');
    out.push(instructionsSection(results.instructions));
  }
  if (results.profile) {
    out.push('');
    out.push(`## CPU profile of the memory backend (${results.profile.reason})`);
    out.push('');
    out.push(
      `\`node --cpu-prof\` on a fresh gateway (default LOG_LEVEL, logs to a file) under c=${results.profile.concurrency} for ${results.profile.seconds} s.`,
    );
    out.push('');
    out.push(
      results.profile.summary ? profileSection(results.profile.summary) : `failed: ${results.profile.error ?? '?'}`,
    );
  }
  out.push('');
  return out.join('\n');
}

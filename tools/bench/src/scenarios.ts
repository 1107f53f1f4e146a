import { readdirSync } from 'node:fs';
import path from 'node:path';
import { Agent } from 'undici';
import type { BenchOptions, RssRow, StreamRound, StreamingRow, ThroughputRow } from './bench-results';
import { TARGET_LABELS, type BenchTarget, type TargetId, type TargetLauncher } from './bench-targets';
import { runLoad, type LoadPoint } from './closed-loop-load';
import { summarizeProfile, type CpuProfile, type ProfileSummary } from './cpu-profile';
import { BENCH_MODEL } from './gateway-config';
import { probeOpenStreams } from './open-streams-probe';
import { median, pairedDifferences, percentile, spread } from './stats';
import { probeStream, type StreamSample } from './stream-probe';
import { readFileSync } from 'node:fs';

/** Progress lines go to stderr, so stdout carries only the final table. */
export type Log = (line: string) => void;

/** The small non-streaming Chat Completion every throughput point sends. */
export const CHAT_BODY = JSON.stringify({
  model: BENCH_MODEL,
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 32,
});

/** A prompt long enough that each of 50 chunks of the echoed reply carries text. */
const STREAM_PROMPT = 'Stream this sentence back in many small pieces so that every chunk carries some text. '
  .repeat(3)
  .trim();

/**
 * A streaming request of `chunks` chunks `gapMs` apart, with the knobs both in the body (the
 * gateway passes the body through) and as headers (Portkey drops unknown body fields but forwards
 * the headers named in `x-portkey-forward-headers`).
 */
export function streamRequest(chunks: number, gapMs: number): { body: string; headers: Record<string, string> } {
  return {
    body: JSON.stringify({
      model: BENCH_MODEL,
      stream: true,
      messages: [{ role: 'user', content: STREAM_PROMPT }],
      fake: { chunks, chunk_gap_ms: gapMs },
    }),
    headers: { 'x-fake-chunks': String(chunks), 'x-fake-chunk-gap-ms': String(gapMs) },
  };
}

const failedPoint = (): LoadPoint => ({
  rps: NaN,
  meanMs: NaN,
  sampleMeanMs: NaN,
  p50Ms: NaN,
  p99Ms: NaN,
  ok: 0,
  failures: 1,
});

/** `list` rotated left by `by`, so no target is always measured first or last in a round. */
function rotate<T>(list: readonly T[], by: number): T[] {
  const k = list.length === 0 ? 0 : by % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

/**
 * A short load and 50 streams, so JIT warm-up of both paths (JSON and SSE) and connection setup stay
 * out of the rounds: a gateway serves for days, its steady state is what users see.
 */
export async function warmUp(target: BenchTarget, opts: BenchOptions): Promise<void> {
  await runLoad({
    urls: target.urls,
    headers: target.headers,
    body: CHAT_BODY,
    connections: 16,
    durationS: opts.warmupSeconds,
  });
  const stream = streamRequest(opts.chunks, 0);
  const agent = new Agent({ connections: 4 });
  try {
    for (let i = 0; i < 50; i++) {
      await probeStream({
        url: target.urls[i % target.urls.length],
        headers: { ...target.headers, ...stream.headers },
        body: stream.body,
        dispatcher: agent,
      });
    }
  } finally {
    await agent.close();
  }
}

/**
 * Scenario 2: non-streaming throughput and latency at each concurrency. For each concurrency,
 * `rounds` rounds; each round loads every target once, one after the other (interleaved, the
 * order rotated per round), so drift of the machine hits every target alike.
 */
export async function runThroughput(targets: BenchTarget[], opts: BenchOptions, log: Log): Promise<ThroughputRow[]> {
  const rows: ThroughputRow[] = [];
  for (const connections of opts.concurrency) {
    const points = new Map<TargetId, LoadPoint[]>(targets.map((t) => [t.id, []]));
    for (let round = 0; round < opts.rounds; round++) {
      for (const target of rotate(targets, round)) {
        let point: LoadPoint;
        try {
          point = await runLoad({
            urls: target.urls,
            headers: target.headers,
            body: CHAT_BODY,
            connections,
            durationS: opts.seconds,
          });
        } catch (err) {
          log(`  ${target.id} c=${connections}: load failed: ${(err as Error).message}`);
          point = failedPoint();
        }
        points.get(target.id)?.push(point);
        log(
          `  c=${connections} round ${round + 1}/${opts.rounds} ${target.id.padEnd(11)} ${point.rps.toFixed(0).padStart(6)} req/s ` +
            `mean ${point.meanMs.toFixed(3)} ms p50 ${point.p50Ms.toFixed(2)} p99 ${point.p99Ms.toFixed(2)}${point.failures ? ` failures ${point.failures}` : ''}`,
        );
      }
    }
    const direct = points.get('direct');
    for (const target of targets) {
      const rounds = points.get(target.id) ?? [];
      const row: ThroughputRow = {
        target: target.id,
        label: target.label,
        concurrency: connections,
        rounds,
        rps: spread(rounds.map((p) => p.rps)),
        meanMs: spread(rounds.map((p) => p.meanMs)),
        p50Ms: spread(rounds.map((p) => p.p50Ms)),
        p99Ms: spread(rounds.map((p) => p.p99Ms)),
        failures: rounds.reduce((n, p) => n + p.failures, 0),
      };
      if (direct && target.id !== 'direct') {
        row.overheadMs = spread(
          pairedDifferences(
            rounds.map((p) => p.meanMs),
            direct.map((p) => p.meanMs),
          ),
        );
        row.p50OverheadMs = spread(
          pairedDifferences(
            rounds.map((p) => p.p50Ms),
            direct.map((p) => p.p50Ms),
          ),
        );
      }
      rows.push(row);
    }
  }
  return rows;
}

/** Sums up one target's streams of one round. */
export function streamRound(
  samples: StreamSample[],
  failures: number,
  gapMs: number,
  firstError?: string,
): StreamRound {
  const gaps = samples.flatMap((s) => s.gapsMs);
  return {
    streams: samples.length,
    failures,
    ttfbMs: median(samples.map((s) => s.ttfbMs)),
    headersMs: median(samples.map((s) => s.headersMs)),
    gapP50Ms: percentile(gaps, 50),
    gapP99Ms: percentile(gaps, 99),
    gapMaxMs: gaps.length ? Math.max(...gaps) : NaN,
    gaps: gaps.length,
    bunched: gaps.filter((g) => g < gapMs / 4).length,
    minContentEvents: samples.length ? Math.min(...samples.map((s) => s.contentEvents)) : 0,
    readsPerStream: median(samples.map((s) => s.reads)),
    firstError,
  };
}

/**
 * Scenario 3: streams of `chunks` chunks, `chunkGapMs` apart, one at a time per target,
 * interleaved by round. The direct target shows what the upstream sent; a gateway should add
 * nothing to the first byte and pass every chunk on as it comes (no bunching, same gaps).
 */
export async function runStreaming(targets: BenchTarget[], opts: BenchOptions, log: Log): Promise<StreamingRow[]> {
  const stream = streamRequest(opts.chunks, opts.chunkGapMs);
  const rounds = new Map<TargetId, StreamRound[]>(targets.map((t) => [t.id, []]));
  for (let round = 0; round < opts.rounds; round++) {
    for (const target of rotate(targets, round)) {
      const agent = new Agent({ connections: target.urls.length });
      const samples: StreamSample[] = [];
      let failures = 0;
      let firstError: string | undefined;
      for (let i = 0; i < opts.streamsPerRound; i++) {
        try {
          samples.push(
            await probeStream({
              url: target.urls[i % target.urls.length],
              headers: { ...target.headers, ...stream.headers },
              body: stream.body,
              dispatcher: agent,
            }),
          );
        } catch (err) {
          failures++;
          firstError ??= (err as Error).message;
        }
      }
      await agent.close();
      const r = streamRound(samples, failures, opts.chunkGapMs, firstError);
      rounds.get(target.id)?.push(r);
      log(
        `  stream round ${round + 1}/${opts.rounds} ${target.id.padEnd(11)} ttfb ${r.ttfbMs.toFixed(2)} ms, gap p50 ${r.gapP50Ms.toFixed(2)} ` +
          `p99 ${r.gapP99Ms.toFixed(2)} max ${r.gapMaxMs.toFixed(2)}, bunched ${r.bunched}, content ${r.minContentEvents}, reads ${r.readsPerStream}` +
          (failures ? `, failures ${failures}: ${firstError}` : ''),
      );
    }
  }
  const direct = rounds.get('direct');
  return targets.map((target) => {
    const rs = rounds.get(target.id) ?? [];
    const row: StreamingRow = {
      target: target.id,
      label: target.label,
      rounds: rs,
      ttfbMs: spread(rs.map((r) => r.ttfbMs)),
      gapP50Ms: spread(rs.map((r) => r.gapP50Ms)),
      gapP99Ms: spread(rs.map((r) => r.gapP99Ms)),
      gapMaxMs: spread(rs.map((r) => r.gapMaxMs)),
      gaps: rs.reduce((n, r) => n + r.gaps, 0),
      bunched: rs.reduce((n, r) => n + r.bunched, 0),
      minContentEvents: rs.length ? Math.min(...rs.map((r) => r.minContentEvents)) : 0,
      readsPerStream: spread(rs.map((r) => r.readsPerStream)),
      failures: rs.reduce((n, r) => n + r.failures, 0),
    };
    if (direct && target.id !== 'direct')
      row.ttfbOverheadMs = spread(
        pairedDifferences(
          rs.map((r) => r.ttfbMs),
          direct.map((r) => r.ttfbMs),
        ),
      );
    return row;
  });
}

/**
 * Scenario 4: a fresh copy of each target holds `openStreams` streams at once; VmHWM (peak RSS)
 * and sampled VmRSS are read from /proc. Streams are slow (500 ms between chunks) and aborted
 * once measured.
 */
export async function runRss(
  ids: TargetId[],
  launcher: TargetLauncher,
  opts: BenchOptions,
  log: Log,
): Promise<RssRow[]> {
  const rows: RssRow[] = [];
  const stream = streamRequest(opts.chunks, 500);
  for (const id of ids) {
    let target: BenchTarget | undefined;
    try {
      target = await launcher.launch(id, { tag: ' (rss)' });
      const freshRss = target.processes.reduce((sum, p) => sum + p.memory().rss, 0);
      await warmUp(target, { ...opts, warmupSeconds: 1 });
      const result = await probeOpenStreams({
        urls: target.urls,
        headers: { ...target.headers, ...stream.headers },
        body: stream.body,
        streams: opts.openStreams,
        processes: target.processes,
        openTimeoutMs: 15_000,
        holdMs: 1000,
      });
      rows.push({ target: id, label: target.label, processes: target.processes.length, freshRss, result });
      log(
        `  rss ${id.padEnd(11)} opened ${result.opened}/${opts.openStreams} in ${result.openMs.toFixed(0)} ms, fresh ${mb(freshRss)} MB, idle ${mb(result.idleRss)} MB, ` +
          `peak (VmHWM) ${mb(result.peakRss)} MB, sampled peak ${mb(result.sampledPeakRss)} MB${result.failed ? `, failed ${result.failed}: ${result.firstError}` : ''}`,
      );
    } catch (err) {
      rows.push({
        target: id,
        label: target?.label ?? TARGET_LABELS[id],
        processes: target?.processes.length ?? 0,
        error: (err as Error).message,
      });
      log(`  rss ${id}: ${(err as Error).message}`);
    } finally {
      if (target) await launcher.shutdown(target);
    }
  }
  return rows;
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

/**
 * Profiles a fresh memory-backend gateway (`node --cpu-prof`) under `connections` connections for
 * `seconds` after a 1 s warm-up, stops it so the profile is written, and summarises where its CPU
 * went during the measured load only.
 */
export async function runProfile(
  launcher: TargetLauncher,
  workDir: string,
  gatewayMain: string,
  connections: number,
  seconds: number,
): Promise<ProfileSummary> {
  const dir = path.join(workDir, 'cpu-profile');
  const launchedAt = performance.now();
  const target = await launcher.launch('memory', {
    tag: ' (profile)',
    nodeArgs: ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', '250'],
  });
  let skipFirstMs = 0;
  try {
    await runLoad({ urls: target.urls, headers: target.headers, body: CHAT_BODY, connections, durationS: 1 });
    // The profile starts with the process: leave out start-up and the warm-up second.
    skipFirstMs = performance.now() - launchedAt;
    await runLoad({ urls: target.urls, headers: target.headers, body: CHAT_BODY, connections, durationS: seconds });
  } finally {
    await launcher.shutdown(target);
  }
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no .cpuprofile written in ${dir}`);
  const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as CpuProfile;
  const gatewayDir = path.dirname(gatewayMain);
  return summarizeProfile(profile, (url) => url.includes(gatewayDir), { skipFirstMs });
}

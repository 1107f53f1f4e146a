import { Agent } from 'undici';
import type { BenchTarget, TargetId } from './bench-targets';
import { fmtSpread, table } from './markdown';
import {
  relayRound,
  relayRows,
  type RelayOptions,
  type RelayRound,
  type RelayRow,
  type RelayStream,
} from './relay-judging';
import type { Log } from './scenarios';
import { streamRequest } from './scenarios';
import { probeStream } from './stream-probe';

/** Targets of the relay scenario: direct shows the upstream's own gaps; the others are judged against the floor. */
export const RELAY_TARGETS: readonly TargetId[] = ['direct', 'node-floor', 'memory', 'bullmq-1', 'portkey'];

/**
 * The streaming relay cost scenario: per round and target (interleaved, order rotated), `streams`
 * streams of `chunks` chunks `gapMs` apart are opened at once and read to their end; the CPU the
 * target's processes used over that window (`/proc/<pid>/stat`) is divided by the chunks the client
 * received, and the client's chunk gaps and TTFB are kept. Targets without processes (direct)
 * show what the upstream sent.
 */
export async function runRelay(targets: BenchTarget[], opts: RelayOptions, log: Log): Promise<RelayRow[]> {
  const measured = targets.filter((t) => RELAY_TARGETS.includes(t.id));
  const stream = streamRequest(opts.chunks, opts.gapMs);
  const rounds = new Map<TargetId, RelayRound[]>(measured.map((t) => [t.id, []]));
  const labels = Object.fromEntries(measured.map((t) => [t.id, t.label]));
  for (let round = 0; round < opts.rounds; round++) {
    const k = round % Math.max(1, measured.length);
    for (const target of [...measured.slice(k), ...measured.slice(0, k)]) {
      const agent = new Agent({ connections: opts.streams, keepAliveTimeout: 30_000 });
      const streams: RelayStream[] = [];
      let failures = 0;
      let firstError: string | undefined;
      const cpu = () => target.processes.reduce((sum, p) => sum + p.cpuMs(), 0);
      const cpuBefore = target.processes.length ? cpu() : NaN;
      const startedAt = performance.now();
      await Promise.all(
        Array.from({ length: opts.streams }, (_, i) =>
          probeStream({
            url: target.urls[i % target.urls.length],
            headers: { ...target.headers, ...stream.headers },
            body: stream.body,
            dispatcher: agent,
          }).then(
            (s) => void streams.push(s),
            (err: unknown) => {
              failures++;
              firstError ??= (err as Error).message;
            },
          ),
        ),
      );
      const seconds = (performance.now() - startedAt) / 1000;
      const cpuMs = target.processes.length ? cpu() - cpuBefore : NaN;
      await agent.close();
      const r = relayRound(streams, failures, cpuMs, seconds, firstError);
      rounds.get(target.id)?.push(r);
      log(
        `  relay round ${round + 1}/${opts.rounds} ${target.id.padEnd(11)} ${r.chunks} chunks in ${seconds.toFixed(1)} s, ` +
          `CPU ${r.cpuMsPer1000Chunks.toFixed(1)} ms/1000 chunks, gap p50 ${r.gapP50Ms.toFixed(2)} p99 ${r.gapP99Ms.toFixed(2)} ms, ` +
          `ttfb ${r.ttfbMs.toFixed(2)} ms${failures ? `, failures ${failures}: ${firstError}` : ''}`,
      );
    }
  }
  return relayRows(rounds, labels);
}

/** The report's relay table. */
export function relayTable(rows: RelayRow[]): string {
  return table(
    [
      'target',
      'CPU ms per 1,000 chunks',
      '× floor',
      'gap p99 ms',
      'gap p99 − floor, ms',
      'TTFB ms',
      'TTFB − floor, ms',
      'failed',
    ],
    rows.map((r) => [
      r.label,
      fmtSpread(r.cpuMsPer1000Chunks, 1),
      r.target === 'node-floor' ? '(floor)' : fmtSpread(r.cpuVsFloor, 2),
      fmtSpread(r.gapP99Ms, 2),
      r.target === 'node-floor' ? '(floor)' : fmtSpread(r.gapP99OverFloorMs, 2, true),
      fmtSpread(r.ttfbMs, 2),
      r.target === 'node-floor' ? '(floor)' : fmtSpread(r.ttfbOverFloorMs, 2, true),
      String(r.failures),
    ]),
  );
}

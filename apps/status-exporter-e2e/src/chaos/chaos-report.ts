import type { ChaosOptions } from './chaos-options';

/** What one chaos run measured; see {@link ChaosOptions} for what must hold. */
export interface ChaosReport {
  options: Omit<ChaosOptions, 'log'>;
  requests: number;
  /** Requests per outcome: `ok`, `error <status> <code>`, `client_aborted`, `lost_with_killed_replica`. */
  outcomes: Record<string, number>;
  /** Requests per kind (`chat`, `chat stream`, `responses`, …). */
  kinds: Record<string, number>;
  kills: number;
  /** ms from spawning a replacement replica to its "listening" line. */
  replicaStartMs: number[];
  redisRestart:
    | {
        downMs: number;
        pooledRecoveryMs: number;
        exporterRecoveryMs: number;
        /** Epoch ms when Redis was killed and when it was up again. */
        downAt: number;
        upAt: number;
      }
    | undefined;
  /** Per provider: the upstream's highest concurrency against the limit. */
  concurrency: Record<string, { max: number; limit: number }>;
  /** What was left in Redis after the load drained (and how long draining took). */
  leftAfterDrain: { inFlight: number; queued: number; jobKeys: number; drainMs: number };
  violations: string[];
  /** Kills, the Redis restart and any moment over a limit, in ms from the start. */
  events?: string[];
  /**
   * Per provider: the most calls at once as the fake upstream itself counts them (a call ends there
   * once its socket is closed, one loop turn after the meter sees the close). Over the limit is a
   * breach too: a call the gateway cut keeps its slot until the upstream has seen the close.
   */
  fakeUpstreamMax: Record<string, number>;
  /** Per replica (its URL): its warn and error log lines, the last 40 of each, to explain any breach. */
  replicaWarnings: Record<string, string[]>;
}

/** The warn (40) and error (50+) lines of a replica's pino output, the last 40. */
export function warnLines(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => /"level":(4|5|6)\d/.test(line))
    .slice(-40);
}

/** Grace after Redis is back during which a fenced lease is the restart's doing, in ms. */
const RESTART_FENCE_GRACE_MS = 10_000;

/**
 * The fence lines of a replica's pino output (a lease aborted because it could not be renewed) that
 * fall outside the Redis restart: a busy event loop (a costly request body, too many processes)
 * fenced another user's call, which must not happen (README "Security").
 */
export function fencesOutsideRestart(output: string, restart: ChaosReport['redisRestart']): string[] {
  return output.split('\n').filter((line) => {
    if (!line.includes('aborting its upstream call')) return false;
    const at = Number(/"time":(\d+)/.exec(line)?.[1] ?? 0);
    return restart === undefined || at < restart.downAt || at > restart.upAt + RESTART_FENCE_GRACE_MS;
  });
}

/** The report as a few readable lines. */
export function formatChaosReport(r: ChaosReport): string {
  const lines = [
    `chaos: ${r.requests} requests in ${r.options.seconds} s, ${r.options.clients} clients, seed ${r.options.seed}`,
    `  outcomes: ${Object.entries(r.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ')}`,
    `  kinds: ${Object.entries(r.kinds)
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ')}`,
    `  replicas SIGKILLed: ${r.kills}; replacement start ms: ${r.replicaStartMs.join(', ') || '—'}`,
    `  Redis restart: ${r.redisRestart ? `down ${r.redisRestart.downMs} ms; pooled requests back after ${r.redisRestart.pooledRecoveryMs} ms, exporter counts after ${r.redisRestart.exporterRecoveryMs} ms` : 'not done'}`,
    `  upstream concurrency, metered (max / limit): ${Object.entries(r.concurrency)
      .map(([id, c]) => `${id} ${c.max}/${c.limit}`)
      .join(', ')}; the fake upstream's own max: ${Object.entries(r.fakeUpstreamMax)
      .map(([id, m]) => `${id} ${m}`)
      .join(', ')}`,
    `  replicas' warn lines: ${Object.values(r.replicaWarnings).reduce((n, l) => n + l.length, 0)} (in report.json)`,
    `  left after drain (${r.leftAfterDrain.drainMs} ms): in_flight ${r.leftAfterDrain.inFlight}, queued ${r.leftAfterDrain.queued}, job keys ${r.leftAfterDrain.jobKeys}`,
    `  events: ${(r.events ?? []).join('; ')}`,
    `  violations: ${r.violations.length === 0 ? 'none' : `\n    ${r.violations.slice(0, 20).join('\n    ')}`}`,
  ];
  return lines.join('\n');
}

import type { HealthSettings } from '@iop/validate';

/** The health settings a probe's freshness is judged by (README "Provider health"). */
export type ProbeTiming = Pick<HealthSettings, 'interval_ms' | 'timeout_ms'>;

/**
 * The latest probe this gateway process ran on each pool provider, as it came out: passed (a 2xx)
 * or not (an error status, a refused connection, a timeout, busy or not: the health store's rule
 * may ignore a busy provider's late probe, this clock does not). Read to weigh a non-streamed
 * request's first-byte timeout (`weighFirstByteTimeout`, README "Provider health": a provider whose
 * probe passes accepts connections and answers, so a long answer's timeout is the request's own
 * length). In-process: each replica judges by the probes it ran itself; every replica probes every
 * provider. One entry per provider id, never more. Times are `performance.now()` ms.
 */
export class ProbeClock {
  private readonly last = new Map<string, { ok: boolean; at: number }>();

  /** Notes that `providerId`'s probe just passed (`ok`) or failed. */
  note(providerId: string, ok: boolean, at: number = performance.now()): void {
    this.last.set(providerId, { ok, at });
  }

  /**
   * Whether `providerId`'s probe passes at `now`: its latest probe passed, and it is fresh, at most
   * two probe rounds old ({@link probeFreshMs}); a stale pass (the prober stopped, the provider was
   * not probed lately) or none at all is no evidence.
   */
  passing(providerId: string, timing: ProbeTiming, now: number = performance.now()): boolean {
    const last = this.last.get(providerId);
    return last !== undefined && last.ok && now - last.at <= probeFreshMs(timing);
  }
}

/**
 * How long a probe's result stands, in ms: two probe rounds, a round being at most `interval_ms`
 * between rounds plus three `timeout_ms` (the queue's count of requests in flight before the probe,
 * the probe, the count again after a timeout; `ProviderProber.probeOnce`). Within it, a provider whose
 * probe passed has not missed one since.
 */
export function probeFreshMs(timing: ProbeTiming): number {
  return 2 * (timing.interval_ms + 3 * timing.timeout_ms);
}

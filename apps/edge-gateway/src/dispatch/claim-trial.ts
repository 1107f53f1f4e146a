import type { HealthStore, PoolCandidate } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';

/** The candidates a pooled request may go to, and the half-open provider whose trial it holds, if any. */
export interface TrialPick {
  candidates: PoolCandidate[];
  /** Tried first and alone (README "Provider health"); a failover then goes to the other candidates. */
  trial?: PoolCandidate;
}

/**
 * A half-open provider gets one trial request (README "Provider health"): this one, if it claims the
 * trial of a due candidate first. The claim is held for `request_timeout_ms + max_wait_ms`, the
 * longest the request can take to its first byte. Every other due provider leaves the candidates,
 * so only its trial reaches it.
 * @param due the half-open providers whose trial nobody holds ({@link resolveCandidates}).
 */
export async function claimTrial(
  health: HealthStore | undefined,
  config: EdgeConfig,
  candidates: PoolCandidate[],
  due: ReadonlySet<string>,
): Promise<TrialPick> {
  const holdMs = config.gateway.request_timeout_ms + config.queue.max_wait_ms;
  let trial: PoolCandidate | undefined;
  for (const c of candidates) {
    if (!due.has(c.providerId)) continue;
    if (await health?.claimTrial(c.providerId, holdMs)) {
      trial = c;
      break;
    }
  }
  return { candidates: candidates.filter((c) => c === trial || !due.has(c.providerId)), trial };
}

import type { HealthStore, PoolCandidate } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';
import { randomUUID } from 'node:crypto';

/** The candidates a pooled request may go to, and the half-open provider whose trial it holds, if any. */
export interface TrialPick {
  candidates: PoolCandidate[];
  /** Tried first and alone (README "Provider health"); a failover then goes to the other candidates. */
  trial?: PoolCandidate;
  /** The id the trial is held under, to give it back (`HealthStore.releaseTrial`); set with `trial`. */
  claim?: string;
}

/**
 * A half-open provider gets one trial request (README "Provider health"): this one, if it claims the
 * trial of a due candidate first. The claim is held for `request_timeout_ms + max_wait_ms`, the
 * longest the request can take to its first byte. Every other due provider leaves the candidates,
 * so only its trial reaches it. A trial whose request ends without evidence about the provider is
 * given back at once by its claim id ({@link releaseUnsettledTrial}).
 * @param due the half-open providers whose trial nobody holds ({@link resolveCandidates}).
 */
export async function claimTrial(
  health: HealthStore | undefined,
  config: EdgeConfig,
  candidates: PoolCandidate[],
  due: ReadonlySet<string>,
): Promise<TrialPick> {
  const holdMs = config.gateway.request_timeout_ms + config.queue.max_wait_ms;
  const claim = randomUUID();
  let trial: PoolCandidate | undefined;
  for (const c of candidates) {
    if (!due.has(c.providerId)) continue;
    if (await health?.claimTrial(c.providerId, holdMs, claim)) {
      trial = c;
      break;
    }
  }
  return {
    candidates: candidates.filter((c) => c === trial || !due.has(c.providerId)),
    ...(trial ? { trial, claim } : {}),
  };
}

/**
 * Gives back the trial `pick` holds when its request ended without evidence about the provider
 * (README "Provider health"): nothing was booked for it because the attempt ended on the client's
 * own error (a 400 of the gateway's translation or field mapping), the client leaving, a refusal
 * of the queue, or a failure of the gateway's before the upstream answered. The next request may
 * take the trial at once instead of after its hold (`request_timeout_ms + max_wait_ms`). Awaited
 * before the request's answer is written, so the next request finds the trial free. Never throws.
 * @param settled true when the attempt booked an event for the trial (its first byte, a failure
 *   counted against the provider, a 429's back-off): the booking ended the trial.
 */
export async function releaseUnsettledTrial(
  health: HealthStore | undefined,
  pick: TrialPick,
  settled: boolean,
): Promise<void> {
  if (settled || !pick.trial || !pick.claim) return;
  await health?.releaseTrial(pick.trial.providerId, pick.claim);
}

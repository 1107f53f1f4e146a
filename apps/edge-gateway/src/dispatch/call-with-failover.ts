import { estimateTokenWeight, type PoolCandidate, type Route } from '@iop/dispatch';
import { closeUnfinishedAnswer } from '../adapters/upstream-answers';
import { failsOver, FirstByteTimeout, toClientError, UpstreamError } from '../errors';
import { setRateLimitHeaders } from '../http/answer/rate-limit-headers';
import { acquireLease, isBudgeted } from './acquire-lease';
import type { AttemptSignals } from './attempt-signals';
import { AttemptTokens } from './attempt-tokens';
import { bookOutcome } from './book-outcome';
import { callUpstream } from './call-upstream';
import { releaseAttempt } from './charge-attempt';
import { releaseUnsettledTrial, type TrialPick } from './claim-trial';
import type { CompletionRequest } from './completion-request';
import type { DispatchBody } from './dispatcher-deps';
import { fenceLease } from './fence-lease';
import { weighFirstByteTimeout } from './health-event';
import { logStreamEnd, logUpstreamFailure } from './log-upstream';
import { poolUnavailable } from './pool-unavailable';

/** A route over a provider pool. */
export type PoolRoute = Extract<Route, { providerPool: true }>;

/** The candidates a pooled request may go to, the trial it holds, and the body each adapter type sends. */
export interface PoolPick extends TrialPick {
  bodies: ReadonlyMap<string, DispatchBody>;
}

/**
 * Serves a pooled request (README "Failover", "Provider health"). Each attempt: acquire a lease on
 * the offered candidates ({@link acquireLease}; the trial alone first, when the request holds one),
 * fence the call to it ({@link fenceLease}), call the granted provider ({@link callUpstream}), book
 * what the upstream did ({@link bookOutcome}), and release the lease on every path. An attempt that
 * fails before any byte reached the client, in a way that fails over (unreachable, reset, 5xx, 429,
 * no first byte in time), is followed by one more on the candidates left, minus the provider that
 * failed and any now out of health; the first lease is released before the second is asked for,
 * so a retry never holds two slots. Each attempt's lease is released with what that attempt used
 * ({@link releaseAttempt}: a budgeted client's budget is charged it), and a budgeted client's answer
 * carries its standing after the reservation (`x-ratelimit-*-tokens`). A trial whose attempt booked nothing (the client's own error, the
 * client gone, the queue's refusal, a failure of the gateway's) is given back before the request
 * ends ({@link releaseUnsettledTrial}).
 * @throws ApiError 503 `no_available_provider` (or 429 when every provider backs off) when no
 *   candidate is left; the queue's refusal; the upstream's failure as the client may see it
 *   (`toClientError`); any other error as it was raised.
 */
export function callWithFailover(
  req: CompletionRequest,
  route: PoolRoute,
  pick: PoolPick,
  attempts: AttemptSignals,
): Promise<void> {
  // No trial held, none to give back: no promise layer around the attempts.
  return pick.trial
    ? attemptsOfTrial(req, route, pick, attempts)
    : attemptWithFailover(req, route, pick, attempts, { settled: false });
}

/** {@link callWithFailover} for a request that holds a trial: gives it back unless its attempt booked it. */
async function attemptsOfTrial(
  req: CompletionRequest,
  route: PoolRoute,
  pick: PoolPick,
  attempts: AttemptSignals,
): Promise<void> {
  // Whether the trial's attempt booked what the provider did (which ends the trial).
  const trialBooked = { settled: false };
  try {
    await attemptWithFailover(req, route, pick, attempts, trialBooked);
  } finally {
    await releaseUnsettledTrial(req.deps.health, pick, trialBooked.settled);
  }
}

/** The attempts of {@link callWithFailover}; sets `trialBooked.settled` once the trial's outcome is booked. */
async function attemptWithFailover(
  req: CompletionRequest,
  route: PoolRoute,
  pick: PoolPick,
  attempts: AttemptSignals,
  trialBooked: { settled: boolean },
): Promise<void> {
  const { deps, res, outcome, body, requestId } = req;
  const budgeted = isBudgeted(res.locals.client);
  let candidates: PoolCandidate[] = pick.candidates;
  // A non-streamed request's first byte is its whole answer (README "Provider health").
  const streamed = 'stream' in body && body.stream === true;
  for (let tries = 0; ; tries++) {
    const offered = tries === 0 && pick.trial ? [pick.trial] : candidates;
    if (offered.length === 0) throw poolUnavailable(deps.health, req.config, body.model);
    const attempt = attempts.current;
    const lease = await acquireLease(req, route, offered, attempt.signal);
    const candidate = offered.find((c) => c.providerId === lease?.providerId) ?? offered[0];
    const providerId = candidate.providerId;
    const unfence = fenceLease(lease, attempt);
    // Only a budgeted client's attempt is metered: nothing else reads it (README "Token budgets: what a client sees").
    const meter = budgeted ? new AttemptTokens(req.endpoint) : undefined;
    let startedAt = performance.now();
    try {
      if (lease) {
        outcome.queueWaitMs = lease.queueWaitMs;
        res.setHeader('x-iop-queue-wait-ms', String(lease.queueWaitMs));
        if (lease.budget) setRateLimitHeaders(res, lease.budget);
      }
      const trial = candidate === pick.trial;
      const sent = pick.bodies.get(candidate.adapter.type) ?? body;
      startedAt = performance.now();
      const result = await callUpstream(
        req,
        sent,
        {
          nodeId: candidate.nodeId,
          resourceId: providerId,
          adapter: candidate.adapter,
          upstreamModel: candidate.upstreamModel,
        },
        attempt,
        () => {
          // Prefill is done: the prompt part of the request's token weight goes back (docs/architecture.md, "Token limits").
          void lease?.prefillDone();
          deps.firstBytes?.mark(providerId);
          // A trial's first byte is booked (a success), so the trial is over.
          if (trial && deps.health) trialBooked.settled = true;
          void bookOutcome(deps.health, providerId, { at: 'first_byte', trial });
        },
        meter,
      );
      logStreamEnd(req, providerId, result);
      void bookOutcome(deps.health, providerId, { at: 'ended', trial, result });
      return;
    } catch (thrown) {
      if (!(thrown instanceof UpstreamError)) throw thrown;
      // A first-byte timeout is the provider's failure only when the request cannot explain it.
      const err =
        thrown instanceof FirstByteTimeout
          ? weighFirstByteTimeout(thrown, {
              attemptStartedAt: startedAt,
              streamed,
              lastFirstByteAt: deps.firstBytes?.lastFirstByte(providerId),
              probePasses: deps.probes?.passing(providerId, req.config.health) ?? false,
              size: requestSize(req),
            })
          : thrown;
      const booked = await bookOutcome(deps.health, providerId, { at: 'failed', error: err });
      if (candidate === pick.trial && booked) trialBooked.settled = true;
      const retry = failsOver(err) && tries === 0 && !res.headersSent && !attempts.clientGone;
      logUpstreamFailure(
        req,
        providerId,
        err,
        retry
          ? 'upstream failed before the first byte; retrying on another provider'
          : err.countsAgainstProvider || !(err instanceof FirstByteTimeout)
            ? 'upstream failed'
            : streamed
              ? 'no first byte in time while the provider answered other requests: the request is too long for gateway.request_timeout_ms; not booked against the provider, not retried'
              : 'no answer in time to a non-streamed request while the provider answers (its probe passes, or it answered other requests): the answer is too long for gateway.request_timeout_ms (ask with stream: true); not booked against the provider, not retried',
      );
      if (!retry) throw toClientError(err, requestId);
      outcome.failedOver = [...(outcome.failedOver ?? []), providerId];
      const excluded = deps.health?.unhealthy();
      candidates = candidates.filter((c) => c.providerId !== providerId && !excluded?.has(c.providerId));
      if (candidates.length === 0) throw toClientError(err, requestId);
      attempts.next();
    } finally {
      unfence();
      // A call the gateway cut (client gone, timeout, fence, drain, a cap, an answer it stopped reading)
      // keeps its slot until the upstream has closed its side: it has seen the close before the next
      // caller's request can reach it (`half-close.ts`).
      const closed = closeUnfinishedAnswer(attempt.signal);
      if (lease) await closed;
      await releaseAttempt(req, lease, meter, attempt.signal.aborted);
    }
  }
}

/** The request's prompt tokens and completion allowance (`estimateTokenWeight`), made once. */
function requestSize(req: CompletionRequest): { prompt: number; completion: number | undefined } {
  req.tokenWeight ??= estimateTokenWeight(req.endpoint, req.body);
  return { prompt: req.tokenWeight.prompt, completion: req.tokenWeight.completion };
}

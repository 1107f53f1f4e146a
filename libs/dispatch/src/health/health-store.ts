import type { HealthTransition } from './health-record';
import type { HealthView } from './health-view';

/**
 * How a failed probe failed, for the rule that weighs it (README "Provider health"): `timedOut`, no
 * answer within `health.timeout_ms`; `busy`, the provider had requests in flight meanwhile (fleet-wide
 * where the queue is shared). A probe that timed out while busy is no evidence on its own.
 */
export interface ProbeDetail {
  timedOut: boolean;
  busy: boolean;
}

/** A transition as the store reports it, once, by the writer that made it. */
export type HealthTransitionListener = (providerId: string, transition: HealthTransition) => void;

/**
 * Where providers' health lives: in-process (`MemoryHealthStore`) or shared by every replica through
 * Redis (`RedisHealthStore`), so replicas agree. Reads are synchronous and cached so the request
 * path never waits on I/O; `refresh()` reloads the cache. Writes never throw (a store outage is
 * reported, not raised).
 * Stores hold no connection or timer of their own (the Redis store borrows one), so there is nothing to close.
 */
export interface HealthStore {
  /**
   * Records one probe result (`reason`: why it failed; `detail`: how, {@link ProbeDetail}), with this
   * replica's latest request success on the provider, so every replica learns of it (`lastOkAt`).
   */
  record(providerId: string, ok: boolean, reason?: string, detail?: ProbeDetail): Promise<void>;
  /**
   * Records one request's result on real traffic: a success, or what the upstream did. A success on
   * a provider with nothing to reset writes nothing: the store notes its time in process, for the next probe's record.
   */
  recordRequest(providerId: string, ok: boolean, reason?: string): Promise<void>;
  /** Backs a provider off for `seconds` (an upstream 429). */
  backOff(providerId: string, seconds: number, reason: string): Promise<void>;
  /**
   * Claims the trial request of a half-open provider for `holdMs` (ms), under `claim` (an id unique
   * to the request, for {@link releaseTrial}); true for the one caller that got it.
   */
  claimTrial(providerId: string, holdMs: number, claim?: string): Promise<boolean>;
  /**
   * Gives back the trial held under `claim` at once (README "Provider health"): its request ended
   * without evidence about the provider, so the next request may take the trial. A no-op when that
   * trial is over (booked, expired) or another claim holds it.
   */
  releaseTrial(providerId: string, claim: string): Promise<void>;
  /** Ids of the providers that are not candidates now: unhealthy, half-open, on trial, backing off (cached). */
  unhealthy(): ReadonlySet<string>;
  /** Ids of the half-open providers whose trial nobody holds (cached): a request may claim one. */
  trialsDue(): ReadonlySet<string>;
  /** Every provider with a record, as `/status` shows it (cached). */
  views(): ReadonlyMap<string, HealthView>;
  /** Reloads the cache from the store, keeping only `providerIds`. Never throws. */
  refresh(providerIds: readonly string[]): Promise<void>;
  /**
   * Now, in epoch ms, on the clock the records' times are on (`since`, `retryAt`): this process's for
   * the memory store, Redis's for the shared one (docs/architecture.md, "Provider health"), so every
   * replica compares a back-off's end with the same clock.
   */
  now(): number;
}

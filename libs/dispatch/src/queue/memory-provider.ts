import { setMaxListeners } from 'node:events';
import type { MemoryPool } from './memory-pool';
import type { QueueProvider } from './provider-queue';
import { fitsTokens, heldTokens, type HeldTokens, type TokenWeight } from './token-limit';

/** One provider of the memory backend: its limits, its pool, its leases and the tokens they hold. */
export interface ProviderState {
  limits: QueueProvider;
  pool: MemoryPool;
  inFlight: number;
  /** Tokens its leases hold (docs/architecture.md, "Token limits"); counted only under `maxTokensInFlight`. */
  tokens: number;
  /** Left out of the last `configure`: takes no new requests, finishes the leases it holds. */
  removed: boolean;
}

/**
 * True when a new request may take a slot of `state` at once: a free slot, and under a token limit
 * no waiter in line for the provider (a waiter that does not fit yet is never passed) and a weight
 * that fits (docs/architecture.md, "Token limits").
 */
export function canTake(state: ProviderState, tokens: TokenWeight | undefined): boolean {
  const { maxConcurrency, maxTokensInFlight, providerId } = state.limits;
  if (state.inFlight >= maxConcurrency) return false;
  if (maxTokensInFlight === undefined) return true;
  return !state.pool.hasWaiterFor(providerId) && fits(state, tokens);
}

/**
 * The provider a new request takes a slot of at once, if any: `best` when it has a free slot and
 * the request fits its token limit; when only the token limit stops it, the least-loaded other
 * candidate that can take it. A provider with a token limit grants none at once while a waiter that
 * lists it is in line, so a waiter that does not fit yet is never passed by newcomers
 * (docs/architecture.md, "Token limits").
 */
export function takerAtOnce(
  best: ProviderState,
  usable: readonly QueueProvider[],
  tokens: TokenWeight | undefined,
  providers: ReadonlyMap<string, ProviderState>,
): ProviderState | undefined {
  if (best.inFlight >= best.limits.maxConcurrency) return undefined;
  if (canTake(best, tokens)) return best;
  const others: ProviderState[] = [];
  for (const p of usable) {
    const state = providers.get(p.providerId);
    if (state && state !== best) others.push(state);
  }
  const load = (s: ProviderState) => (s.inFlight + s.pool.queuedOn(s.limits.providerId)) / s.limits.maxConcurrency;
  return others.sort((a, b) => load(a) - load(b)).find((s) => canTake(s, tokens));
}

/** True when a request of weight `tokens` fits the provider's token limit now (always without one, or without a weight). */
export function fits(state: ProviderState, tokens: TokenWeight | undefined): boolean {
  if (state.limits.maxTokensInFlight === undefined || !tokens) return true;
  const held = heldTokens(tokens, state.limits);
  return fitsTokens(state.tokens, held.prompt + held.completion, state.limits.maxTokensInFlight);
}

/** Takes a slot of `state` and, under a token limit, the request's tokens; returns the tokens held. */
export function takeSlot(state: ProviderState, tokens: TokenWeight | undefined): HeldTokens {
  state.inFlight++;
  if (state.limits.maxTokensInFlight === undefined) return { prompt: 0, completion: 0 };
  const held = heldTokens(tokens, state.limits);
  state.tokens += held.prompt + held.completion;
  return held;
}

/**
 * One process holds its leases for sure: nothing can take them away, so this never aborts. Every
 * lease shares it and each request's fencing listener comes off at release, so more than Node's
 * default of 10 listeners at once is normal here, not a leak.
 */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;
setMaxListeners(0, NEVER_ABORTED);

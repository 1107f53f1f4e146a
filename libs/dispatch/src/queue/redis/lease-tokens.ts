import type { LeaseRequest } from '../provider-queue';
import { heldTokens, type HeldTokens, type TokenWeight } from '../token-limit';
import type { ProviderSlots } from './provider-slots';

/**
 * The token weight a request's job is admitted with (docs/architecture.md, "Token limits"): its own
 * when one of its configured candidates has a token limit, else none, so that a pool without token
 * limits sends no weight and runs no token command.
 */
export function weightOf(request: LeaseRequest, slots: ProviderSlots): TokenWeight | undefined {
  const { tokens, candidates } = request;
  if (!tokens) return undefined;
  return slots.usable(candidates.map((c) => c.providerId)).some((s) => s.tokened) ? tokens : undefined;
}

/**
 * What a lease of `request` granted on `providerId` holds of that provider's token limit (`held`,
 * none without a limit), and whether its job had a weight (`weighted`: its release reads the tokens
 * Redis says it holds).
 */
export function tokensOn(
  request: LeaseRequest,
  slots: ProviderSlots,
  providerId: string,
): { held?: HeldTokens; weighted: boolean } {
  const weight = weightOf(request, slots);
  const slot = slots.usable([providerId])[0];
  if (!weight || !slot?.tokened) return { weighted: weight !== undefined };
  return { held: heldTokens(weight, slot.limits), weighted: true };
}

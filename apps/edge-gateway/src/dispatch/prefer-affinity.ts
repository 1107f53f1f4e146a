import type { PoolCandidate, ResponseAffinity } from '@iop/dispatch';
import type { CompletionEndpoint, DispatchBody } from './dispatcher-deps';

/**
 * A `/v1/responses` follow-up goes to the provider that produced its `previous_response_id`
 * (README "Affinity"), while that provider is still a candidate; otherwise, and for every other
 * request, the candidates stay as they are. The other side is {@link rememberResponseId}.
 */
export async function preferAffinity(
  affinity: ResponseAffinity,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  candidates: PoolCandidate[],
): Promise<PoolCandidate[]> {
  const previous = endpoint === 'responses' ? body.previous_response_id : undefined;
  if (typeof previous !== 'string' || previous === '') return candidates;
  const providerId = await affinity.get(previous);
  const preferred = candidates.find((c) => c.providerId === providerId);
  return preferred ? [preferred] : candidates;
}

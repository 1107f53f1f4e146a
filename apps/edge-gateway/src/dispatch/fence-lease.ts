import type { Lease } from '@iop/dispatch';
import { admissionToApiError } from '../http/answer/admission-errors';

const NO_FENCE = () => undefined;

/**
 * Fencing (docs/architecture.md, "Fencing"): a lease the queue can no longer prove stops the call at
 * once: its `signal` aborts `attempt` with the queue's reason, so the client gets a 503 before the
 * first byte or the stream's error event after it.
 * @returns removes the fence; call it when the attempt is over, before the lease is released.
 */
export function fenceLease(lease: Lease | undefined, attempt: AbortController): () => void {
  if (!lease) return NO_FENCE;
  const onLeaseLost = () => attempt.abort(admissionToApiError(lease.signal.reason));
  lease.signal.addEventListener('abort', onLeaseLost, { once: true });
  return () => lease.signal.removeEventListener('abort', onLeaseLost);
}

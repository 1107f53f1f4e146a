import { ApiError } from '../errors';

/**
 * Requests of each client waiting for a lease on this replica, across every pool (README "Clients,
 * priority and fair share"): a waiting request holds a client connection of this replica, so one
 * client may have at most half of `gateway.max_connections` waiting here, whatever its `max_queued`
 * per pool says; the other half (other clients, `/healthz`) is never taken by one client's waiters.
 * In-process on purpose: connections are a replica's own.
 */
export class ReplicaWaiting {
  private readonly waiting = new Map<string, number>();

  /**
   * Takes a waiting place for `clientId` on this replica.
   * @param maxConnections `gateway.max_connections`: the limit is ⌈maxConnections / 2⌉ requests
   * @returns the function that gives the place back (call it once, when the wait ends however it ends)
   * @throws ApiError 429 `queue_full` (`replica_queued`) when the client already has the limit waiting here
   */
  enter(clientId: string, model: string, maxConnections: number): () => void {
    const limit = Math.ceil(maxConnections / 2);
    const now = this.waiting.get(clientId) ?? 0;
    if (now >= limit)
      throw new ApiError({ code: 'queue_full', fields: { model, why: 'replica_queued', client: clientId, limit } });
    this.waiting.set(clientId, now + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const n = (this.waiting.get(clientId) ?? 1) - 1;
      if (n > 0) this.waiting.set(clientId, n);
      else this.waiting.delete(clientId);
    };
  }
}

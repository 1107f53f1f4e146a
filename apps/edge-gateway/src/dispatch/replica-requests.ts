import { ApiError } from '../errors';

/**
 * Pooled requests of each client on this replica, waiting for a lease or running, across every pool
 * (README "Clients, priority and fair share"): each holds a client connection of this replica, so one
 * client may have at most half of `gateway.max_connections` pooled requests here, whatever its
 * `max_queued` per pool and the pools' slots allow; the other half (other clients, `/healthz`) is
 * never taken by one client. In-process on purpose: connections are a replica's own.
 */
export class ReplicaRequests {
  private readonly requests = new Map<string, number>();

  /**
   * Takes a place for one pooled request of `clientId` on this replica, held until the request ends.
   * @param maxConnections `gateway.max_connections`: the limit is ⌈maxConnections / 2⌉ requests
   * @returns the function that gives the place back (call it once, when the wait ends however it ends)
   * @throws ApiError 429 `queue_full` (`replica_queued`) when the client already has the limit here
   */
  enter(clientId: string, model: string, maxConnections: number): () => void {
    const limit = Math.ceil(maxConnections / 2);
    const now = this.requests.get(clientId) ?? 0;
    if (now >= limit)
      throw new ApiError({ code: 'queue_full', fields: { model, why: 'replica_queued', client: clientId, limit } });
    this.requests.set(clientId, now + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const n = (this.requests.get(clientId) ?? 1) - 1;
      if (n > 0) this.requests.set(clientId, n);
      else this.requests.delete(clientId);
    };
  }
}

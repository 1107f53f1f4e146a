/** The lease scripts' answers as `LeaseStore` decodes them (docs/architecture.md, "Lease protocol"). */

/**
 * What one admission script decided: granted at once, queued (or parked at the client's cap) on a
 * provider, refused because every candidate's queue is full (`queued`: their waiting jobs) or the
 * client's `max_queued` is reached (`queued`: its waiting jobs in the pool), or a candidate has no
 * limits in Redis.
 */
export type AdmitResult =
  | { kind: 'granted'; providerId: string }
  | { kind: 'queued'; providerId: string }
  | { kind: 'full'; queued: number }
  | { kind: 'client_full'; queued: number }
  | { kind: 'unconfigured'; providerId: string };

/**
 * What a waiter's job became: granted (on which provider), still waiting, evicted for a higher band
 * (`shed`: docs/architecture.md, "Clients, priority and fair share"), or gone with Redis state.
 */
export type WaiterState =
  { kind: 'granted'; providerId: string } | { kind: 'waiting' } | { kind: 'shed' } | { kind: 'gone' };

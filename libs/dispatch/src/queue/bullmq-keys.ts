/**
 * Redis key and channel layout of the BullMQ `ProviderQueue` backend (DESIGN §4 lease protocol),
 * all under one `prefix` (`queue.prefix`, default `iop-edge`). Readers such as the status
 * exporter and multi-process tests use this to find counts and leases without a replica.
 *
 * | key / channel | type | meaning |
 * |---|---|---|
 * | `<prefix>:provider.<id>:*` | BullMQ queue | one queue per provider; `active` = in_flight, `wait` + `prioritized` = queued, `meta.concurrency` = max_concurrency |
 * | `<prefix>:origin:<replica>` | string, PX originTtlMs | liveness of a replica that holds HTTP requests (origin) |
 * | `<prefix>:release:<jobId>` | string, PX | the origin released the lease of this job (polled by holders) |
 * | `<prefix>:barrier` | string, PX | set after a Redis restart: no new admission until running leases are re-registered |
 * | channel `<prefix>:grant:<replica>` | pub/sub | holder → origin: `{"jobId","providerId"}` the job is active (granted) |
 * | channel `<prefix>:release` | pub/sub | origin → holders: a jobId whose lease was released |
 * | channel `<prefix>:freed` | pub/sub | holder → all: a providerId that just freed a slot (work conservation) |
 */
export class BullmqKeys {
  constructor(readonly prefix: string) {}

  /** BullMQ queue name of a provider (BullMQ forbids `:` in names, so the id is URI-encoded). */
  queueName(providerId: string): string {
    return `provider.${encodeURIComponent(providerId)}`;
  }

  /** A BullMQ key of a provider queue: `active`, `wait`, `prioritized`, `meta`, or a job id. */
  queueKey(providerId: string, type: string): string {
    return `${this.prefix}:${this.queueName(providerId)}:${type}`;
  }

  /** The lock key of an active job: it exists exactly while a worker holds the job (the lease is granted). */
  lockKey(providerId: string, jobId: string): string {
    return `${this.queueKey(providerId, jobId)}:lock`;
  }

  originKey(replicaId: string): string {
    return `${this.prefix}:origin:${replicaId}`;
  }

  releaseKey(jobId: string): string {
    return `${this.prefix}:release:${jobId}`;
  }

  get barrierKey(): string {
    return `${this.prefix}:barrier`;
  }

  grantChannel(replicaId: string): string {
    return `${this.prefix}:grant:${replicaId}`;
  }

  get releaseChannel(): string {
    return `${this.prefix}:release`;
  }

  get freedChannel(): string {
    return `${this.prefix}:freed`;
  }
}

/** The data of a lease job in a provider queue (no request or response content ever goes to Redis). */
export interface LeaseJobData {
  /** Replica that holds the HTTP request and calls the upstream. */
  readonly origin: string;
  readonly providerId: string;
  /** Epoch ms after which a holder frees the slot whatever the origin says (`hardLeaseLimitMs` after the last possible grant). */
  readonly hardLimitAt: number;
}

/** Message on `grant:<replica>`. */
export interface GrantMessage {
  readonly jobId: string;
  readonly providerId: string;
}

import { LeaseKeys, type ProviderCounts, type RedisClient } from '@iop/dispatch';
import { Queue } from 'bullmq';

/** Where a provider's queue lives: its id and the shard tag of its keys (`leaseAddresses`, `@iop/dispatch`). */
export interface QueueAddress {
  readonly providerId: string;
  readonly shardTag: string;
}

/** One provider's BullMQ `Queue`, as the board lists it. */
export interface ProviderQueueEntry {
  readonly providerId: string;
  readonly queue: Queue;
}

interface Tracked extends ProviderQueueEntry {
  readonly shardTag: string;
  /** Set when BullMQ's start-up on the connection failed: that `Queue` never answers again and is rebuilt. */
  broken: boolean;
}

/**
 * The fleet's provider queues seen through BullMQ's own `Queue` (docs/architecture.md, "Lease
 * protocol", BullMQ compatibility; "Status model"): one `Queue` per tracked provider, named
 * `provider.<id>` under the BullMQ prefix `<queue.prefix>:{<tag>}` (`LeaseKeys`), all on the one
 * Redis connection they are given (a single Redis or a Redis Cluster; BullMQ shares a connection it
 * is handed and never closes it).
 *
 * Read-only by construction: every `Queue` is made with `skipMetasUpdate`, because BullMQ's `Queue`
 * constructor otherwise writes its `meta` hash (`HSET <queue>:meta version … opts.maxLenEvents …`)
 * as soon as the connection is ready. What the exporter calls on them only reads: `getJobCounts`
 * (BullMQ's `getCounts` script: `LLEN`/`ZCARD`; its `wait` branch pops a BullMQ 4 marker, a
 * `0:`-prefixed id, which the lease scripts never write: they keep `wait` empty and job ids are
 * `<replica uuid>.<n>`), and the read routes of the read-only board.
 */
export class ProviderQueues {
  private readonly keys: LeaseKeys;
  private tracked = new Map<string, Tracked>();

  /**
   * @param redis the exporter's one connection (`connectRedis`), shared by every `Queue`.
   * @param prefix `queue.prefix`, no trailing `:`.
   * @param onChange called with the new list whenever a `Queue` was added, moved, rebuilt or dropped.
   * @param onError a `Queue`'s `error` event: BullMQ repeats each connection error on every `Queue`, so
   *   log it quietly (the connection's own `error` listener reports outages).
   */
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly onChange: (entries: readonly ProviderQueueEntry[]) => void = () => undefined,
    private readonly onError: (err: Error) => void = () => undefined,
  ) {
    this.keys = new LeaseKeys(prefix);
  }

  /**
   * Makes the set of queues equal to `addresses` (config order): a `Queue` for each new provider, one
   * at its new tag for a provider that moved (a reload that joined two pools), a fresh one for a
   * `Queue` whose start-up failed; the others are closed. Calls `onChange` when anything changed.
   */
  sync(addresses: readonly QueueAddress[]): void {
    const before = [...this.tracked.values()];
    const next = new Map<string, Tracked>();
    for (const { providerId, shardTag } of addresses) {
      const kept = this.tracked.get(providerId);
      const usable = kept !== undefined && kept.shardTag === shardTag && !kept.broken;
      next.set(providerId, usable ? kept : this.open(providerId, shardTag));
    }
    for (const t of before) if (next.get(t.providerId) !== t) void t.queue.close().catch(() => undefined);
    // Config order, so the board lists providers as edge.yaml does.
    this.tracked = next;
    const after = [...next.values()];
    if (after.length !== before.length || after.some((t, i) => t !== before[i])) this.onChange(this.list());
  }

  /** The queues in force, in config order. */
  list(): ProviderQueueEntry[] {
    return [...this.tracked.values()].map(({ providerId, queue }) => ({ providerId, queue }));
  }

  /**
   * Live counts of `addresses` through BullMQ (`sync`s first): `inFlight` = `active`, `queued` =
   * `wait` + `prioritized` (BullMQ's job states; docs/architecture.md, "Lease protocol"). One
   * `getJobCounts` per provider, all sent at once.
   * @throws Error at once while the connection is not ready (counts unknown, never 0); else the first
   *   Redis or BullMQ error (the caller also bounds the wait with a timeout).
   */
  async counts(addresses: readonly QueueAddress[]): Promise<Map<string, ProviderCounts>> {
    this.sync(addresses);
    // A `Queue` whose start-up still waits for Redis would wait with it: unknown now is an error now.
    if (this.redis.status !== 'ready') throw new Error(`Redis connection is ${this.redis.status}`);
    // After `sync` the queues are exactly those of `addresses`, in their order.
    const counted = await Promise.all(
      [...this.tracked.values()].map(async ({ providerId, queue }) => {
        const c = await queue.getJobCounts('active', 'wait', 'prioritized');
        return [providerId, { inFlight: c.active, queued: c.wait + c.prioritized }] as const;
      }),
    );
    return new Map(counted);
  }

  /** Closes every `Queue` (the shared connection stays open: its owner closes it). */
  async close(): Promise<void> {
    const queues = [...this.tracked.values()].map((t) => t.queue);
    this.tracked.clear();
    await Promise.all(queues.map((q) => q.close().catch(() => undefined)));
  }

  private open(providerId: string, shardTag: string): Tracked {
    const queue = new Queue(this.keys.queueName(providerId), {
      connection: this.redis,
      prefix: this.keys.tagBase(shardTag),
      // The exporter never writes into the queues' keys: no `meta` hash (see the class comment).
      skipMetasUpdate: true,
    });
    const t: Tracked = { providerId, shardTag, queue, broken: false };
    queue.on('error', (err: Error) => this.onError(err));
    // BullMQ's start-up (INFO, script definitions) runs once per Queue; if it failed, this Queue is done.
    queue.waitUntilReady().catch(() => (t.broken = true));
    return t;
  }
}

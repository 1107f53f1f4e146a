import type { LuaScript, ScriptReply } from '../lua/script-loader';
import { LeaseKeys } from './lease-keys';
import { readClientCounts, readLeaseCounts } from './lease-counts';
import { clientArgs, renewedClient, type JobClient, type RenewedLease } from './job-client';
import type { AdmitResult, WaiterState } from './lease-replies';
import {
  DEFAULT_POOL,
  DEFAULT_QUEUE_CLIENT,
  type ClientCounts,
  type ProviderCounts,
  type QueueProvider,
} from './provider-queue';
import { masterNodes, type RedisClient } from './redis-connection';
import { LEASE_SCRIPTS } from './scripts/lease-scripts';

export { readClientCounts, readLeaseCounts } from './lease-counts';
export * from './job-client';
export * from './lease-replies';

/** A provider as the lease store addresses it: its id and the shard tag its keys live under. */
export interface StoredProvider {
  readonly providerId: string;
  readonly shardTag: string;
}

/**
 * Every Redis command of the Redis `ProviderQueue` backend goes through this class (docs/architecture.md,
 * "Lease protocol"): the Lua scripts of `scripts/` (`LEASE_SCRIPTS`), the one count reader, replica
 * liveness and the connection list. It holds no state of its own beyond the connection and the key layout.
 * Every method rejects with the Redis error (connection lost, command timeout) and never retries.
 */
export class LeaseStore {
  readonly keys: LeaseKeys;

  /**
   * @param client a connection with no offline queue (commands fail at once while Redis is down).
   * @param leaseTtlMs lifetime of a lease in Redis between renewals, in ms.
   */
  constructor(
    private readonly client: RedisClient,
    prefix: string,
    private readonly leaseTtlMs: number,
  ) {
    this.keys = new LeaseKeys(prefix);
  }

  /**
   * One admission decision for `candidates` (all of one shard tag) and the job's client: its place
   * in line, its caps, shedding (`scripts/admit.lua`; docs/architecture.md, "Clients, priority and
   * fair share"). `owner` defaults to the anonymous client of the default pool.
   */
  async admit(
    shardTag: string,
    candidateIds: readonly string[],
    jobId: string,
    data: string,
    owner: JobClient = { pool: DEFAULT_POOL, client: DEFAULT_QUEUE_CLIENT },
  ): Promise<AdmitResult> {
    const names = candidateIds.map((id) => this.keys.queueName(id));
    const { status, values } = await this.run(LEASE_SCRIPTS.admit, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      jobId,
      data,
      ...clientArgs(owner),
      String(names.length),
      ...names,
    ]);
    if (status === 'full' || status === 'client_full') return { kind: status, queued: Number(values[0]) };
    return { kind: status, providerId: this.keys.providerOf(values[0]) };
  }

  /**
   * Ends a lease and hands its slot on. Resolves true when the lease still existed. `held.solo`: the
   * lease was admitted for a solo client (`QueueClient.solo`), whose counts are not kept, so none is
   * read or ended; `held.confirmed`: the caller holds the lease (granted at once, or its grant
   * confirmed), so it has no unconfirmed-grant entry to delete. Without them any lease is ended.
   */
  async release(
    p: StoredProvider,
    jobId: string,
    held: { readonly solo?: boolean; readonly confirmed?: boolean } = {},
  ): Promise<boolean> {
    const { status } = await this.run(LEASE_SCRIPTS.release, p.shardTag, [
      this.keys.queueName(p.providerId),
      jobId,
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      held.solo ? '1' : '0',
      held.confirmed ? '1' : '0',
    ]);
    return status === 'released';
  }

  /** Takes a waiting job out of its queue; tells when it was granted (use or release that lease) or shed meanwhile. */
  async leave(p: StoredProvider, jobId: string): Promise<Exclude<WaiterState, { kind: 'waiting' }> | { kind: 'left' }> {
    const { status, values } = await this.run(LEASE_SCRIPTS.leave, p.shardTag, [
      this.keys.queueName(p.providerId),
      jobId,
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
    ]);
    if (status === 'granted') return { kind: status, providerId: this.keys.providerOf(values[0]) };
    return { kind: status };
  }

  /**
   * Renews leases of one shard tag (expiry = Redis time + lease TTL); `confirm` also accepts fresh
   * grants. Resolves the job ids Redis no longer had (lost: the holder must stop using them).
   */
  async renew(shardTag: string, leases: readonly RenewedLease[], confirm: boolean): Promise<string[]> {
    const args = leases.flatMap((l) => [this.keys.queueName(l.providerId), l.jobId, renewedClient(l.owner)]);
    const { values } = await this.run(LEASE_SCRIPTS.renew, shardTag, [
      String(this.leaseTtlMs),
      confirm ? '1' : '0',
      ...args,
    ]);
    return [...values];
  }

  /** States of waiting jobs of one shard tag, after filling free slots of their providers. */
  async poll(shardTag: string, waiting: readonly { providerId: string; jobId: string }[]): Promise<WaiterState[]> {
    const args = waiting.flatMap((w) => [this.keys.queueName(w.providerId), w.jobId]);
    const { values } = await this.run(LEASE_SCRIPTS.poll, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      ...args,
    ]);
    return values.map((s): WaiterState => {
      if (s.startsWith('g:')) return { kind: 'granted', providerId: this.keys.providerOf(s.slice(2)) };
      return { kind: s === 'w' ? 'waiting' : s === 's' ? 'shed' : 'gone' };
    });
  }

  /**
   * Takes `jobId` out of Redis wherever its admission put it among `providerIds` (all of one tag):
   * out of a wait list, or its lease dropped and the slot handed on (`scripts/settle.lua`). For a job
   * whose last command got no answer (docs/architecture.md, "Leftovers"). Idempotent.
   * @returns what it was: `left` (waiting), `released` (a lease), `gone` (nothing left of it).
   */
  async settle(shardTag: string, providerIds: readonly string[], jobId: string): Promise<'left' | 'released' | 'gone'> {
    const { status } = await this.run(LEASE_SCRIPTS.settle, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      jobId,
      ...providerIds.map((id) => this.keys.queueName(id)),
    ]);
    return status;
  }

  /**
   * One sweep of the given providers of one tag (`scripts/sweep.lua`): frees the leases and waiting
   * jobs of `deadReplicaIds`, and reaps every lease expired more than `graceMs` ago (Redis time)
   * unless it names one of `stalledReplicaIds`. Resolves how many of each were freed, and in how
   * many ms a lease of these providers can next be due for reaping (`nextMs`).
   */
  async sweep(
    shardTag: string,
    replicas: { readonly dead: readonly string[]; readonly stalled: readonly string[] },
    providerIds: readonly string[],
    graceMs: number,
  ): Promise<{ removed: number; reaped: number; nextMs: number }> {
    const names = providerIds.map((id) => this.keys.queueName(id));
    const { values } = await this.run(LEASE_SCRIPTS.sweep, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      String(graceMs),
      String(replicas.dead.length),
      ...replicas.dead,
      String(replicas.stalled.length),
      ...replicas.stalled,
      ...names,
    ]);
    return { removed: Number(values[0]), reaped: Number(values[1]), nextMs: Number(values[2]) };
  }

  /**
   * Writes the limits of providers of one tag and fills slots a raised limit freed. Resolves true when
   * some provider had none (a new deployment, or Redis lost its state); then, with `barrierMs` > 0,
   * the barrier is raised before anything is granted.
   */
  async configure(shardTag: string, providers: readonly QueueProvider[], barrierMs: number): Promise<boolean> {
    const args = providers.flatMap((p) => [
      this.keys.queueName(p.providerId),
      String(p.maxConcurrency),
      String(p.maxQueued),
    ]);
    const { status } = await this.run(LEASE_SCRIPTS.configure, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      String(barrierMs),
      ...args,
    ]);
    return status === 'unconfigured';
  }

  /** Sets the restart barrier of a tag for `ms` unless one stands: no grants until it expires. */
  async raiseBarrier(shardTag: string, ms: number): Promise<void> {
    await this.client.set(`${this.keys.tagBase(shardTag)}:barrier`, '1', 'PX', ms, 'NX');
  }

  /**
   * Every client's counts per pool on the given shard tags (docs/architecture.md, "Clients, priority
   * and fair share"); clients with nothing held or waiting left out.
   */
  clientCounts(shardTags: readonly string[]): Promise<ClientCounts[]> {
    return readClientCounts(this.client, this.keys.prefix, shardTags);
  }

  /**
   * Counts of providers, the same definition admission decides on: in_flight = LLEN active,
   * queued = LLEN wait + ZCARD prioritized (BullMQ's own `getJobCounts('active', 'wait', 'prioritized')`). One pipeline.
   */
  counts(providers: readonly StoredProvider[]): Promise<Map<string, ProviderCounts>> {
    return readLeaseCounts(this.client, this.keys.prefix, providers);
  }

  /** Marks a replica alive for `ttlMs` and registers it for the sweep (two commands, one round trip). */
  async refreshLiveness(replicaId: string, ttlMs: number): Promise<void> {
    const results = await this.client
      .multi()
      .set(this.keys.livenessKey(replicaId), '1', 'PX', ttlMs)
      .sadd(this.keys.replicasKey, replicaId)
      .exec();
    const failed = results?.find(([error]) => error);
    if (failed) throw failed[0];
  }

  /** Unregisters a replica that closed cleanly. */
  async forgetReplica(replicaId: string): Promise<void> {
    await this.client.multi().del(this.keys.livenessKey(replicaId)).srem(this.keys.replicasKey, replicaId).exec();
  }

  /** Registered replicas (other than `self`) whose liveness key has expired. */
  async expiredReplicas(self: string): Promise<string[]> {
    const ids = (await this.client.smembers(this.keys.replicasKey)).filter((id) => id !== self);
    if (ids.length === 0) return [];
    const alive = await this.client.mget(ids.map((id) => this.keys.livenessKey(id)));
    return ids.filter((_, i) => alive[i] === null);
  }

  /**
   * Replica ids that still have a Redis connection (by connection name), from `CLIENT LIST`.
   * A stalled process (SIGSTOP, a frozen VM) keeps its connections; a dead one does not.
   * @throws when CLIENT is refused (e.g. an ACL): the caller then goes by liveness keys alone.
   */
  async connectedReplicas(): Promise<Set<string>> {
    // On a cluster every replica connects to every master: one that still has a connection anywhere is alive.
    const lists = await Promise.all(
      masterNodes(this.client).map((node) => node.call('CLIENT', 'LIST', 'TYPE', 'normal') as Promise<string>),
    );
    const marker = this.keys.connectionName('');
    const out = new Set<string>();
    for (const list of lists) {
      for (const match of list.matchAll(/ name=(\S+)/g)) {
        if (match[1].startsWith(marker)) out.add(match[1].slice(marker.length));
      }
    }
    return out;
  }

  /** Drops a replica from the registry once its leftovers are swept. */
  async unregister(replicaIds: readonly string[]): Promise<void> {
    if (replicaIds.length > 0) await this.client.srem(this.keys.replicasKey, ...replicaIds);
  }

  /** `run_id` of the Redis server (of every master of a cluster, sorted), to detect a restart that lost state. */
  async serverRunId(): Promise<string> {
    const infos = await Promise.all(masterNodes(this.client).map((node) => node.info('server')));
    return infos
      .map((info) => /run_id:(\w+)/.exec(info)?.[1] ?? '?')
      .sort()
      .join(',');
  }

  /**
   * How long the Redis server has been up, in ms, rounded down to the second (`INFO server`
   * `uptime_in_seconds`; the least of every master's on a cluster): a restart without persistence
   * shows as a small uptime (docs/architecture.md, "Redis restarts").
   */
  async serverUptimeMs(): Promise<number> {
    const infos = await Promise.all(masterNodes(this.client).map((node) => node.info('server')));
    return Math.min(...infos.map((info) => Number(/uptime_in_seconds:(\d+)/.exec(info)?.[1] ?? 0) * 1000));
  }

  /**
   * `CONFIG GET <name>` on every master: one value per master ('' where unset).
   * @throws the Redis error, e.g. `NOPERM` or `unknown command` where CONFIG is refused (managed Redis).
   */
  async serverConfig(name: string): Promise<string[]> {
    const replies = await Promise.all(
      masterNodes(this.client).map((node) => node.call('CONFIG', 'GET', name) as Promise<string[]>),
    );
    return replies.map((reply) => reply[1] ?? '');
  }

  /** Runs a lease script on the slot of `shardTag`: KEYS[1] `<base>:seq`, ARGV[1] the tag base, then `args`. */
  private run<S extends string>(
    script: LuaScript<S>,
    shardTag: string,
    args: readonly string[],
  ): Promise<ScriptReply<S>> {
    const base = this.keys.tagBase(shardTag);
    return script.run(this.client, [`${base}:seq`], [base, ...args]);
  }
}

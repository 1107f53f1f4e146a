import type { LuaScript, ScriptReply } from '../lua/script-loader';
import { readClientCounts, readLeaseCounts, readQueueCounts } from './lease-counts';
import {
  budgetArg,
  clientArgs,
  renewedClient,
  tokenArgs,
  tokenText,
  type HeldLeaseFacts,
  type JobClient,
  type RenewedLease,
} from './job-client';
import { decodeAdmit, type AdmitResult, type WaiterState } from './lease-replies';
import {
  DEFAULT_POOL,
  DEFAULT_QUEUE_CLIENT,
  type ClientCounts,
  type ProviderCounts,
  type QueueClient,
  type QueueCounts,
  type QueueProvider,
} from './provider-queue';
import type { RedisClient } from './redis-connection';
import { ReplicaRegistry } from './replica-registry';
import { LEASE_SCRIPTS } from './scripts/lease-scripts';
import { DEFAULT_COMPLETION_TOKENS, type TokenWeight } from './token-limit';
import { budgetWindows, type BudgetWindow } from './token-budget';

export { readClientCounts, readLeaseCounts, readQueueCounts } from './lease-counts';
export * from './job-client';
export * from './lease-replies';

/** A provider as the lease store addresses it: its id and the shard tag its keys live under. */
export interface StoredProvider {
  readonly providerId: string;
  readonly shardTag: string;
  /** True when it has a token limit: its counts read its tokens in flight too (docs/architecture.md, "Token limits"). */
  readonly tokened?: boolean;
}

/**
 * Every Redis command of the Redis `ProviderQueue` backend goes through this class (its replica and
 * server commands through its base, `ReplicaRegistry`) (docs/architecture.md,
 * "Lease protocol"): the Lua scripts of `scripts/` (`LEASE_SCRIPTS`), the one count reader, replica
 * liveness and the connection list. It holds no state of its own beyond the connection and the key layout.
 * Every method rejects with the Redis error (connection lost, command timeout) and never retries.
 */
export class LeaseStore extends ReplicaRegistry {
  /**
   * @param client a connection with no offline queue (commands fail at once while Redis is down).
   * @param leaseTtlMs lifetime of a lease in Redis between renewals, in ms.
   */
  constructor(
    client: RedisClient,
    prefix: string,
    private readonly leaseTtlMs: number,
  ) {
    super(client, prefix);
  }

  /**
   * One admission decision for `candidates` (all of one shard tag) and the job's client: its place
   * in line, its caps, shedding (`scripts/admit.lua`; docs/architecture.md, "Clients, priority and
   * fair share"). `owner` defaults to the anonymous client of the default pool. `tokens`: the request's
   * token weight, for candidates with a token limit (docs/architecture.md, "Token limits"); pass it
   * only when one of them has one, so that a pool without token limits runs no token command.
   * `budgetWeight`: the tokens the request reserves in its client's token budget, when the client has
   * one (docs/architecture.md, "Token budgets"); refused `budget` / `budget_never` when it cannot.
   */
  async admit(
    shardTag: string,
    candidateIds: readonly string[],
    jobId: string,
    data: string,
    owner: JobClient = { pool: DEFAULT_POOL, client: DEFAULT_QUEUE_CLIENT },
    tokens?: TokenWeight,
    budgetWeight = 0,
  ): Promise<AdmitResult> {
    const names = candidateIds.map((id) => this.keys.queueName(id));
    const { status, values } = await this.run(LEASE_SCRIPTS.admit, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      jobId,
      data,
      ...clientArgs(owner),
      ...tokenArgs(tokens),
      budgetArg(owner.client, budgetWeight),
      String(names.length),
      ...names,
    ]);
    return decodeAdmit(status, values, (q) => this.keys.providerOf(q));
  }

  /**
   * Ends a lease and hands its slot on. Resolves true when the lease still existed. `held.solo`: the
   * lease was admitted for a solo client (`QueueClient.solo`), whose counts are not kept, so none is
   * read or ended; `held.confirmed`: the caller holds the lease (granted at once, or its grant
   * confirmed), so it has no unconfirmed-grant entry to delete; `held.tokened`: its job had a token
   * weight or its client a token budget, so it may hold tokens or a reservation (read even for a solo
   * lease); `held.used`: the tokens the call used, charged to the budget in place of the reservation
   * (absent: the reservation as it stands). Without them any lease is ended, its tokens given back.
   */
  async release(p: StoredProvider, jobId: string, held: HeldLeaseFacts = {}): Promise<boolean> {
    const { status } = await this.run(LEASE_SCRIPTS.release, p.shardTag, [
      this.keys.queueName(p.providerId),
      jobId,
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      held.solo ? '1' : '0',
      held.confirmed ? '1' : '0',
      held.tokened ? '1' : '',
      held.used === undefined ? '' : tokenText(held.used),
    ]);
    return status === 'released';
  }

  /**
   * Prefill is done for a lease (`scripts/prefill.lua`): its prompt tokens go back to its provider's
   * token limit and waiters that now fit are granted. Resolves true when tokens were given back.
   */
  async prefill(p: StoredProvider, jobId: string): Promise<boolean> {
    const { status } = await this.run(LEASE_SCRIPTS.prefill, p.shardTag, [
      this.keys.queueName(p.providerId),
      jobId,
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
    ]);
    return status === 'prefilled';
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
    const args = leases.flatMap((l) => [
      this.keys.queueName(l.providerId),
      l.jobId,
      renewedClient(l.owner),
      l.tokens ? `${tokenText(l.tokens.prompt)}|${tokenText(l.tokens.completion)}` : '',
    ]);
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
   * the barrier is raised before anything is granted. `clients`: every configured client, whose
   * `maxInFlight` (leases per pool; none when absent) becomes the cap in force for its jobs already
   * waiting or held, and whose parked jobs get the room a raised or removed cap made at once
   * (`configure.lua`; docs/architecture.md, "Clients, priority and fair share"); absent, the caps in
   * Redis stay as they are.
   */
  async configure(
    shardTag: string,
    providers: readonly QueueProvider[],
    barrierMs: number,
    clients?: readonly QueueClient[],
  ): Promise<boolean> {
    const capOf = (c: QueueClient) => (c.maxInFlight === undefined ? '' : String(c.maxInFlight));
    const caps = clients ? [String(clients.length), ...clients.flatMap((c) => [c.id, capOf(c)])] : [''];
    const args = providers.flatMap((p) => [
      this.keys.queueName(p.providerId),
      String(p.maxConcurrency),
      String(p.maxQueued),
      p.maxTokensInFlight === undefined ? '' : String(p.maxTokensInFlight),
      String(p.defaultCompletionTokens ?? DEFAULT_COMPLETION_TOKENS),
    ]);
    const { status } = await this.run(LEASE_SCRIPTS.configure, shardTag, [
      String(this.leaseTtlMs),
      this.keys.grantChannelPrefix(),
      String(barrierMs),
      ...caps,
      ...args,
    ]);
    return status === 'unconfigured';
  }

  /**
   * Every window of the token budgets of `clients` on one tag (`scripts/budgets.lua`, Redis time):
   * tokens reserved and used, ms until the window holds none of them (docs/architecture.md, "Token budgets").
   */
  async budgets(
    shardTag: string,
    clients: readonly QueueClient[],
  ): Promise<
    { clientId: string; window: BudgetWindow; limit: number; reserved: number; used: number; resetMs: number }[]
  > {
    const asked = clients.flatMap((c) => budgetWindows(c.tokenBudgets).map(([w, limit]) => ({ c, w, limit })));
    if (asked.length === 0) return [];
    const args = asked.flatMap(({ c, w }) => [c.id, w === 'day' ? 'd' : 'm']);
    const { values } = await this.run(LEASE_SCRIPTS.budgets, shardTag, args);
    return asked.map(({ c, w, limit }, i) => ({
      clientId: c.id,
      window: w,
      limit,
      reserved: Number(values[3 * i]),
      used: Number(values[3 * i + 1]),
      resetMs: Number(values[3 * i + 2]),
    }));
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

  /**
   * `counts(providers)` and `clientCounts(shardTags)` in one snapshot: one read-only `scripts/counts.lua`
   * call per tag, so each tag's numbers are of one instant (`readQueueCounts`; docs/architecture.md,
   * "Status model").
   */
  snapshotCounts(providers: readonly StoredProvider[], shardTags: readonly string[]): Promise<QueueCounts> {
    return readQueueCounts(this.client, this.keys.prefix, providers, shardTags);
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

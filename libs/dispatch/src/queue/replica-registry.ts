import { LeaseKeys } from './lease-keys';
import { masterNodes, type RedisClient } from './redis-connection';

/**
 * The Redis commands of the Redis `ProviderQueue` backend that are not lease scripts
 * (docs/architecture.md, "Dead replicas", "Redis restarts"): replica liveness and registry, the
 * connection list, and what the server says of itself. `LeaseStore` adds the lease scripts. Every
 * method rejects with the Redis error (connection lost, command timeout) and never retries.
 */
export class ReplicaRegistry {
  readonly keys: LeaseKeys;

  /** @param client a connection with no offline queue (commands fail at once while Redis is down). */
  constructor(
    protected readonly client: RedisClient,
    prefix: string,
  ) {
    this.keys = new LeaseKeys(prefix);
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
}

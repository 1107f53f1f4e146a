import type { HealthSettings } from '@iop/validate';
import { LeaseKeys } from '../queue/lease-keys';
import type { RedisClient } from '../queue/redis-connection';
import type { HealthStore } from './provider-health';

/**
 * One atomic health transition in Redis (same rule as `nextHealth`): the record is a hash
 * `{state, failures, successes}` that every replica updates, with a TTL so it expires when no
 * replica refreshes it (a provider nobody observes falls back to healthy).
 * KEYS[1] record; ARGV ok(1|0), unhealthy_after, healthy_after, ttl_ms. Returns the new state.
 */
const RECORD_SCRIPT = `
local state = redis.call('HGET', KEYS[1], 'state') or 'healthy'
local failures = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
local successes = tonumber(redis.call('HGET', KEYS[1], 'successes') or '0')
if ARGV[1] == '1' then
  successes = successes + 1
  failures = 0
  if state == 'unhealthy' and successes >= tonumber(ARGV[3]) then state = 'healthy' end
else
  failures = failures + 1
  successes = 0
  if state == 'healthy' and failures >= tonumber(ARGV[2]) then state = 'unhealthy' end
end
redis.call('HSET', KEYS[1], 'state', state, 'failures', failures, 'successes', successes)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return state`;

/**
 * Provider health shared by every replica through Redis (issue 5: replicas agree; health expires
 * when no replica refreshes it). Keys: `LeaseKeys.healthKey` (hash, PX `ttlMs`), all on one cluster slot.
 * A Redis outage leaves the cache as it was and is reported through `onError`.
 */
export class RedisHealthStore implements HealthStore {
  private down: ReadonlySet<string> = new Set();

  /**
   * @param redis a connection that fails fast (`enableOfflineQueue: false`); not closed by `close()`.
   * @param ttlMs lifetime of a record without updates, in ms (e.g. 3 × `health.interval_ms`).
   */
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly settings: () => Pick<HealthSettings, 'unhealthy_after' | 'healthy_after'>,
    private readonly ttlMs: () => number,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.keys = new LeaseKeys(prefix);
  }

  private readonly keys: LeaseKeys;

  private key(providerId: string): string {
    return this.keys.healthKey(providerId);
  }

  async record(providerId: string, ok: boolean): Promise<void> {
    const { unhealthy_after, healthy_after } = this.settings();
    try {
      const state = await this.redis.eval(RECORD_SCRIPT, 1, this.key(providerId), ok ? '1' : '0', unhealthy_after, healthy_after, this.ttlMs());
      const next = new Set(this.down);
      if (state === 'unhealthy') next.add(providerId);
      else next.delete(providerId);
      this.down = next;
    } catch (err) {
      this.onError(err);
    }
  }

  unhealthy(): ReadonlySet<string> {
    return this.down;
  }

  async refresh(providerIds: readonly string[]): Promise<void> {
    if (providerIds.length === 0) {
      this.down = new Set();
      return;
    }
    try {
      const pipeline = this.redis.pipeline();
      for (const id of providerIds) pipeline.hget(this.key(id), 'state');
      const results = (await pipeline.exec()) ?? [];
      this.down = new Set(providerIds.filter((_id, i) => results[i]?.[1] === 'unhealthy'));
    } catch (err) {
      this.onError(err);
    }
  }
}

import { LeaseKeys } from '../queue/lease-keys';
import type { RedisClient } from '../queue/redis-connection';

/**
 * Which provider produced a Responses API response, so a follow-up with `previous_response_id`
 * goes back to it while it is healthy (README "Operating a running fleet", affinity; like LiteLLM's
 * deployment check). Lookups never throw: a lost mapping only loses the preference.
 */
export interface ResponseAffinity {
  /** The provider id that produced `responseId`, if known. */
  get(responseId: string): Promise<string | undefined>;
  /** Remembers that `providerId` produced `responseId`, for the store's TTL. */
  set(responseId: string, providerId: string): Promise<void>;
}

/**
 * In-process affinity for one gateway: a Map bounded to `maxEntries` (oldest dropped first), each
 * entry valid for `ttlMs`.
 */
export class MemoryResponseAffinity implements ResponseAffinity {
  private readonly entries = new Map<string, { providerId: string; expiresAt: number }>();

  /**
   * @param ttlMs how long a mapping lives, in ms. @defaultValue 3_600_000 (1 h)
   * @param maxEntries bound on remembered responses. @defaultValue 100_000
   */
  constructor(
    private readonly ttlMs = 3_600_000,
    private readonly maxEntries = 100_000,
  ) {}

  async get(responseId: string): Promise<string | undefined> {
    const entry = this.entries.get(responseId);
    if (!entry) return undefined;
    if (entry.expiresAt < Date.now()) {
      this.entries.delete(responseId);
      return undefined;
    }
    return entry.providerId;
  }

  async set(responseId: string, providerId: string): Promise<void> {
    this.entries.delete(responseId);
    this.entries.set(responseId, { providerId, expiresAt: Date.now() + this.ttlMs });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }
}

/**
 * Affinity shared by every replica: `LeaseKeys.affinityKey(responseId)` = provider id, PX `ttlMs`.
 * A Redis outage makes lookups miss (reported through `onError`), never fail the request.
 */
export class RedisResponseAffinity implements ResponseAffinity {
  /**
   * @param redis a fail-fast connection (`enableOfflineQueue: false`); not closed here.
   * @param ttlMs how long a mapping lives, in ms. @defaultValue 3_600_000 (1 h)
   */
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly ttlMs = 3_600_000,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.keys = new LeaseKeys(prefix);
  }

  private readonly keys: LeaseKeys;

  async get(responseId: string): Promise<string | undefined> {
    try {
      return (await this.redis.get(this.keys.affinityKey(responseId))) ?? undefined;
    } catch (err) {
      this.onError(err);
      return undefined;
    }
  }

  async set(responseId: string, providerId: string): Promise<void> {
    try {
      await this.redis.set(this.keys.affinityKey(responseId), providerId, 'PX', this.ttlMs);
    } catch (err) {
      this.onError(err);
    }
  }
}

import { DEFAULT_SHARD_TAG } from '../lease-keys';
import type { StoredProvider } from '../lease-store';
import type { QueueClient, QueueProvider } from '../provider-queue';

/** A provider this replica was configured with. */
export interface ProviderSlot extends StoredProvider {
  limits: QueueProvider;
  /** It has a token limit (`limits.maxTokensInFlight`): its counts read its tokens in flight. */
  tokened: boolean;
  /** Left out of the last `configure`: takes no new requests; its running leases end normally. */
  removed: boolean;
}

/**
 * The providers one replica was configured with, and the shard tag each one's keys live under
 * (docs/architecture.md, "Redis and Redis Cluster"). A provider left out of a later `configure` stays
 * here, marked removed, so the leases still running on it are renewed and released where they live.
 */
export class ProviderSlots {
  private readonly slots = new Map<string, ProviderSlot>();
  /**
   * The clients of the last `configure` that named them, whose caps every limits write sends along
   * (`LeaseStore.configure`), so a Redis that lost its state gets them back too; undefined until then.
   */
  clients: readonly QueueClient[] | undefined;

  /**
   * Takes the full set of pool providers: new ones are added, known ones get their new limits (and a
   * new slot when their shard tag changed), the rest are marked removed. Resolves the ids kept.
   * @throws Error when a `maxConcurrency` is not an integer ≥ 1 (providers before it are already applied).
   */
  apply(providers: readonly QueueProvider[]): Set<string> {
    const keep = new Set(providers.map((p) => p.providerId));
    for (const limits of providers) {
      if (!Number.isInteger(limits.maxConcurrency) || limits.maxConcurrency < 1) {
        throw new Error(`provider "${limits.providerId}": max_concurrency must be an integer ≥ 1`);
      }
      const shardTag = limits.shardTag ?? DEFAULT_SHARD_TAG;
      const slot = this.slots.get(limits.providerId);
      const tokened = limits.maxTokensInFlight !== undefined;
      if (slot && slot.shardTag === shardTag) {
        Object.assign(slot, { limits, tokened, removed: false });
      } else {
        this.slots.set(limits.providerId, { providerId: limits.providerId, shardTag, limits, tokened, removed: false });
      }
    }
    for (const [id, slot] of this.slots) if (!keep.has(id)) slot.removed = true;
    return keep;
  }

  /** Where a provider's keys live: its slot, or `shardTag` for a provider this replica never configured. */
  at(providerId: string, shardTag: string): StoredProvider {
    return this.slots.get(providerId) ?? { providerId, shardTag };
  }

  /** The configured, not removed providers among `ids`, in the order of `ids`. */
  usable(ids: readonly string[]): ProviderSlot[] {
    const out: ProviderSlot[] = [];
    for (const id of ids) {
      const slot = this.slots.get(id);
      if (slot && !slot.removed) out.push(slot);
    }
    return out;
  }

  /** Ids of every provider not removed. */
  activeIds(): string[] {
    return [...this.slots.values()].filter((s) => !s.removed).map((s) => s.providerId);
  }

  /** Limits of the providers of one shard tag that are not removed. */
  limitsOn(shardTag: string): QueueProvider[] {
    return [...this.slots.values()].filter((p) => p.shardTag === shardTag && !p.removed).map((p) => p.limits);
  }

  /** Every provider id (removed ones included: their leases still live there), by shard tag. */
  byTag(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const slot of this.slots.values()) {
      const list = out.get(slot.shardTag) ?? [];
      list.push(slot.providerId);
      out.set(slot.shardTag, list);
    }
    return out;
  }
}

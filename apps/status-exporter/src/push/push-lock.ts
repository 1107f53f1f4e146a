import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Cluster, Redis } from 'ioredis';

/**
 * Renews the lock when its value is still this owner's.
 * KEYS[1] the lock; ARGV[1] owner; ARGV[2] TTL in ms. Reply: 1 renewed, 0 not this owner's (lost).
 */
const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/**
 * Deletes the lock when its value is still this owner's, so a lock another exporter took over is never removed.
 * KEYS[1] the lock; ARGV[1] owner. Reply: 1 released, 0 not this owner's.
 */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

/** Options of {@link PushLock}. */
export interface PushLockOptions {
  /** The Redis every exporter of the fleet reads its counts from. */
  readonly redis: Redis | Cluster;
  /** The lock's key, e.g. `<queue.prefix>:status-push-lock`. */
  readonly key: string;
  /**
   * How long the lock outlives its holder's last renewal, in ms: a killed holder is replaced this
   * long after its last renewal at most. The holder renews every `ttlMs / 3`. @defaultValue 10000
   */
  readonly ttlMs?: number;
  /** This exporter's name in the lock's value. @defaultValue `<hostname>:<pid>:<random>` */
  readonly owner?: string;
  /** Called when this exporter takes the lock (true) or loses it (false). */
  readonly onChange?: (held: boolean) => void;
}

/** Default {@link PushLockOptions.ttlMs}. */
export const PUSH_LOCK_TTL_MS = 10_000;

/**
 * Which exporter pushes the snapshot (README "Status", push): every pod runs an exporter, and
 * all of them read the same counts from Redis, so one push per interval is enough. A Redis lock:
 * the first exporter to `SET key owner NX PX ttl` holds it and renews it every `ttl / 3` (a
 * script that renews only its own value); the others try again when the lock's TTL runs out
 * (`PTTL`), so one of them takes over within the TTL of the holder's last renewal when the holder
 * dies. `close()` releases it (only when still its own). `held` is conservative: it turns false
 * once `ttlMs` has passed since the start of the last successful take or renewal, even when Redis
 * cannot be asked, so two exporters never both believe they hold it.
 */
export class PushLock {
  readonly owner: string;
  private readonly ttlMs: number;
  private heldUntil = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private closed = false;
  private wasHeld = false;

  constructor(private readonly options: PushLockOptions) {
    this.ttlMs = options.ttlMs ?? PUSH_LOCK_TTL_MS;
    if (!(Number.isInteger(this.ttlMs) && this.ttlMs >= 30))
      throw new Error('PushLock: ttlMs must be a whole number of ms, 30 or more');
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${randomUUID()}`;
  }

  /** True while this exporter holds the lock. */
  get held(): boolean {
    return Date.now() < this.heldUntil;
  }

  /** Tries to take the lock now, then keeps renewing it (or trying to take it) until `close()`. */
  start(): void {
    if (this.closed || this.timer || this.running) return;
    this.schedule(0);
  }

  /** Stops trying and releases the lock if this exporter holds it. Never rejects. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
    if (!this.held) return;
    this.heldUntil = 0;
    await this.options.redis.eval(RELEASE, 1, this.options.key, this.owner).catch(() => undefined);
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.attempt().then((next) => {
        this.running = undefined;
        if (!this.closed) this.schedule(next);
      });
    }, delayMs);
  }

  /** One take or renewal; @returns the delay before the next one, in ms. Never rejects. */
  private async attempt(): Promise<number> {
    const { redis, key } = this.options;
    const startedAt = Date.now();
    try {
      if (this.held) {
        if ((await redis.eval(RENEW, 1, key, this.owner, this.ttlMs)) === 1) this.heldUntil = startedAt + this.ttlMs;
        else this.heldUntil = 0;
      } else if ((await redis.set(key, this.owner, 'PX', this.ttlMs, 'NX')) === 'OK') {
        this.heldUntil = startedAt + this.ttlMs;
      }
      if (this.held) return this.renewPeriodMs;
      // Held by another exporter: try again as its lock runs out (-2: gone already, -1: no TTL).
      const remaining = await redis.pttl(key);
      return remaining > 0 ? Math.min(remaining + 1, this.ttlMs) : 1;
    } catch {
      // Redis does not answer: `held` runs out by itself; keep trying at the renewal pace.
      return this.renewPeriodMs;
    } finally {
      this.notify();
    }
  }

  private get renewPeriodMs(): number {
    return Math.max(1, Math.floor(this.ttlMs / 3));
  }

  private notify(): void {
    const held = this.held;
    if (held === this.wasHeld) return;
    this.wasHeld = held;
    try {
      this.options.onChange?.(held);
    } catch {
      // A listener's fault must not stop the lock.
    }
  }
}

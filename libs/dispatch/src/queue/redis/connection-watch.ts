import { queueUnavailable } from '../admission-errors';
import { isAnswerError, replyText } from '../redis-connection';
import type { RedisClient } from '../redis-connection';
import type { QueueLogger } from './redis-queue-options';
import { withTimeout } from './with-timeout';

/** What a `ConnectionWatch` watches and whom it tells. */
export interface ConnectionWatchOptions {
  /** The fail-fast connection every command and script goes through; its `ready` starts the reconnect check. */
  readonly commands: RedisClient;
  /** The grant subscriber: its errors count as outage signs too. */
  readonly subscriber: RedisClient;
  readonly logger: QueueLogger;
  /** Longest an admission waits for the (re)connect check, in ms (`commandTimeoutMs`). */
  readonly commandTimeoutMs: number;
  /** How long Redis may stay silent before waiting requests fail, in ms (`leaseTtlMs - fenceMarginMs`). */
  readonly silenceLimitMs: number;
  /** Runs on every (re)connect before admissions resume (`RestartRecovery.onReconnect`). */
  readonly onReconnect: () => Promise<void>;
  /** True once the queue closed or crashed: nothing is logged any more. */
  readonly isClosed: () => boolean;
}

/**
 * Whether this replica can reach Redis (docs/architecture.md, "Fencing" and "Hung Redis"; README "Running a
 * fleet"): follows the connections' `ready`, `close` and `error` events, and the time Redis last answered
 * (`reachedAt`, monotonic clock), so a Redis that stops answering on an open socket (SIGSTOP, a hung
 * host) is an outage too; logs an outage once when it starts and once when it ends, holds admissions
 * back until the reconnect check ran, and lets no waiting request outwait an outage.
 */
export class ConnectionWatch {
  private outage = false;
  /** True while the liveness refresh is refused with `OOM` (Redis over `maxmemory`); logged once. */
  private overMaxmemory = false;
  /** Redis's refusal of the last renewal or liveness refresh (`MISCONF …`), until a refresh succeeds; for the outage's words. */
  private refusal: string | undefined;
  /** `performance.now()` when this replica's liveness refresh last succeeded: Redis answered then. */
  private reachedAt = performance.now();
  /** The check of the last (re)connect; admissions wait for it. */
  private reconnectCheck: Promise<void> = Promise.resolve();
  private readonly firstConnection: Promise<void>;

  constructor(private readonly opts: ConnectionWatchOptions) {
    const { commands, subscriber, logger } = opts;
    let markFirstConnection: () => void = () => undefined;
    this.firstConnection = new Promise<void>((resolve) => (markFirstConnection = resolve));
    commands.on('error', (e: Error) => this.onRedisError('commands', e));
    subscriber.on('error', (e: Error) => this.onRedisError('subscriber', e));
    commands.on('ready', () => {
      this.reconnectCheck = opts
        .onReconnect()
        .then(() => this.endOutage())
        .catch((e: unknown) => logger.warn({ err: e }, 'redis queue: reconnect check failed'))
        .finally(() => markFirstConnection());
    });
    commands.on('close', () => this.markOutage('connection closed'));
  }

  /** True while the command connection is up. */
  connected(): boolean {
    return this.opts.commands.status === 'ready';
  }

  /** Resolves once the first connection's check ran, or after `commandTimeoutMs`; never rejects. */
  waitForFirstConnection(): Promise<void> {
    return withTimeout(this.firstConnection, this.opts.commandTimeoutMs).catch(() => undefined);
  }

  /** True while the command connection is up and Redis answered within the silence limit (`/readyz`). */
  reachable(): boolean {
    return this.connected() && !this.silentTooLong();
  }

  /**
   * Resolves when an admission may run now: connected (waiting up to `commandTimeoutMs` for the first
   * connection), answering, and the last reconnect check done.
   * @throws AdmissionError `queue_unavailable` when Redis is not connected, has not answered for the
   *   silence limit, or the check does not end in time.
   */
  async admissible(): Promise<void> {
    if (!this.connected()) {
      await this.waitForFirstConnection();
      if (!this.connected()) throw queueUnavailable('Redis is not connected');
    }
    await withTimeout(this.reconnectCheck, this.opts.commandTimeoutMs).catch((e: unknown) => {
      throw queueUnavailable(e);
    });
    if (this.silentTooLong()) throw queueUnavailable(this.silence());
  }

  /** Redis answered a command sent at `sentAt` (`performance.now()`); ends an outage of a hung Redis. */
  reached(sentAt: number): void {
    this.refusal = undefined;
    this.reachedAt = Math.max(this.reachedAt, sentAt);
    if (this.connected()) this.endOutage();
  }

  /**
   * Redis answered the liveness refresh sent at `sentAt` (`performance.now()`) with `OOM` (over
   * `maxmemory` under `noeviction`): it is answering, so it is not silent, and the refusal is no outage:
   * the scripts that end or keep up state still run, so waiting requests stay in line and are granted
   * as releases free slots; admissions are refused with `OOM` meanwhile. Logged once, until
   * {@link writesAccepted} (docs/architecture.md, "Redis over maxmemory").
   */
  outOfMemory(sentAt: number, error: Error): void {
    this.reached(sentAt);
    if (this.opts.isClosed() || this.overMaxmemory) return;
    this.overMaxmemory = true;
    this.opts.logger.warn(
      { reply: replyText(error) },
      'redis queue: Redis is over maxmemory and refuses new writes (OOM): new pooled requests answer queue_unavailable; waiting requests and held leases go on (README "Redis requirements")',
    );
  }

  /**
   * A renewal or the liveness refresh failed with `error`, other than `OOM`: a refusal Redis answered
   * (`MISCONF`, `NOREPLICAS`, `NOPERM`; the queue cannot write, so it counts as silence) is kept for the
   * words of the outage it leads to; a lost connection or a timeout is silence itself.
   */
  failedWrite(error: unknown): void {
    if (isAnswerError(error)) this.refusal = replyText(error);
  }

  /** True while the silence is Redis refusing writes ({@link failedWrite}), not saying nothing. */
  refusing(): boolean {
    return this.refusal !== undefined;
  }

  /** The liveness refresh succeeded: ends the `OOM` condition of {@link outOfMemory}, logged once. */
  writesAccepted(): void {
    if (!this.overMaxmemory) return;
    this.overMaxmemory = false;
    this.opts.logger.info({}, 'redis queue: Redis accepts writes again (below maxmemory)');
  }

  /**
   * Redis answered `READONLY`: a failover demoted the node this connection talks to; the connection is
   * being re-opened (to the endpoint's new primary), and its reconnect check treats the failover like a
   * restart (docs/architecture.md, "Failover"). Logged once, as the start of an outage.
   */
  failover(error: Error): void {
    if (this.opts.isClosed()) return;
    this.startOutage('Redis answered READONLY: a failover demoted this node; reconnecting', error);
  }

  /**
   * Runs every poll round: an open connection on which Redis has not answered for the silence limit
   * (a SIGSTOPped or hung server keeps the socket open) starts an outage, logged once.
   */
  checkSilence(): void {
    if (this.opts.isClosed() || this.outage || !this.connected() || !this.silentTooLong()) return;
    this.startOutage(
      this.refusal === undefined
        ? `no answer for ${Math.round(this.silentMs())} ms on an open connection (hung or overloaded)`
        : `writes refused for ${Math.round(this.silentMs())} ms: ${this.refusal}`,
    );
  }

  /** Why admissions fail while {@link silentTooLong}: silence, or the refusal Redis keeps answering. */
  private silence(): string {
    const ms = Math.round(this.silentMs());
    return this.refusal === undefined
      ? `Redis has not answered for ${ms} ms`
      : `Redis has refused writes for ${ms} ms: ${this.refusal}`;
  }

  /**
   * This process stood still for `ms` (SIGSTOP, a frozen VM, a blocked event loop): it sent Redis
   * nothing then and read no answer, so that time does not count as Redis's silence.
   */
  excuse(ms: number): void {
    this.reachedAt = Math.min(performance.now(), this.reachedAt + ms);
  }

  /** Time since Redis last answered, in ms (less the time this process stood still). */
  silentMs(): number {
    return performance.now() - this.reachedAt;
  }

  /**
   * A queued request does not outwait a Redis outage (README "Running a fleet"): true once Redis has not
   * answered for as long as a held lease is fenced after (`leaseTtlMs - fenceMarginMs`). Then every
   * waiter fails with `queue_unavailable`; its job leaves Redis when Redis answers again.
   */
  silentTooLong(): boolean {
    return this.silentMs() > this.opts.silenceLimitMs;
  }

  private onRedisError(source: string, error: Error): void {
    if (this.opts.isClosed()) return;
    if (this.markOutage(source, error)) return;
    this.opts.logger.info({ err: error, connection: source }, 'redis queue: connection error');
  }

  /**
   * Logs the first error of an outage only: why (`reason`: the connection that failed, or how) and the
   * error, when there is one. Returns false while the command connection is still up.
   */
  private markOutage(reason: string, err?: Error): boolean {
    if (this.opts.isClosed()) return true;
    if (this.connected()) return false;
    this.startOutage(reason, err);
    return true;
  }

  /** Logs the start of an outage once. */
  private startOutage(reason: string, err?: Error): void {
    if (this.outage) return;
    this.outage = true;
    this.opts.logger.warn(
      { reason, err },
      `redis queue: Redis unreachable (${reason}); pool routes answer queue_unavailable`,
    );
  }

  /** Logs the end of an outage once. */
  private endOutage(): void {
    if (!this.outage) return;
    this.outage = false;
    this.opts.logger.info({}, 'redis queue: Redis reachable again');
  }
}

import { parseRedisSentinelUrl } from '@iop/validate';
import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** A connection to a single Redis or to a Redis Cluster; both speak the same commands here. */
export type RedisClient = Redis | Cluster;

/** How to reach Redis (`queue.redis_url`, `queue.cluster`) and how the connection behaves. */
export interface RedisConnectionOptions {
  /**
   * `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS); for a cluster, any one seed node;
   * or `redis+sentinel://[user:password@]host:port[,host:port...]/<master name>`: the primary the
   * Sentinels name, asked again on every reconnect (credentials are the data nodes').
   */
  readonly url: string;
  /** Treat `url` as a seed node of a Redis Cluster and follow its slot map. @defaultValue false */
  readonly cluster?: boolean;
  /** `CLIENT SETNAME` of every connection (also of each cluster node's). */
  readonly connectionName?: string;
  /** Fail commands at once while disconnected instead of queueing them. @defaultValue false */
  readonly failFast?: boolean;
  /** Longest a command may take before it rejects, in ms. @defaultValue none */
  readonly commandTimeoutMs?: number;
  /**
   * ioredis's auto-pipelining, while the connection is busy: a command made while two or more await
   * their answer (or while a batch waits to leave) joins the batch of that turn of the event loop,
   * written in one go once the batch before it is answered; any other command is written at once
   * ({@link pipelineWhenBusy}; a Redis Cluster batches always). Redis then reads, runs and answers
   * several script calls per wake-up under load: at 16 concurrent requests it halved Redis's CPU
   * per pooled request (docs/architecture.md, "Lease protocol").
   * @defaultValue false
   */
  readonly autoPipelining?: boolean;
  /**
   * Called when Redis answers `READONLY` (the node was demoted by a failover), right before the
   * connection is dropped and opened again. @defaultValue none
   */
  readonly onReadOnly?: (error: Error) => void;
}

/**
 * ioredis's `reconnectOnError`: a `READONLY` reply means the endpoint now names another primary
 * while this connection still talks to the demoted node (docs/architecture.md, "Failover"), so the
 * connection is dropped and opened again (1: without sending the command again; it fails and the
 * caller's own recovery runs). Any other error keeps the connection.
 */
export function reconnectOnReadOnly(onReadOnly?: (error: Error) => void): (error: Error) => 1 | false {
  return (error) => {
    if (!error.message.startsWith('READONLY')) return false;
    onReadOnly?.(error);
    return 1;
  };
}

/**
 * True when `error` is a reply of the Redis server (`-ERR`, `-OOM`, `-NOPERM`, ...: ioredis's
 * `ReplyError`, an `EXECABORT` included), as opposed to a lost connection or a command timeout: Redis
 * answered. A `READONLY` reply is left out: it starts a failover (`reconnectOnReadOnly`).
 */
export function isAnswerError(error: unknown): error is Error {
  return error instanceof Error && error.name === 'ReplyError' && !error.message.startsWith('READONLY');
}

/**
 * What Redis answered, as text: the message of `error`, or for an `EXECABORT` (a `MULTI` with a refused
 * command) the first refusal ioredis kept in its `previousErrors` (`NOREPLICAS …`, `OOM …`).
 */
export function replyText(error: Error): string {
  const previous: unknown = (error as { previousErrors?: unknown }).previousErrors;
  return Array.isArray(previous) && previous[0] instanceof Error ? previous[0].message : error.message;
}

/**
 * True when `e` is Redis's `OOM` refusal (over `maxmemory` under `noeviction`, a command that may add
 * memory), also as the `EXECABORT` of a `MULTI` whose command was so refused ({@link replyText}).
 */
export function isOutOfMemory(e: unknown): e is Error {
  return e instanceof Error && replyText(e).startsWith('OOM ');
}

/**
 * Opens a connection to a single Redis or a Redis Cluster (docs/architecture.md, "Redis and Redis
 * Cluster"). Credentials and TLS come from the URL; reconnects back off up to 1 s; a `READONLY`
 * reply (a failover) drops and re-opens the connection. The caller must attach an `error` listener.
 * Never logs the URL.
 * @throws TypeError when `url` is not a URL, or is a Sentinel URL with `cluster`.
 */
export function connectRedis(opts: RedisConnectionOptions): RedisClient {
  const retryStrategy = (times: number) => Math.min(times * 100, 1000);
  const common: RedisOptions = {
    connectionName: opts.connectionName,
    reconnectOnError: reconnectOnReadOnly(opts.onReadOnly),
    enableAutoPipelining: opts.autoPipelining ?? false,
    ...(opts.failFast ? { enableOfflineQueue: false, maxRetriesPerRequest: 0 } : { maxRetriesPerRequest: null }),
    ...(opts.commandTimeoutMs !== undefined ? { commandTimeout: opts.commandTimeoutMs } : {}),
  };
  const tuned = (client: Redis) => (opts.autoPipelining ? pipelineWhenBusy(client) : client);
  const sentinel = parseRedisSentinelUrl(opts.url);
  if (sentinel) {
    if (opts.cluster)
      throw new TypeError('a redis+sentinel:// URL names one primary, not a Redis Cluster: unset cluster');
    // failoverDetector: the Sentinels' +switch-master re-opens the connection at once (ioredis).
    const { sentinels, name, username, password } = sentinel;
    return tuned(
      new Redis({
        ...common,
        retryStrategy,
        sentinels: [...sentinels],
        name,
        username,
        password,
        failoverDetector: true,
      }),
    );
  }
  if (!opts.cluster) return tuned(new Redis(opts.url, { ...common, retryStrategy }));
  const url = new URL(opts.url);
  return new Cluster([{ host: url.hostname, port: Number(url.port || 6379) }], {
    enableOfflineQueue: !opts.failFast,
    enableAutoPipelining: opts.autoPipelining ?? false,
    clusterRetryStrategy: retryStrategy,
    redisOptions: {
      ...common,
      username: url.username ? decodeURIComponent(url.username) : undefined,
      password: url.password ? decodeURIComponent(url.password) : undefined,
      tls: url.protocol === 'rediss:' ? {} : undefined,
    },
  });
}

/**
 * Commands awaiting their answer from which a connection counts as busy. One is what a lone request
 * leaves in flight (the release of the request before, as the next one asks for its lease): that
 * one is no reason to wait for company that will not come.
 */
const BUSY_AT = 2;

/** What {@link pipelineWhenBusy} reads of an ioredis `Redis` (5.x): commands written and not yet answered, batches to leave. */
interface PipelineState {
  readonly commandQueue?: { readonly length: number };
  readonly _autoPipelines?: { readonly size: number };
}

/**
 * Makes `client`'s auto-pipelining apply only while the connection is busy: a command made while
 * two or more await their answer ({@link BUSY_AT}), or while a batch waits to leave, joins the batch
 * of this turn of the event loop (ioredis sends it from `setImmediate`, in one write, once the batch
 * before it is answered: one batch per connection at a time); any other command is written at
 * once. Order is kept: a command goes straight out only when nothing waits to leave before it, and
 * a batch already sent was written before it.
 *
 * Why: a batch leaves after the rest of the turn's I/O callbacks and costs one more turn of the
 * loop. Under load that is what lets Redis answer several calls per wake-up; one request at a time,
 * nothing joins the batch. Measured on 2 cores, one replica, against batching always: at one
 * request at a time, 1,580–1,750 req/s against 1,415–1,430 and 464–496 µs of the gateway's CPU per
 * request against 530–588, Redis's CPU unchanged (89–96 µs); at 16 at a time, Redis's CPU per request
 * 43–47 µs against 41–43 µs (84 µs with no batching at all).
 *
 * ioredis reads `options.enableAutoPipelining` for each command it is given; this makes it a getter
 * over the client's own queues. Without those (another ioredis), it stays on: plain auto-pipelining.
 * `redis-connection.spec.ts` checks the writes against a real Redis.
 * @returns `client`
 */
export function pipelineWhenBusy(client: Redis): Redis {
  const state = client as unknown as PipelineState;
  Object.defineProperty(client.options, 'enableAutoPipelining', {
    configurable: true,
    enumerable: true,
    get: () =>
      state.commandQueue === undefined ||
      state._autoPipelines === undefined ||
      state.commandQueue.length >= BUSY_AT ||
      state._autoPipelines.size > 0,
  });
  return client;
}

/** The master nodes to ask node-local questions (`CLIENT LIST`, `INFO`): every master of a cluster, or the one server. */
export function masterNodes(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

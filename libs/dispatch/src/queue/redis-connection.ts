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
   * ioredis's auto-pipelining: the commands issued in one turn of the event loop leave in one write,
   * and those issued while that batch is answered wait to leave with the next (at most one round
   * trip). Redis then reads, runs and answers several script calls per wake-up: at 16 concurrent
   * requests it halved Redis's CPU per pooled request (docs/architecture.md, "Lease protocol").
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
  const sentinel = parseRedisSentinelUrl(opts.url);
  if (sentinel) {
    if (opts.cluster)
      throw new TypeError('a redis+sentinel:// URL names one primary, not a Redis Cluster: unset cluster');
    // failoverDetector: the Sentinels' +switch-master re-opens the connection at once (ioredis).
    const { sentinels, name, username, password } = sentinel;
    return new Redis({
      ...common,
      retryStrategy,
      sentinels: [...sentinels],
      name,
      username,
      password,
      failoverDetector: true,
    });
  }
  if (!opts.cluster) return new Redis(opts.url, { ...common, retryStrategy });
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

/** The master nodes to ask node-local questions (`CLIENT LIST`, `INFO`): every master of a cluster, or the one server. */
export function masterNodes(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

import { connectRedis, leaseAddresses, readQueueCounts, readTokenBudgets, RedisHealthStore } from '@iop/dispatch';
import { answerClientErrors, listen } from '@iop/runtime';
import { budgetedClients, trackedProviderIds } from '@iop/status';
import {
  ConfigRuntime,
  describeQueueBackend,
  GATEWAY_ONLY_SECRETS,
  QueueBackendError,
  redactUrl,
  resolveQueueBackend,
  type EdgeConfig,
  type LoadOptions,
  type QueueBackendChoice,
} from '@iop/validate';
import { createServer } from 'node:http';
import { answerContinue } from './http/continue-gate';
import type { Logger } from 'pino';
import { createExporterApp, snapshotSource } from './exporter-app';
import { PushLock } from './push/push-lock';
import { StatusPusher } from './push/status-pusher';

/**
 * How the exporter reads `edge.yaml` (README "Kubernetes"): the secrets only the gateway uses
 * (client keys, upstream keys, CLI `env`) may be unset, so the sidecar is given the Redis URL and
 * the status key only.
 */
export const EXPORTER_CONFIG_LOAD: LoadOptions = { unsetAllowedAt: GATEWAY_ONLY_SECRETS };

/** The Redis key of the push lock, under `queue.prefix`: one exporter of the fleet pushes (README "Status", push). */
export const pushLockKey = (prefix: string): string => `${prefix}:status-push-lock`;

/** Why the exporter refuses the memory backend (README "Status": one process's counts must not pose as the fleet's). */
export const MEMORY_BACKEND_REFUSAL =
  'With the memory backend the counts live inside ' +
  "one gateway process and there are no shared counts to export. For a single replica use the gateway's own " +
  'GET /status and GET /metrics; for a fleet, run the gateways and this exporter on one Redis (--redis, REDIS_URL or queue.redis_url).';

/** What {@link startExporter} needs: a validated config and where to listen. */
export interface ExporterOptions {
  config: EdgeConfig;
  /** sha256 of the config file (`loadConfigFile().hash`): a reload of the same file applies nothing. */
  configHash?: string;
  /**
   * The file the config came from: when set, the exporter reloads it on `reload()` (SIGHUP) and
   * when it changes, like the gateway; `transform` re-applies command-line overrides.
   */
  configFile?: string;
  transform?: (config: EdgeConfig) => EdgeConfig;
  /** Environment for `REDIS_URL`. */
  env: Record<string, string | undefined>;
  /** `--redis URL`: beats `REDIS_URL` and the file (resolveQueueBackend). */
  redis?: string;
  host: string;
  /** 0 = a free port. */
  port: number;
  logger: Logger;
  /** Overrides of the push loop and its lock (`PushLock` TTL), for tests. */
  push?: { timeoutMs?: number; maxBackoffMs?: number; lockTtlMs?: number };
}

/** A running exporter. */
export interface RunningExporter {
  /** `http://host:port` it listens on. */
  url: string;
  /** Reloads the config file (SIGHUP); an invalid file is logged and the running config stays. */
  reload(): Promise<void>;
  /** Stops listening, stops the pusher (aborting its request), closes the Redis connection. */
  close(): Promise<void>;
}

/** The exporter refused to start (memory backend); `message` says why and what to do. */
export class ExporterRefusal extends Error {}

/**
 * The exporter's I/O wiring (docs/architecture.md, "Layering", "Status model"): one Redis connection
 * shared by everything it reads: the providers' and clients' counts in one snapshot (`readQueueCounts`:
 * the gateways' own read-only `counts.lua`, one call per shard tag), the budgeted clients' windows
 * (`readTokenBudgets`: the gateways' own `budgets.lua`, exact on Redis time), the health records, and
 * the read-only queue board (`createQueueBoard`) on one BullMQ `Queue` per tracked provider
 * (`ProviderQueues`, rebuilt when a reload changes the tracked providers); the HTTP app on
 * `host:port`, and the push loop when `status.push_url` is set. The push lock is the one key it
 * writes (`counts.lua` and `budgets.lua` only read).
 * A Redis that is down at start is not fatal: counts are `null` until it answers.
 * @throws ExporterRefusal for the memory backend; the listen error when the port is taken.
 */
export async function startExporter(opts: ExporterOptions): Promise<RunningExporter> {
  const { config, logger } = opts;
  // The gateways' rule (README "Configuration", `queue.backend`), so the exporter reads the Redis they use.
  let choice: QueueBackendChoice;
  try {
    choice = resolveQueueBackend(config, opts.env, { redis: opts.redis });
  } catch (err) {
    if (err instanceof QueueBackendError) throw new ExporterRefusal(`status-exporter: ${err.message}`);
    throw err;
  }
  if (choice.backend !== 'redis' || !choice.redisUrl) {
    throw new ExporterRefusal(
      `status-exporter: the queue backend is "memory" (${choice.reason}). ${MEMORY_BACKEND_REFUSAL}`,
    );
  }
  logger.info(
    { queue: choice.backend, redis: redactUrl(choice.redisUrl), source: choice.source },
    describeQueueBackend(choice),
  );

  const redis = connectRedis({ url: choice.redisUrl, cluster: config.queue.cluster, failFast: true });
  let redisDown = false;
  redis.on('error', (err: Error) => {
    if (!redisDown) logger.warn({ err }, 'status-exporter: Redis connection error');
    redisDown = true;
  });
  redis.on('ready', () => (redisDown = false));
  // BullMQ and the board take a moment to load: only once the config is valid and the backend chosen.
  const [{ ProviderQueues }, { createQueueBoard }] = await Promise.all([
    import('./queues/provider-queues'),
    import('./board/queue-board'),
  ]);
  const board = createQueueBoard();
  // BullMQ repeats every connection error on each Queue: the listener above reports the outage once.
  const queues = new ProviderQueues(redis, config.queue.prefix, board.show, (err) =>
    logger.debug({ err }, 'status-exporter: BullMQ queue error'),
  );
  const addresses = (cfg: EdgeConfig) => leaseAddresses(cfg, trackedProviderIds(cfg));
  queues.sync(addresses(config));
  // Give Redis a moment so the first scrape has counts; never block the start on it.
  await Promise.race([new Promise((r) => redis.once('ready', r)), new Promise((r) => setTimeout(r, 2000).unref())]);

  let push: { pusher: StatusPusher; lock: PushLock } | undefined;
  const runtime = new ConfigRuntime(
    opts.configFile ?? '',
    { config, hash: opts.configHash ?? '', loadedAt: new Date() },
    {
      // A reload expands `${REDIS_URL}` as the first load did (`--redis` stands for it).
      env: opts.redis ? { ...opts.env, REDIS_URL: opts.redis } : opts.env,
      load: EXPORTER_CONFIG_LOAD,
      logger,
      transform: opts.transform,
      // A changed status.push_url or status.interval_ms applies at once (README "Status"): the push loop restarts.
      apply: async (next, previous) => {
        queues.sync(addresses(next.config));
        const [was, now] = [previous.config.status, next.config.status];
        if (was.push_url === now.push_url && was.interval_ms === now.interval_ms) return;
        await closePush();
        push = startPush(next.config);
        logger.info(
          { push: now.push_url !== undefined, interval_ms: now.interval_ms },
          'status-exporter: push settings reloaded',
        );
      },
    },
  );
  if (opts.configFile) runtime.watch();
  const current = () => runtime.current.config;
  // Health records are written by the gateways; the exporter only reads them (same keys, same rule).
  const health = new RedisHealthStore(
    redis,
    config.queue.prefix,
    () => current().health,
    () => 3 * current().health.interval_ms,
  );
  const deps = {
    config: current,
    // Providers' and clients' counts in one read-only script per shard tag (one snapshot: a pool's
    // parked is exact), not BullMQ's getJobCounts beside an HGETALL; the Queues stay for the board.
    counts: (ids: readonly string[]) => {
      const cfg = current();
      queues.sync(addresses(cfg));
      // While the connection is not ready, unknown now is an error now (never a wait, never 0).
      if (redis.status !== 'ready') return Promise.reject(new Error(`Redis connection is ${redis.status}`));
      const tags = new Set(addresses(cfg).map((a) => a.shardTag));
      return withTimeout(
        readQueueCounts(redis, cfg.queue.prefix, leaseAddresses(cfg, ids), [...tags]),
        COUNTS_TIMEOUT_MS,
      );
    },
    // No budgeted client: no Redis call (readTokenBudgets asks nothing).
    clientBudgets: () => {
      const cfg = current();
      const tags = new Set(addresses(cfg).map((a) => a.shardTag));
      return withTimeout(readTokenBudgets(redis, cfg.queue.prefix, [...tags], budgetedClients(cfg)), COUNTS_TIMEOUT_MS);
    },
    board: board.router,
    unhealthy: async (ids: readonly string[]) => {
      await withTimeout(health.refresh(ids), COUNTS_TIMEOUT_MS);
      return health.unhealthy();
    },
    healthViews: () => health.views(),
    configInfo: () => runtime.current,
    logger,
  };
  const source = snapshotSource(deps);
  const app = createExporterApp(deps, source);
  const server = createServer(app);
  // Unauthenticated callers get their 401 instead of `100 Continue` (README "Security").
  answerContinue(server, () => current().status.api_keys, app);
  // README "Errors": requests Node's parser refuses get an OpenAI-shaped answer, as every other error.
  answerClientErrors(server, { logger });
  try {
    await listen(server, opts);
  } catch (err) {
    runtime.close();
    await queues.close();
    redis.disconnect();
    throw err;
  }
  const address = server.address();
  const url =
    typeof address === 'object' && address
      ? `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
      : `http://${opts.host}:${opts.port}`;

  // One exporter of the fleet pushes: the holder of the push lock (README "Status", push).
  function startPush(cfg: EdgeConfig): { pusher: StatusPusher; lock: PushLock } | undefined {
    if (!cfg.status.push_url) return undefined;
    const lock: PushLock = new PushLock({
      redis,
      key: pushLockKey(config.queue.prefix),
      ttlMs: opts.push?.lockTtlMs,
      onChange: (held) => {
        logger.info(
          { owner: lock.owner },
          held ? 'status-exporter: took the push lock; this exporter pushes' : 'status-exporter: lost the push lock',
        );
        if (held) pusher.pushNow();
      },
    });
    const pusher: StatusPusher = new StatusPusher({
      url: cfg.status.push_url,
      intervalMs: cfg.status.interval_ms,
      timeoutMs: opts.push?.timeoutMs,
      maxBackoffMs: opts.push?.maxBackoffMs,
      lock,
      headers: { 'x-iop-status-pusher': lock.owner },
      snapshot: async () => (await source.read()).snapshot,
      onError: (err, failures) =>
        logger.warn(
          { err, consecutive_failures: failures, next_ms: pusher.nextDelayMs() },
          'status-exporter: push failed',
        ),
    });
    pusher.start();
    lock.start();
    return { pusher, lock };
  }
  async function closePush(): Promise<void> {
    await push?.pusher.close();
    await push?.lock.close();
    push = undefined;
  }
  push = startPush(config);
  logger.info(
    {
      listen: url,
      redis: redactUrl(choice.redisUrl),
      prefix: config.queue.prefix,
      push: config.status.push_url !== undefined,
    },
    'status-exporter listening',
  );

  return {
    url,
    reload: async () => {
      if (opts.configFile) await runtime.reload('SIGHUP');
    },
    close: async () => {
      runtime.close();
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      await closePush();
      server.closeAllConnections();
      await closed;
      await queues.close();
      redis.disconnect();
    },
  };
}

/** Longest a counts read may take before the snapshot shows `null` counts, in ms. */
const COUNTS_TIMEOUT_MS = 2000;

/** Rejects when `promise` takes longer than `ms` (the timer is cleared either way, so nothing lingers). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from Redis within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

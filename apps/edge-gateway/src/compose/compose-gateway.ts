import {
  RedisProviderQueue,
  MemoryProviderQueue,
  queueProviders,
  queueClients,
  type ProviderQueue,
} from '@iop/dispatch';
import type { CloseList, GatewayEnvironment, ProcessStart } from '@iop/runtime';
import {
  ConfigRuntime,
  describeQueueBackend,
  QueueBackendError,
  redactUrl,
  resolveQueueBackend,
  type EdgeConfig,
  type QueueBackendChoice,
  type QueueBackendOverrides,
} from '@iop/validate';
import { setMaxListeners } from 'node:events';
import type { Server } from 'node:http';
import type pino from 'pino';
import { AdapterRegistry, gatewayAdapterFactory } from '../adapters/adapter-registry';
import { createApp } from '../app';
import type { GatewayCommand } from '../cli-args';
import { ProbeClock } from '../health/probe-clock';
import { ProviderProber } from '../health/provider-prober';
import { GatewayMetrics } from '../observability/gateway-metrics';
import { applyServerLimits } from '../http/access/server-limits';
import { createGatewayServer } from './gateway-server';
import { openHealthAndAffinity, openHealthRedis } from './health-and-affinity';
import { warnRestartOnly } from './restart-only-settings';

/** `main.js [serve] --config FILE [--listen HOST:PORT] [--redis URL]`. */
export type ServeCommand = Extract<GatewayCommand, { command: 'serve' }>;

/** What `main` needs of the composed gateway to listen, say so, and drain. */
export interface ComposedGateway {
  /** The HTTP server around the app, not yet listening. */
  readonly server: Server;
  readonly queue: ProviderQueue;
  /** To abort when the drain after SIGTERM runs out: running requests end with a 503 or an error event. */
  readonly shutdown: AbortController;
}

/**
 * Composes the gateway (docs/architecture.md, "Layering"): the queue backend, the queue, the
 * adapters, the config in force and its reloads, provider health and affinity, the prober, the
 * app and its HTTP server. Each component registers its close hook in `toClose` as soon as it is
 * open, and its step of a reload as soon as it exists: a reload applies them in that order
 * (restart-only settings, queue limits, health, server limits) before the new config is in force.
 * @returns undefined once the reason the queue backend cannot be chosen is on stderr (exit 2)
 */
export async function composeGateway(
  cmd: ServeCommand,
  start: ProcessStart<GatewayEnvironment>,
  logger: pino.Logger,
  toClose: CloseList,
): Promise<ComposedGateway | undefined> {
  const { config: initial, env } = start;
  const overrides: QueueBackendOverrides = { redis: cmd.redis };
  const choice = chooseQueueBackend(initial, overrides, logger);
  if (!choice) return undefined;
  // Health and affinity share one fail-fast connection; the queue keeps its own.
  const { redis, redisError } = openHealthRedis(choice, initial.queue, logger, toClose);
  const cluster = initial.queue.cluster;
  const queue: ProviderQueue = redis
    ? new RedisProviderQueue({ redisUrl: choice.redisUrl!, cluster, prefix: initial.queue.prefix, logger })
    : new MemoryProviderQueue();
  toClose.add('queue', () => queue.close());
  await queue.configure(queueProviders(initial), queueClients(initial));
  const adapters = new AdapterRegistry(gatewayAdapterFactory(initial, cmd.config, logger));
  toClose.add('adapters', () => adapters.close());
  const metrics = new GatewayMetrics();

  const onReload: Array<(next: EdgeConfig) => unknown> = [
    (next) => warnRestartOnly(initial, next, (c) => resolveQueueBackend(c, process.env, overrides), logger),
    (next) => queue.configure(queueProviders(next), queueClients(next)),
  ];
  const runtime = new ConfigRuntime(
    cmd.config,
    { config: initial, hash: start.hash, loadedAt: new Date() },
    {
      env,
      logger,
      onRejected: () => metrics.countReloadFailure(),
      apply: async (next) => {
        for (const step of onReload) await step(next.config);
      },
    },
  );
  const config = () => runtime.current.config;
  const { health, affinity } = openHealthAndAffinity(
    redis,
    initial.queue.prefix,
    () => config().health,
    redisError,
    logger,
  );
  onReload.push((next) => health.refresh(queueProviders(next).map((p) => p.providerId)));
  // What the prober saw, for weighing first-byte timeouts (README "Provider health").
  const probes = new ProbeClock();
  const prober = new ProviderProber({ config, adapters, health, logger, queue, probes });
  prober.start();
  toClose.add('prober', () => prober.stop());
  runtime.watch();
  toClose.add('config watcher', () => runtime.close());
  process.on('SIGHUP', () => void runtime.reload('SIGHUP'));

  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const app = createApp({
    config,
    configInfo: () => runtime.current,
    queue,
    adapters,
    logger,
    health,
    probes,
    affinity,
    metrics,
    shutdown: shutdown.signal,
  });
  const server = createGatewayServer(app, config, logger);
  onReload.push((next) => applyServerLimits(server, next.gateway));
  return { server, queue, shutdown };
}

/**
 * Chooses the queue backend once, by the rule of README "Queue backend": a URL from --redis or
 * REDIS_URL selects redis over the file; a reload changes limits and providers, not the backend.
 * Logs the choice and why (at warn level when the file's `queue.redis_url` goes unused).
 * @returns the choice, or undefined once the reason it cannot be made (a bad Redis URL) is on stderr
 */
function chooseQueueBackend(
  initial: EdgeConfig,
  overrides: QueueBackendOverrides,
  logger: pino.Logger,
): QueueBackendChoice | undefined {
  let choice: QueueBackendChoice;
  try {
    choice = resolveQueueBackend(initial, process.env, overrides);
  } catch (err) {
    if (!(err instanceof QueueBackendError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return undefined;
  }
  const chosen = {
    queue: choice.backend,
    redis: choice.redisUrl === undefined ? undefined : redactUrl(choice.redisUrl),
    source: choice.source,
  };
  if (choice.backend === 'memory' && initial.queue.redis_url) logger.warn(chosen, describeQueueBackend(choice));
  else logger.info(chosen, describeQueueBackend(choice));
  return choice;
}

/**
 * Composition root of the gateway (docs/architecture.md, "Layering"): parses the command line and the environment,
 * loads and validates edge.yaml, wires the queue backend, adapters and logger into `createApp`,
 * listens, and shuts down gracefully on SIGTERM/SIGINT. Everything with I/O is created here and
 * nowhere else, and registered in one close list that every way out uses.
 */
import {
  RedisProviderQueue,
  connectRedis,
  MemoryHealthStore,
  MemoryProviderQueue,
  MemoryResponseAffinity,
  queueProviders,
  RedisHealthStore,
  RedisResponseAffinity,
  type HealthStore,
  type HealthTransition,
  type ProviderQueue,
  type ResponseAffinity,
} from '@iop/dispatch';
import {
  ConfigRuntime,
  describeQueueBackend,
  formatProblems,
  gatewayEnvironmentSchema,
  loadConfigFile,
  parseListenAddress,
  QueueBackendError,
  readProcessStart,
  redactUrl,
  resolveQueueBackend,
  type EdgeConfig,
  type QueueBackendChoice,
  type QueueBackendOverrides,
} from '@iop/validate';
import { setMaxListeners } from 'node:events';
import { createServer, type Server } from 'node:http';
import pino from 'pino';
import { AdapterRegistry } from './adapters/adapter-registry';
import { createApp } from './app';
import { parseGatewayArgs, USAGE, type GatewayCommand } from './cli-args';
import { ProviderProber } from './health/provider-prober';
import { GatewayMetrics } from './http/gateway-metrics';
import { flushLogs } from '@iop/validate';
import { answerContinue, applyServerLimits, SERVER_OPTIONS } from './http/server-limits';

/**
 * What the running gateway holds open (Redis, queue, adapters and their CLI processes, prober,
 * config watcher, server), closed in the reverse order of opening. One list for every way out:
 * SIGTERM/SIGINT after the drain, a listen failure, a fatal error.
 */
class CloseList {
  private readonly steps: Array<{ name: string; close: () => unknown }> = [];

  /** Registers `close` (sync or async; its errors are ignored) to run at the way out, before what was registered earlier. */
  add(name: string, close: () => unknown): void {
    this.steps.push({ name, close });
  }

  /** Runs every registered step once, newest first, each awaited; @returns the names closed, in order. */
  async closeAll(): Promise<string[]> {
    const closed: string[] = [];
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      await Promise.resolve()
        .then(step.close)
        .catch(() => undefined);
      closed.push(step.name);
    }
    return closed;
  }
}

const toClose = new CloseList();

async function main(): Promise<number> {
  let cmd: GatewayCommand;
  try {
    cmd = parseGatewayArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (cmd.command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (cmd.command === 'validate') return validate(cmd.file);
  return serve(cmd);
}

function validate(file: string): number {
  const result = loadConfigFile(file);
  if (!result.ok) {
    process.stderr.write(`${formatProblems(file, result.problems)}\n${result.problems.length} problem(s) in ${file}\n`);
    return 1;
  }
  const { config } = result;
  const providers = config.nodes.reduce((n, node) => n + node.providers.length, 0);
  process.stdout.write(
    `${file}: valid (${count(config.nodes.length, 'node')}, ${count(providers, 'provider')}, ${count(config.routes.length, 'route')}, sha256 ${result.hash.slice(0, 12)})\n`,
  );
  return 0;
}

async function serve(cmd: Extract<GatewayCommand, { command: 'serve' }>): Promise<number> {
  const start = readProcessStart(gatewayEnvironmentSchema, cmd);
  if ('exitCode' in start) return start.exitCode;
  const { environment, config: initial, env } = start;
  const logger = pino({ level: environment.LOG_LEVEL, base: { service: 'edge-gateway' } });
  // A stdout whose reader is gone must not crash the process nor keep it from exiting.
  process.stdout.on('error', () => undefined);

  // The backend is chosen once, by the rule of README "Configuration" (`queue.backend`): a URL from
  // --redis or REDIS_URL selects redis over the file. A reload changes limits and providers, not the backend.
  const overrides: QueueBackendOverrides = { redis: cmd.redis };
  let choice: QueueBackendChoice;
  try {
    choice = resolveQueueBackend(initial, process.env, overrides);
  } catch (err) {
    if (!(err instanceof QueueBackendError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return 2;
  }
  const chosen = {
    queue: choice.backend,
    redis: choice.redisUrl === undefined ? undefined : redactUrl(choice.redisUrl),
    source: choice.source,
  };
  if (choice.backend === 'memory' && initial.queue.redis_url) logger.warn(chosen, describeQueueBackend(choice));
  else logger.info(chosen, describeQueueBackend(choice));

  // A Redis outage is logged once when it starts and once when it ends (README "Operating a running
  // fleet"), not per provider per probe round: the queue logs its own, this covers health and affinity.
  let redisOutage = false;
  const redisError = (what: string) => (err: unknown) => {
    if (redisOutage) return;
    redisOutage = true;
    logger.warn(
      { err: (err as Error).message, during: what },
      'redis unavailable for provider health and affinity; last known health kept until it is back',
    );
  };
  // Health and affinity share one fail-fast connection; the queue keeps its own.
  const cluster = initial.queue.cluster;
  const redis =
    choice.backend === 'redis' ? connectRedis({ url: choice.redisUrl!, cluster, failFast: true }) : undefined;
  if (redis) toClose.add('redis', () => redis.disconnect());
  redis?.on('error', () => undefined);
  redis?.on('ready', () => {
    if (!redisOutage) return;
    redisOutage = false;
    logger.info('redis reachable again for provider health and affinity');
  });
  // Every health transition once, by the replica that made it (README "Provider health").
  const onTransition = (provider: string, t: HealthTransition) => {
    const line = { provider, from: t.from, to: t.to, reason: t.reason };
    const msg = `provider ${provider}: ${t.from} → ${t.to}${t.reason ? ` (${t.reason})` : ''}`;
    if (t.to === 'healthy') logger.info(line, msg);
    else logger.warn(line, msg);
  };
  const queue: ProviderQueue = redis
    ? new RedisProviderQueue({ redisUrl: choice.redisUrl!, cluster, prefix: initial.queue.prefix, logger })
    : new MemoryProviderQueue();
  toClose.add('queue', () => queue.close());
  await queue.configure(queueProviders(initial));
  const adapters = new AdapterRegistry();
  toClose.add('adapters', () => adapters.close());
  const metrics = new GatewayMetrics();
  // Set once the server exists; a reload before that has no server to apply limits to.
  const listening: { server?: Server } = {};
  const runtime = new ConfigRuntime(
    cmd.config,
    { config: initial, hash: start.hash, loadedAt: new Date() },
    {
      env,
      logger,
      onRejected: () => metrics.countReloadFailure(),
      apply: async (next) => {
        warnRestartOnly(initial, next.config, (c) => resolveQueueBackend(c, process.env, overrides), logger);
        await queue.configure(queueProviders(next.config));
        await health.refresh(queueProviders(next.config).map((p) => p.providerId));
        if (listening.server) applyServerLimits(listening.server, next.config.gateway);
      },
    },
  );
  const config = () => runtime.current.config;
  const healthSettings = () => config().health;
  const health: HealthStore = redis
    ? new RedisHealthStore(
        redis,
        initial.queue.prefix,
        healthSettings,
        () => 3 * healthSettings().interval_ms,
        redisError('health'),
        onTransition,
      )
    : new MemoryHealthStore(healthSettings, onTransition);
  const affinity: ResponseAffinity = redis
    ? new RedisResponseAffinity(redis, initial.queue.prefix, undefined, redisError('affinity'))
    : new MemoryResponseAffinity();
  const prober = new ProviderProber({ config, adapters, health, logger });
  prober.start();
  toClose.add('prober', () => prober.stop());
  runtime.watch();
  toClose.add('config watcher', () => runtime.close());
  process.on('SIGHUP', () => void runtime.reload('SIGHUP'));
  // Aborted when the drain after SIGTERM runs out: running requests end with a 503 or an error event.
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const app = createApp({
    config,
    configInfo: () => runtime.current,
    queue,
    adapters,
    logger,
    health,
    affinity,
    metrics,
    shutdown: shutdown.signal,
  });

  const { host, port } = parseListenAddress(cmd.listen ?? initial.gateway.listen);
  // Connection cap and header/body times (README "Security"), applied again on every reload.
  const httpServer = createServer(SERVER_OPTIONS, app);
  applyServerLimits(httpServer, initial.gateway);
  answerContinue(httpServer, () => config().gateway.max_body_bytes, app);
  listening.server = httpServer;
  const server = await listen(httpServer, host, port).catch((err: Error) => {
    process.stderr.write(`cannot listen on ${host}:${port}: ${err.message}\n`);
    return undefined;
  });
  if (!server) {
    logger.info({ closed: await toClose.closeAll() }, 'stopped: cannot listen');
    await flushLogs(logger);
    return 1;
  }
  // After a drain this finds the server closed; on a fatal error it cuts every connection.
  toClose.add('server', async () => {
    if (!server.listening) return;
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  server.keepAliveTimeout = 65_000;
  const address = server.address();
  const bound = typeof address === 'object' && address ? `${address.address}:${address.port}` : `${host}:${port}`;
  logger.info({ listen: bound, queue: queue.backend, nodes: initial.nodes.length }, 'edge-gateway listening');
  // The signal handlers are in place before the line that says the gateway listens: a SIGTERM
  // sent as soon as it is read drains instead of killing the process with the default action.
  const stopped = new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down: no new connections, waiting for in-flight requests');
      const closed = new Promise<void>((r) => server.close(() => r()));
      // Keep-alive connections turn idle as their requests finish: close each one then, not after keepAliveTimeout.
      server.closeIdleConnections();
      const sweep = setInterval(() => server.closeIdleConnections(), 100);
      const grace = setTimeout(() => {
        // Requests still running get their 503 or error event first; the connections close a moment later.
        shutdown.abort();
        setTimeout(() => server.closeAllConnections(), SHUTDOWN_ANSWER_MS).unref();
      }, environment.IOP_SHUTDOWN_GRACE_MS);
      await closed;
      clearInterval(sweep);
      clearTimeout(grace);
      logger.info({ closed: await toClose.closeAll() }, 'stopped');
      await flushLogs(logger);
      resolve(0);
    };
    process.once('SIGTERM', () => void stop('SIGTERM'));
    process.once('SIGINT', () => void stop('SIGINT'));
  });
  // One line on stdout for scripts and tests that wait for the port.
  process.stdout.write(`edge-gateway listening on http://${bound}\n`);
  return stopped;
}

/** How long requests cut by the end of the drain get to write their 503 or error event before their connections close, in ms. */
const SHUTDOWN_ANSWER_MS = 200;

/** "1 node", "2 nodes". */
const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/** Resolves once `server` listens on host:port; rejects with the bind error (port taken, unknown address). */
function listen(server: Server, host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * Settings a reload cannot change in a running process (the queue backend and its Redis, the key
 * prefix, the listen address): a change is logged as needing a restart; the process keeps the old
 * ones. The backend and URL are compared as resolved (`resolve`), so a file change that --redis or
 * REDIS_URL overrides anyway is not reported.
 */
function warnRestartOnly(
  initial: EdgeConfig,
  next: EdgeConfig,
  resolve: (c: EdgeConfig) => QueueBackendChoice,
  logger: pino.Logger,
): void {
  const [before, after] = [resolve(initial), resolve(next)];
  const fixed: Array<[string, unknown, unknown]> = [
    ['gateway.listen', initial.gateway.listen, next.gateway.listen],
    ['queue.backend', before.backend, after.backend],
    ['queue.redis_url', before.redisUrl, after.redisUrl],
    ['queue.prefix', initial.queue.prefix, next.queue.prefix],
  ];
  for (const [key, was, now] of fixed) {
    if (was !== now)
      logger.warn(
        { key },
        `${key} changed: it takes effect only after a restart; this process keeps the value it started with`,
      );
  }
}

/** Longest a fatal error waits for the close list before exiting anyway, in ms. */
const FATAL_CLOSE_MS = 5_000;

/** A fault nothing handled (thrown by main, or uncaught later): print it, close what is open (bounded), exit 1. */
function fatal(err: unknown): void {
  process.stderr.write(`edge-gateway failed: ${(err as Error)?.stack ?? String(err)}\n`);
  const deadline = new Promise((r) => setTimeout(r, FATAL_CLOSE_MS).unref());
  void Promise.race([toClose.closeAll(), deadline]).finally(() => process.exit(1));
}

process.once('uncaughtException', fatal);
main().then((code) => process.exit(code), fatal);

/**
 * Composition root of the gateway (DESIGN §2, §7): parses the command line, loads and validates
 * edge.yaml, wires the queue backend, adapters and logger into `createApp`, listens, and shuts
 * down gracefully on SIGTERM/SIGINT. Everything with I/O is created here and nowhere else.
 */
import { BullmqProviderQueue, MemoryProviderQueue, queueProviders, type ProviderQueue } from '@iop/dispatch';
import { startFakeUpstream } from '@iop/fake-upstream';
import { formatProblems, loadConfigFile, resolveQueueBackend, type EdgeConfig } from '@iop/validate';
import type { Server } from 'node:http';
import pino from 'pino';
import { AdapterRegistry } from './adapters/adapter-registry';
import { createApp } from './app';
import { parseGatewayArgs, splitHostPort, USAGE, type GatewayCommand } from './cli-args';

/** Longest a SIGTERM waits for in-flight requests before closing the rest, in ms. */
const SHUTDOWN_GRACE_MS = Number(process.env.IOP_SHUTDOWN_GRACE_MS ?? 30_000);

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
    `${file}: valid (${config.nodes.length} nodes, ${providers} providers, ${config.routes.length} routes, sha256 ${result.hash.slice(0, 12)})\n`,
  );
  return 0;
}

async function serve(cmd: Extract<GatewayCommand, { command: 'serve' }>): Promise<number> {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info', base: { service: 'edge-gateway' } });
  const env = cmd.redis ? { ...process.env, REDIS_URL: cmd.redis } : process.env;
  const loaded = loadConfigFile(cmd.config, env);
  if (!loaded.ok) {
    process.stderr.write(`${formatProblems(cmd.config, loaded.problems)}\nrefusing to start: ${cmd.config} is invalid\n`);
    return 1;
  }
  let config: EdgeConfig = loaded.config;
  if (cmd.redis) config = { ...config, queue: { ...config.queue, redis_url: cmd.redis, backend: config.queue.backend ?? 'redis' } };

  const demo = cmd.demoUpstream ? await startFakeUpstream({ ...splitHostPort(cmd.demoUpstream), name: 'demo', models: [] }) : undefined;
  if (demo) logger.info({ url: demo.url }, 'demo upstream listening');

  const choice = resolveQueueBackend(config, env);
  const queue: ProviderQueue =
    choice.backend === 'redis'
      ? new BullmqProviderQueue({ redisUrl: choice.redisUrl!, prefix: config.queue.prefix, logger })
      : new MemoryProviderQueue();
  await queue.configure(queueProviders(config));
  const adapters = new AdapterRegistry();
  const app = createApp({ config: () => config, queue, adapters, logger });

  const { host, port } = splitHostPort(cmd.listen ?? config.gateway.listen);
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(port, host, () => resolve(s));
    s.once('error', reject);
  }).catch((err: Error) => {
    process.stderr.write(`cannot listen on ${host}:${port}: ${err.message}\n`);
    return undefined;
  });
  if (!server) {
    await Promise.allSettled([queue.close(), demo?.close()]);
    return 1;
  }
  server.keepAliveTimeout = 65_000;
  const address = server.address();
  const bound = typeof address === 'object' && address ? `${address.address}:${address.port}` : `${host}:${port}`;
  logger.info({ listen: bound, queue: queue.backend, nodes: config.nodes.length }, 'edge-gateway listening');
  // One line on stdout for scripts and tests that wait for the port.
  process.stdout.write(`edge-gateway listening on http://${bound}\n`);

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down: no new connections, waiting for in-flight requests');
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
      await closed;
      clearTimeout(grace);
      await Promise.allSettled([queue.close(), adapters.close(), demo?.close()]);
      logger.info('stopped');
      resolve(0);
    };
    process.once('SIGTERM', () => void stop('SIGTERM'));
    process.once('SIGINT', () => void stop('SIGINT'));
  });
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`edge-gateway failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);

import {
  MemoryHealthStore,
  MemoryProviderQueue,
  MemoryResponseAffinity,
  queueProviders,
  queueClients,
  type HealthStore,
  type ProviderQueue,
} from '@iop/dispatch';
import { parseConfigText, type EdgeConfig } from '@iop/validate';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import pino from 'pino';
import type { AdapterFactory } from '../adapters/adapter';
import { AdapterRegistry, createAdapter } from '../adapters/adapter-registry';
import { createApp } from '../app';
import { createGatewayServer } from '../compose/gateway-server';
import { ProbeClock } from '../health/probe-clock';
import { ProviderProber } from '../health/provider-prober';

/** A gateway listening on a free loopback port, built in-process with `createApp`. */
export interface TestGateway {
  url: string;
  /** Base URL for the openai client: `${url}/v1`. */
  baseURL: string;
  config: EdgeConfig;
  queue: ProviderQueue;
  /**
   * Present when started with `{ health: true }` (an in-process store and its prober) or with
   * `{ health: store }` (that store, probed only with `probe: true`: else the test decides what is observed).
   */
  health?: HealthStore;
  prober?: ProviderProber;
  close(): Promise<void>;
}

/**
 * Parses `yaml` (with `${VAR}` from `env`) and starts a real listening gateway on 127.0.0.1:0.
 * `opts.health`: `true` for a `MemoryHealthStore` probed every `health.interval_ms`, or a store of
 * the test's own (e.g. a `RedisHealthStore`) that nothing probes unless `opts.probe` is true. The
 * prober counts requests in flight on `queue` and notes its probes where the dispatch weighs
 * first-byte timeouts by them (`ProbeClock`), as the gateway's does. `opts.adapterFactory` builds the
 * adapters (default: the real ones, `createAdapter`). `opts.gatewayServer`: serve through the
 * gateway's own HTTP server (`createGatewayServer`: connection limits, header and body times,
 * answers to requests Node's parser refuses) instead of a plain `http.createServer(app)`.
 * @throws Error listing the config problems when the YAML is invalid.
 */
export async function startTestGateway(
  yaml: string,
  env: Record<string, string> = {},
  queue: ProviderQueue = new MemoryProviderQueue(),
  opts: {
    health?: boolean | HealthStore;
    probe?: boolean;
    adapterFactory?: AdapterFactory;
    gatewayServer?: boolean;
  } = {},
): Promise<TestGateway> {
  const loaded = parseConfigText(yaml, env, 'test.yaml');
  if (!loaded.ok) throw new Error(`test config invalid: ${JSON.stringify(loaded.problems, null, 2)}`);
  const config = loaded.config;
  await queue.configure(queueProviders(config), queueClients(config));
  const adapters = new AdapterRegistry(opts.adapterFactory ?? createAdapter);
  const logger = pino({ level: 'silent' });
  const health = opts.health === true ? new MemoryHealthStore(() => config.health) : opts.health || undefined;
  const probed = opts.health === true || opts.probe === true;
  const probes = new ProbeClock();
  const prober =
    health && probed
      ? new ProviderProber({ config: () => config, adapters, health, logger, queue, probes })
      : undefined;
  prober?.start();
  const app = createApp({
    config: () => config,
    queue,
    adapters,
    logger,
    health,
    probes,
    affinity: new MemoryResponseAffinity(),
  });
  const server: Server = await new Promise((resolve) => {
    if (!opts.gatewayServer) {
      const s = createServer(app).listen(0, '127.0.0.1', () => resolve(s));
      return;
    }
    const s = createGatewayServer(app, () => config, logger);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    baseURL: `${url}/v1`,
    config,
    queue,
    health,
    prober,
    close: async () => {
      await prober?.stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await queue.close();
      await adapters.close();
    },
  };
}

import { freePort } from '@iop/dispatch/testing';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BENCH_MODEL, benchGatewayYaml, clientHeaders } from './gateway-config';
import { portkeyEntry, portkeyHeaders, type BenchPaths } from './target-files';
export type { BenchPaths } from './target-files';
import type { ServiceProcess, ServiceSet, ServiceSpec } from './service-process';
import { RECOMMENDED_NODE_ARGS, TARGET_LABELS, type TargetId } from './target-ids';
export * from './target-ids';

/** A running target: where to send requests and which processes serve them. */
export interface BenchTarget {
  id: TargetId;
  label: string;
  /**
   * Chat Completions URLs. Several (the 3 replicas) are used round-robin: load connection i and
   * stream i go to `urls[i % urls.length]`.
   */
  urls: string[];
  /** Headers this target needs on every request (Portkey's provider and custom host). */
  headers: Record<string, string>;
  /**
   * With `gateway.clients` configured: each client's key, one request after the other
   * (`FixedLoadSpec.rotatingHeaders`), so that a load is every client's; `headers` has the first.
   */
  rotatingHeaders?: Record<string, string>[];
  /** The server processes under test (none for `direct`: the upstream is shared by all targets). */
  processes: ServiceProcess[];
}

/** `LOG_LEVEL` of a gateway: `default` leaves it unset (the shipped `info`: one access-log line per request). */
type GatewayLogLevel = 'default' | 'warn';

/** Options of one gateway launch. */
export interface LaunchOptions {
  /** Extra arguments for `node` itself, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  /** A name suffix so a fresh copy of a target (for RSS or a profile) is told apart in errors. */
  tag?: string;
  /** Redis backend: this redis-server instead of the one the throughput targets share. */
  redisUrl?: string;
  /**
   * `node-floor` only: `PING`s per request on `redisUrl` (the Redis-cost scenario's round-trip floor;
   * `floor-proxy.ts`). @defaultValue 0
   */
  redisRoundTrips?: number;
  /** The pool provider's `max_concurrency` (default `BENCH_MAX_CONCURRENCY`: nothing waits). */
  maxConcurrency?: number;
  /** Configure `gateway.clients` (`BenchGatewayConfig.clients`); loads send the clients' keys in turn (`rotatingHeaders`). */
  clients?: boolean;
  /** With `clients`: give each client token budgets (`BenchGatewayConfig.budgets`). */
  budgets?: boolean;
  /** Run each of the target's `node` processes under this command, e.g. valgrind (`NodeWrapper`). */
  wrapper?: NodeWrapper;
}

/**
 * A command the target's `node` runs under: `<command> <args…> node <node args…>` (e.g.
 * `valgrind --tool=callgrind …`). The process the bench then holds (`ServiceProcess.pid`) is the
 * wrapper's, which for valgrind is the measured program itself.
 */
export interface NodeWrapper {
  command: string;
  /** Arguments before `node`. */
  args: string[];
  /** Longest wait for the ready line, ms (a program under valgrind starts tens of times slower). */
  readyTimeoutMs: number;
}

/** `command` and `args` of a `node` process, under `wrapper` when there is one. */
function nodeCommand(
  args: string[],
  wrapper: NodeWrapper | undefined,
): Pick<ServiceSpec, 'command' | 'args' | 'readyTimeoutMs'> {
  if (!wrapper) return { command: process.execPath, args };
  return {
    command: wrapper.command,
    args: [...wrapper.args, process.execPath, ...args],
    readyTimeoutMs: wrapper.readyTimeoutMs,
  };
}

/**
 * Starts the upstream, Redis and the targets as separate processes on loopback, and keeps track
 * of them in a `ServiceSet` so the caller can stop everything on any exit path.
 */
export class TargetLauncher {
  private upstreamV1 = '';
  private redisUrl: Promise<string> | undefined;
  private configCount = 0;
  private bullmqGroups = 0;

  constructor(
    private readonly paths: BenchPaths,
    private readonly services: ServiceSet,
  ) {}

  /** The fake upstream's `/v1` URL once `startUpstream` has run. */
  get upstreamUrl(): string {
    if (!this.upstreamV1) throw new Error('the upstream has not been started');
    return this.upstreamV1;
  }

  /** Starts the one fake upstream every target forwards to. @returns its process. */
  async startUpstream(): Promise<ServiceProcess> {
    const upstream = await this.services.start({
      name: 'fake-upstream',
      command: process.execPath,
      args: [this.paths.upstreamMain, '--port', '0', '--host', '127.0.0.1', '--name', 'bench-upstream'],
      ready: /fake-upstream listening on (http:\/\/\S+)/,
    });
    this.upstreamV1 = upstream.announced.replace(/\/$/, '');
    return upstream;
  }

  /**
   * A fake upstream of its own that keeps the call journal (`--journal`; `GET <origin>/__calls`), e.g.
   * for the `flow` scenario. It is one of the bench's services: stop it with `stopService`.
   */
  async startJournalUpstream(name: string): Promise<{ v1: string; origin: string; process: ServiceProcess }> {
    const upstream = await this.services.start({
      name,
      command: process.execPath,
      args: [this.paths.upstreamMain, '--port', '0', '--host', '127.0.0.1', '--name', name, '--journal'],
      ready: /fake-upstream listening on (http:\/\/\S+)/,
    });
    const v1 = upstream.announced.replace(/\/$/, '');
    return { v1, origin: v1.replace(/\/v1$/, ''), process: upstream };
  }

  /**
   * `replicas` gateways of one `edge.yaml` text with the Redis backend on `redisUrl` (LOG_LEVEL=warn: the flow scenario counts Redis work, not logging).
   * @returns each replica's origin (`http://127.0.0.1:PORT`) and the processes.
   */
  async startGateways(
    name: string,
    yaml: string,
    replicas: number,
    redisUrl: string,
  ): Promise<{ origins: string[]; processes: ServiceProcess[] }> {
    const file = this.configFile();
    writeFileSync(file, yaml);
    const processes: ServiceProcess[] = [];
    for (let i = 0; i < replicas; i++)
      processes.push(await this.startGateway(`${name}#${i + 1}`, file, ['--redis', redisUrl], 'warn', {}));
    return { origins: processes.map((p) => p.announced), processes };
  }

  /** Starts target `id` (fresh processes every call, except the shared upstream for `direct`). */
  async launch(id: TargetId, opts: LaunchOptions = {}): Promise<BenchTarget> {
    const label = TARGET_LABELS[id];
    switch (id) {
      case 'direct':
        return { id, label, urls: [`${this.upstreamUrl}/chat/completions`], headers: {}, processes: [] };
      case 'node-floor':
      case 'express-floor': {
        const name = `${id}${opts.tag ?? ''}`;
        const script = id === 'node-floor' ? this.paths.bareProxy : this.paths.expressFloor;
        const args = [
          ...(opts.nodeArgs ?? []),
          ...[script, '--upstream', this.upstreamUrl, '--model', BENCH_MODEL, '--port', '0'],
          ...(opts.redisRoundTrips && opts.redisUrl
            ? ['--redis', opts.redisUrl, '--redis-round-trips', String(opts.redisRoundTrips)]
            : []),
        ];
        const proxy = await this.services.start({
          name,
          ...nodeCommand(args, opts.wrapper),
          ready: /(?:bare-proxy|express-floor) listening on (http:\/\/\S+)/,
        });
        return { id, label, urls: [`${proxy.announced}/v1/chat/completions`], headers: {}, processes: [proxy] };
      }
      case 'memory':
      case 'memory-warn':
      case 'memory-semi4': {
        const nodeArgs = id === 'memory-semi4' ? [...RECOMMENDED_NODE_ARGS, ...(opts.nodeArgs ?? [])] : opts.nodeArgs;
        const gw = await this.gateway(
          `${id}${opts.tag ?? ''}`,
          { backend: 'memory' },
          id === 'memory-warn' ? 'warn' : 'default',
          { ...opts, nodeArgs },
        );
        return { id, label, urls: [`${gw.announced}/v1/chat/completions`], headers: {}, processes: [gw] };
      }
      case 'bullmq-1':
      case 'bullmq-3': {
        const redisUrl = opts.redisUrl ?? (await this.redis());
        const prefix = `iop-bench-${++this.bullmqGroups}`;
        const replicas: ServiceProcess[] = [];
        for (let i = 0; i < (id === 'bullmq-3' ? 3 : 1); i++) {
          replicas.push(
            await this.gateway(
              `${id}${opts.tag ?? ''}#${i + 1}`,
              { backend: 'redis', prefix, redisUrl },
              'default',
              opts,
            ),
          );
        }
        return {
          id,
          label,
          urls: replicas.map((r) => `${r.announced}/v1/chat/completions`),
          headers: opts.clients ? clientHeaders()[0] : {},
          ...(opts.clients ? { rotatingHeaders: clientHeaders() } : {}),
          processes: replicas,
        };
      }
      case 'portkey': {
        const { entry, version } = portkeyEntry(this.paths.root);
        const port = await freePort();
        const name = `portkey${opts.tag ?? ''}`;
        const args = [...(opts.nodeArgs ?? []), '--require', this.paths.preload, entry, `--port=${port}`, '--headless'];
        const pk = await this.services.start({
          name,
          ...nodeCommand(args, opts.wrapper),
          env: { NODE_ENV: 'production' },
          ready: /Ready for connections/,
        });
        return {
          id,
          label: `${label} ${version}`,
          urls: [`http://127.0.0.1:${port}/v1/chat/completions`],
          headers: portkeyHeaders(this.upstreamUrl),
          processes: [pk],
        };
      }
    }
  }

  /** Stops a target's own processes (the shared upstream and Redis keep running). */
  async shutdown(target: BenchTarget): Promise<void> {
    await Promise.all(target.processes.map((p) => this.services.stop(p)));
  }

  private async gateway(
    name: string,
    queue: { backend: 'memory' } | { backend: 'redis'; prefix: string; redisUrl: string },
    logLevel: GatewayLogLevel,
    opts: LaunchOptions,
  ): Promise<ServiceProcess> {
    const file = this.configFile();
    writeFileSync(
      file,
      benchGatewayYaml({
        upstreamUrl: this.upstreamUrl,
        backend: queue.backend,
        prefix: 'prefix' in queue ? queue.prefix : undefined,
        maxConcurrency: opts.maxConcurrency,
        clients: opts.clients,
        budgets: opts.budgets,
      }),
    );
    const redisArgs = queue.backend === 'redis' ? ['--redis', queue.redisUrl] : [];
    return this.startGateway(name, file, redisArgs, logLevel, opts);
  }

  /**
   * A fresh path for a gateway's edge.yaml, in a directory that holds config files only: a gateway
   * watches its config file's directory (README "Config refresh"), so its own log file, written
   * on every request, must not sit beside it, or every log line wakes the watcher.
   */
  private configFile(): string {
    const dir = path.join(this.paths.workDir, 'config');
    mkdirSync(dir, { recursive: true });
    return path.join(dir, `edge-${++this.configCount}.yaml`);
  }

  private startGateway(
    name: string,
    file: string,
    redisArgs: string[],
    logLevel: GatewayLogLevel,
    opts: LaunchOptions,
  ): Promise<ServiceProcess> {
    const args = [
      ...(opts.nodeArgs ?? []),
      ...[this.paths.gatewayMain, 'serve', '--config', file, '--listen', '127.0.0.1:0', ...redisArgs],
    ];
    return this.services.start({
      name: `gateway ${name}`,
      ...nodeCommand(args, opts.wrapper),
      // An empty variable counts as unset: LOG_LEVEL '' is the shipped default (info), and a REDIS_URL in the
      // bench's own environment cannot switch the memory target.
      env: { LOG_LEVEL: logLevel === 'default' ? '' : logLevel, REDIS_URL: '', IOP_SHUTDOWN_GRACE_MS: '2000' },
      // Logs go to a file, as a deployed gateway's would, not to a pipe the bench has to drain.
      stdoutFile: path.join(this.paths.workDir, `${name.replace(/[^\w.-]+/g, '_')}.log`),
      ready: /edge-gateway listening on (http:\/\/\S+)/,
    });
  }

  /** One redis-server for every Redis-backend target (each group has its own key prefix), no persistence. */
  redis(): Promise<string> {
    this.redisUrl ??= this.startRedis('redis-server').then((r) => r.url);
    return this.redisUrl;
  }

  /**
   * A redis-server of its own (no persistence), e.g. one whose counters and CPU only one scenario
   * touches; stop it with `stopService`. It is one of the bench's services, so every exit path stops it.
   * With `wrapper` (e.g. callgrind) it runs as `<command> <args…> redis-server …`.
   */
  async startRedis(name: string, wrapper?: NodeWrapper): Promise<{ url: string; process: ServiceProcess }> {
    const port = await freePort();
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const process = await this.services.start({
      name,
      command: wrapper ? wrapper.command : 'redis-server',
      args: wrapper ? [...wrapper.args, 'redis-server', ...args] : args,
      ready: /Ready to accept connections/,
      ...(wrapper ? { readyTimeoutMs: wrapper.readyTimeoutMs } : {}),
    });
    return { url: `redis://127.0.0.1:${port}`, process };
  }

  /** Stops one process started through this launcher (e.g. a Redis of `startRedis`). */
  async stopService(service: ServiceProcess): Promise<void> {
    await this.services.stop(service);
  }
}

import { freePort } from '@iop/dispatch/testing';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkFleetConfig } from './fleet-config';
import type { FleetOptions, FleetReplica, FleetUpstream, LocalFleet } from './fleet-shapes';
import { findHaproxy, HAPROXY_CONFIG, haproxyCommand, haproxyServers } from './haproxy';
import { ManagedProcess } from './managed-process';
import { Supervisor } from './supervisor';

/** The workspace root (this file is tools/fleet/src/*.ts, or bundled as dist/tools/fleet/main.js). */
export const WORKSPACE_ROOT = path.resolve(__dirname, '../../..');

/** The edge.yaml every process of the local fleet reads. */
export const FLEET_CONFIG = 'deploy/local/edge.yaml';

/**
 * The fleet's fake GPU servers, each reached by the file through its `${VAR}` (in {@link FLEET_CONFIG}:
 * `llama-a` on `FLEET_UPSTREAM_A`, `llama-b` on `FLEET_UPSTREAM_B`); they run whatever the file says.
 */
export const FLEET_UPSTREAMS = [
  { upstream: 'gpu-a', env: 'FLEET_UPSTREAM_A' },
  { upstream: 'gpu-b', env: 'FLEET_UPSTREAM_B' },
] as const;

/** Replicas behind HAProxy; deploy/haproxy/haproxy.cfg names gw1..gw3. */
export const REPLICAS = 3;

export type { FleetOptions, FleetReplica, FleetUpstream, LocalFleet } from './fleet-shapes';

/**
 * Starts the local fleet of README "Running a fleet" from the built `dist/` (edge-gateway,
 * status-exporter, fake-upstream), with `opts.config` ({@link FLEET_CONFIG}) and
 * {@link HAPROXY_CONFIG}. Every process listens on 127.0.0.1 (HAProxy on `bindHost`), and every
 * one is supervised: a crash is logged and followed by a restart with back-off (`Supervisor`).
 * @throws Error naming what is missing (a build, haproxy, redis-server), the problems of an invalid
 * config file, or the process that failed.
 */
export async function startLocalFleet(opts: FleetOptions): Promise<LocalFleet> {
  const root = opts.root ?? WORKSPACE_ROOT;
  const configFile = path.resolve(root, opts.config ?? FLEET_CONFIG);
  const served = checkFleetConfig(
    configFile,
    FLEET_UPSTREAMS.map((u) => u.env),
  );
  const say = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const dist = (p: string) => {
    const file = path.join(root, 'dist', p, 'main.js');
    if (!existsSync(file))
      throw new Error(
        `${file} is missing: run "npx nx run-many -t build -p edge-gateway status-exporter fake-upstream" first`,
      );
    return file;
  };
  const gatewayMain = dist('apps/edge-gateway');
  const exporterMain = dist('apps/status-exporter');
  const upstreamMain = dist('tools/fake-upstream');
  const haproxy = findHaproxy();
  mkdirSync(opts.logDir, { recursive: true });
  const log = (name: string) => path.join(opts.logDir, `${name}.log`);
  // The runtime API's socket: a short path (Unix sockets allow about 100 bytes), private to this fleet.
  const runtimeDir = mkdtempSync(path.join(tmpdir(), 'iop-fleet-'));
  const adminSocket = path.join(runtimeDir, 'haproxy.sock');
  const supervisor = new Supervisor({ ...opts.supervision, log: say });
  const started: ManagedProcess[] = [];
  const run = async (proc: ManagedProcess) => {
    started.push(proc);
    await proc.start();
    supervisor.watch(proc);
    return proc;
  };
  const close = async () => {
    supervisor.close();
    // HAProxy first (no new requests), then the gateways drain, then what they use.
    for (const proc of [...started].reverse()) await proc.stop('SIGTERM');
    for (const proc of started) proc.closeLog();
    started.length = 0;
    rmSync(runtimeDir, { recursive: true, force: true });
  };

  try {
    let redisUrl = opts.redisUrl;
    let redis: ManagedProcess | undefined;
    if (!redisUrl) {
      const port = await freePort();
      redis = await run(
        new ManagedProcess({
          name: 'redis',
          command: 'redis-server',
          args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
          ready: /Ready to accept connections/,
          logFile: log('redis'),
        }),
      ).catch((err: Error) => {
        throw /not found/.test(err.message)
          ? new Error(
              'redis-server not found: install the Debian package redis-server (apt-get install -y redis-server) or pass a Redis URL',
            )
          : err;
      });
      redisUrl = `redis://127.0.0.1:${port}`;
    }

    const upstreams: FleetUpstream[] = [];
    const env: Record<string, string> = {
      REDIS_URL: redisUrl,
      LOG_LEVEL: opts.logLevel ?? 'info',
      IOP_SHUTDOWN_GRACE_MS: String(opts.shutdownGraceMs ?? 30_000),
    };
    for (const provider of FLEET_UPSTREAMS) {
      const port = await freePort();
      const proc = await run(
        new ManagedProcess({
          name: provider.upstream,
          command: process.execPath,
          args: [upstreamMain, '--port', String(port), '--name', provider.upstream, '--models', 'llama-3.1-8b'],
          ready: /listening on/,
          logFile: log(provider.upstream),
        }),
      );
      env[provider.env] = `http://127.0.0.1:${port}/v1`;
      upstreams.push({
        variable: provider.env,
        providers: served.get(provider.env) ?? [],
        origin: `http://127.0.0.1:${port}`,
        process: proc,
      });
    }

    const replicas: FleetReplica[] = [];
    for (let i = 1; i <= REPLICAS; i++) {
      const port = await freePort();
      const proc = new ManagedProcess({
        name: `gw${i}`,
        command: process.execPath,
        args: [
          '--max-semi-space-size=4',
          gatewayMain,
          'serve',
          '--config',
          configFile,
          '--listen',
          `127.0.0.1:${port}`,
        ],
        cwd: root,
        env,
        ready: /edge-gateway listening on/,
        logFile: log(`gw${i}`),
      });
      replicas.push({ name: `gw${i}`, port, process: await run(proc) });
    }

    const exporterPort = opts.exporterPort || (await freePort());
    await run(
      new ManagedProcess({
        name: 'status-exporter',
        command: process.execPath,
        args: [exporterMain, '--config', configFile, '--listen', `127.0.0.1:${exporterPort}`],
        cwd: root,
        env,
        ready: /status-exporter listening on/,
        logFile: log('status-exporter'),
      }),
    );

    const lbPort = opts.port || (await freePort());
    const statsPort = opts.statsPort || (await freePort());
    const statsUrl = `http://127.0.0.1:${statsPort}`;
    const lb = await run(
      new ManagedProcess({
        name: 'haproxy',
        command: haproxy,
        args: ['-db', '-f', HAPROXY_CONFIG],
        cwd: root,
        env: {
          IOP_LB_BIND: `${opts.bindHost ?? '127.0.0.1'}:${lbPort}`,
          IOP_LB_STATS_BIND: `127.0.0.1:${statsPort}`,
          IOP_LB_ADMIN_SOCKET: adminSocket,
          ...Object.fromEntries(replicas.map((r, i) => [`IOP_GATEWAY_${i + 1}`, `127.0.0.1:${r.port}`])),
        },
        logFile: log('haproxy'),
      }),
    );

    const servers = () => haproxyServers(statsUrl);
    const waitForServer = async (server: string, ok: (status: string) => boolean, timeoutMs = 15_000) => {
      const deadline = Date.now() + timeoutMs;
      let last = 'no answer';
      for (;;) {
        if (!lb.running) throw new Error(`haproxy exited:\n${lb.output()}`);
        const found = (await servers().catch(() => [])).find((s) => s.backend === 'gateways' && s.server === server);
        if (found) {
          last = found.status;
          if (ok(found.status)) return;
        }
        if (Date.now() > deadline) throw new Error(`HAProxy server ${server} is "${last}" after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    for (const r of replicas) await waitForServer(r.name, (s) => s === 'UP');

    const restartReplica = async (index: number) => {
      const replica = replicas[index];
      const server = `gateways/${replica.name}`;
      await supervisor.hold(replica.process, async () => {
        await haproxyCommand(adminSocket, `set server ${server} state maint`);
        if (replica.process.running) {
          const code = await replica.process.stop('SIGTERM', (opts.shutdownGraceMs ?? 30_000) + 15_000);
          if (code !== 0) say(`fleet: rolling restart: ${replica.name} exited with ${code} on SIGTERM`);
        }
        await replica.process.start();
        await haproxyCommand(adminSocket, `set server ${server} state ready`);
        await waitForServer(replica.name, (s) => s === 'UP');
      });
    };
    return {
      url: `http://127.0.0.1:${lbPort}/v1`,
      exporterUrl: `http://127.0.0.1:${exporterPort}`,
      statsUrl,
      redisUrl,
      configFile,
      redis,
      replicas,
      upstreams,
      servers,
      waitForServer,
      restartReplica,
      async rollingRestart() {
        const failures: string[] = [];
        for (const [i, replica] of replicas.entries()) {
          say(`fleet: rolling restart: ${replica.name}${replica.process.running ? '' : ' (not running: starting it)'}`);
          await restartReplica(i).catch((err: Error) => {
            failures.push(`${replica.name}: ${err.message.split('\n')[0]}`);
            say(`fleet: rolling restart: ${replica.name} failed: ${err.message}`);
          });
        }
        say(`fleet: rolling restart done${failures.length ? `, ${failures.length} failed` : ''}`);
        return failures;
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, spawnRedis } from './redis-server';
import { startTcpProxy, type TcpProxy } from './tcp-proxy';

/** A real Redis Cluster of `redis-server --cluster-enabled yes` processes on 127.0.0.1, for one test file. */
export interface TestRedisCluster {
  /** One seed node per master, `redis://127.0.0.1:<port>`. */
  readonly urls: readonly string[];
  /** Ports of the masters, in start order. */
  readonly ports: readonly number[];
  /** Stops every node (SIGTERM) and removes the cluster's files. */
  stop(): Promise<void>;
}

/**
 * Starts `masters` (default 3) cluster-enabled `redis-server`s without persistence, joins them with
 * `redis-cli --cluster create` (no replicas) and resolves once `CLUSTER INFO` says `cluster_state:ok`
 * and every slot is served.
 * @throws Error naming the Debian package when `redis-server` or `redis-cli` is missing.
 */
export async function startRedisCluster(masters = 3): Promise<TestRedisCluster> {
  // A busy machine (CI on 2 cores) can make the join time out once; a second cluster on fresh ports is cheap.
  try {
    return await startOnce(masters);
  } catch {
    return startOnce(masters);
  }
}

async function startOnce(masters: number): Promise<TestRedisCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'iop-cluster-'));
  const ports: number[] = [];
  while (ports.length < masters) {
    const port = await freePort();
    // The cluster bus listens on port + 10000.
    if (port + 10000 < 65536 && !ports.includes(port)) ports.push(port);
  }
  const nodes: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(
      nodes.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      nodes.push(
        await spawnRedis(port, [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          path.join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          '5000',
          '--dir',
          dir,
        ]),
      );
    }
    await promisify(execFile)(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      {
        timeout: 40_000,
      },
    ).catch((e: NodeJS.ErrnoException) => {
      throw e.code === 'ENOENT'
        ? new Error('redis-cli not found: install the Debian package redis-tools (comes with redis-server)')
        : e;
    });
    await waitForClusterOk(ports);
  } catch (e) {
    await stop();
    throw e;
  }
  return { urls: ports.map((p) => `redis://127.0.0.1:${p}`), ports, stop };
}

/**
 * Polls `CLUSTER INFO` on every node over its own plain connection until each reports
 * `cluster_state:ok`, all 16384 slots assigned and every master known. An ioredis `Cluster` client
 * is not used here: its `connect()` can wait for ever on a cluster that is still joining.
 * @throws Error after 20 s naming the ports.
 */
async function waitForClusterOk(ports: readonly number[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const infos = await Promise.all(ports.map((port) => clusterInfo(port)));
    const formed = infos.every(
      (i) =>
        i.includes('cluster_state:ok') &&
        i.includes('cluster_slots_assigned:16384') &&
        i.includes(`cluster_known_nodes:${ports.length}`),
    );
    if (formed) return;
    if (Date.now() > deadline)
      throw new Error(`the Redis Cluster on ports ${ports.join(', ')} did not reach cluster_state:ok within 20 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `CLUSTER INFO` of one node, or '' when it does not answer within a second. */
async function clusterInfo(port: number): Promise<string> {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    connectTimeout: 1000,
    commandTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.cluster('INFO')) as string;
  } catch {
    return '';
  } finally {
    client.disconnect();
  }
}

/**
 * Puts a `TcpProxy` in front of every master of `cluster` and makes each master announce its proxy's
 * port (`cluster-announce-port`; the bus keeps its own port), as a cluster behind NAT does, so a
 * cluster client seeded with a proxy's URL reaches every node through the proxies. Resolves the
 * proxies, in the order of `cluster.ports`, once every node's `CLUSTER SLOTS` names only proxy ports.
 * @throws Error after 20 s when the announced ports do not spread.
 */
export async function proxyClusterMasters(cluster: TestRedisCluster): Promise<TcpProxy[]> {
  const proxies = await Promise.all(cluster.ports.map((port) => startTcpProxy(port)));
  await Promise.all(
    cluster.ports.map(async (port, i) => {
      const admin = new Redis({ host: '127.0.0.1', port });
      try {
        await admin.config('SET', 'cluster-announce-bus-port', String(port + 10000));
        await admin.config('SET', 'cluster-announce-port', String(proxies[i].port));
      } finally {
        admin.disconnect();
      }
    }),
  );
  const wanted = new Set(proxies.map((p) => p.port));
  const deadline = Date.now() + 20_000;
  for (;;) {
    const announced = await Promise.all(cluster.ports.map((port) => slotPorts(port)));
    if (announced.every((ports) => ports.length > 0 && ports.every((p) => wanted.has(p)))) return proxies;
    if (Date.now() > deadline) throw new Error('the cluster nodes did not announce their proxy ports within 20 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Ports of the masters in one node's `CLUSTER SLOTS`. */
async function slotPorts(port: number): Promise<number[]> {
  const admin = new Redis({ host: '127.0.0.1', port });
  try {
    const slots = await admin.cluster('SLOTS');
    return slots.map(([, , master]) => master[1]);
  } finally {
    admin.disconnect();
  }
}

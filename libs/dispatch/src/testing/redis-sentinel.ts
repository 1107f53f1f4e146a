import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort, waitForPing } from './redis-server';
import { waitUntil } from './wait-until';

/** A real Redis Sentinel (`redis-server --sentinel`) on 127.0.0.1 monitoring one primary, for one test file. */
export interface TestRedisSentinel {
  readonly port: number;
  /** The master name it monitors. */
  readonly name: string;
  /** `redis+sentinel://127.0.0.1:<port>/<name>`. */
  readonly url: string;
  /** The primary's port as the Sentinel names it now. */
  masterPort(): Promise<number>;
  /** `SENTINEL FAILOVER <name>`: promotes a replica without asking other Sentinels. */
  failover(): Promise<void>;
  /** Stops it (SIGTERM) and removes its files. */
  stop(): Promise<void>;
}

/**
 * Starts a Sentinel that monitors the primary on `masterPort` (quorum 1, down after 1 s) and resolves
 * once it knows at least `replicas` replicas of it.
 * @throws Error when it does not answer PING, or does not see the replicas within 20 s.
 */
export async function startRedisSentinel(
  masterPort: number,
  replicas = 1,
  name = 'mymaster',
): Promise<TestRedisSentinel> {
  const dir = mkdtempSync(path.join(tmpdir(), 'iop-sentinel-'));
  const port = await freePort();
  const conf = path.join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  child.on('error', () => undefined);
  const ask = async <T>(fn: (r: Redis) => Promise<T>): Promise<T> => {
    const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
    r.on('error', () => undefined);
    try {
      return await fn(r);
    } finally {
      r.disconnect();
    }
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForPing(port, 10_000);
    await waitUntil(
      async () => ((await ask((r) => r.call('SENTINEL', 'REPLICAS', name))) as unknown[]).length >= replicas,
      20_000,
      `the Sentinel to see ${replicas} replica(s)`,
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    port,
    name,
    url: `redis+sentinel://127.0.0.1:${port}/${name}`,
    masterPort: async () =>
      Number(((await ask((r) => r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name))) as string[])[1]),
    failover: async () => {
      await ask((r) => r.call('SENTINEL', 'FAILOVER', name));
    },
    stop,
  };
}

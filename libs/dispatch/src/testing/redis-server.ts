import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/**
 * A Redis for one test file (README "Tests"): `REDIS_URL` when set, otherwise an own
 * `redis-server` without persistence on a free port of 127.0.0.1.
 */
export interface TestRedis {
  /** `redis://127.0.0.1:<port>` of the server in use. */
  readonly url: string;
  /** Port of an own server; undefined when `REDIS_URL` is used. */
  readonly port?: number;
  /** True when this process spawned the server (so `kill`/`start` are allowed). */
  readonly own: boolean;
  /** Stops an own server (SIGTERM) and waits for it to exit; a no-op for `REDIS_URL`. */
  stop(): Promise<void>;
  /** SIGKILLs an own server, for outage tests; throws for `REDIS_URL`. */
  kill(): Promise<void>;
  /** Starts an own server again on the same port, empty (no persistence); throws for `REDIS_URL`. */
  start(): Promise<void>;
  /** SIGSTOPs (`true`) or SIGCONTs (`false`) an own server: a hung Redis whose sockets stay open; throws for `REDIS_URL`. */
  freeze(frozen: boolean): void;
}

const MISSING_BINARY =
  'redis-server not found: install the Debian package redis-server (apt-get install -y redis-server) or set REDIS_URL';

/**
 * Starts (or borrows) a Redis for tests. `forceOwn` ignores `REDIS_URL`, for tests that stop
 * and restart Redis. Resolves once the server answers PING and has been up 3 s: limits written to a
 * younger Redis hold grants back until it has been up `restartBarrierMs` (2.5 s by default;
 * docs/architecture.md, "Redis restarts"), which a test of the first grants' timing must not see.
 * (`start()` after `kill()` does not wait: that is the restart a test means.)
 * @throws Error naming the `redis-server` package when the binary is missing.
 */
export async function startRedis(opts: { forceOwn?: boolean } = {}): Promise<TestRedis> {
  const external = process.env['REDIS_URL'];
  if (external && !opts.forceOwn) {
    const notOwn = async () => {
      throw new Error(
        'this test Redis comes from REDIS_URL: start it with startRedis({ forceOwn: true }) to kill or restart it',
      );
    };
    const refuse = () => {
      throw new Error(
        'this test Redis comes from REDIS_URL: start it with startRedis({ forceOwn: true }) to freeze it',
      );
    };
    return { url: external, own: false, stop: async () => undefined, kill: notOwn, start: notOwn, freeze: refuse };
  }
  const port = await freePort();
  let child: ChildProcess | undefined = await spawnRedis(port);
  await waitForUptime(port, 3);
  const exit = async (signal: NodeJS.Signals) => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill(signal);
    // A frozen server takes SIGTERM only once it runs again.
    running.kill('SIGCONT');
    await exited;
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    own: true,
    stop: () => exit('SIGTERM'),
    kill: () => exit('SIGKILL'),
    start: async () => {
      if (child) throw new Error(`redis-server on port ${port} is already running`);
      child = await spawnRedis(port);
    },
    freeze: (frozen) => {
      if (!child) throw new Error(`redis-server on port ${port} is not running`);
      child.kill(frozen ? 'SIGSTOP' : 'SIGCONT');
    },
  };
}

/** A key prefix no other test uses: `t:<name>:<pid>:<random>`. */
export function uniquePrefix(name: string): string {
  return `t:${name.replace(/[^A-Za-z0-9_-]/g, '_')}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Every key under `prefix` (SCAN, so safe on a shared Redis), sorted. */
export async function scanKeys(url: string, prefix: string): Promise<string[]> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    return keys.sort();
  } finally {
    client.disconnect();
  }
}

/**
 * Spawns `redis-server` without persistence on `port` (plus `extraArgs`) and waits for PING. Its
 * directory is a fresh temporary one (removed when it exits), so an RDB written for a replica's full
 * sync never lands in the working directory; `extraArgs` may name another `--dir`.
 */
export async function spawnRedis(port: number, extraArgs: readonly string[] = []): Promise<ChildProcess> {
  const dir = mkdtempSync(path.join(tmpdir(), 'iop-redis-'));
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--loglevel',
      'warning',
      '--dir',
      dir,
      ...extraArgs,
    ],
    { stdio: 'ignore' },
  );
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new Error(MISSING_BINARY) : error),
    );
    child.once('exit', (code, signal) =>
      reject(new Error(`redis-server on port ${port} exited early (${signal ?? code})`)),
    );
  });
  failed.catch(() => undefined);
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  await Promise.race([waitForPing(port, 10_000), failed]).catch((e: unknown) => {
    removeDir();
    throw e;
  });
  child.removeAllListeners('exit');
  child.removeAllListeners('error');
  child.on('error', () => undefined);
  child.once('exit', removeDir);
  return child;
}

/** Resolves once the server on `port` of 127.0.0.1 says `uptime_in_seconds` ≥ `seconds`. */
async function waitForUptime(port: number, seconds: number): Promise<void> {
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  try {
    for (;;) {
      const uptime = Number(/uptime_in_seconds:(\d+)/.exec(await client.info('server'))?.[1] ?? 0);
      if (uptime >= seconds) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.disconnect();
  }
}

/** Resolves once a server on `port` of 127.0.0.1 answers PING. @throws Error after `timeoutMs`. */
export async function waitForPing(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ping(port)) return;
    if (Date.now() > deadline)
      throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
  });
}

/** A TCP port of 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

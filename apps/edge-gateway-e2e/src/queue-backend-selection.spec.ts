import { scanKeys, startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { Redis } from 'ioredis';
import path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/** What `npm start` serves; it says `queue.backend: memory` and uses the default `queue.prefix`. */
const EXAMPLE = path.resolve(__dirname, '../../../examples/edge.yaml');
const PREFIX = 'iop-edge';

/**
 * README "Configuration" (`queue.backend`): a Redis URL given by `--redis` or `REDIS_URL` selects
 * the redis backend even over the file's `queue.backend: memory`, and the startup log says which
 * backend runs and why. Real gateway processes on examples/edge.yaml and a real Redis.
 */
describe('queue backend selection of the built gateway on examples/edge.yaml', () => {
  let redis: TestRedis;
  const gateways: GatewayProcess[] = [];
  beforeAll(async () => {
    // An own server: examples/edge.yaml has the shared default prefix, so keep its keys to ourselves.
    redis = await startRedis({ forceOwn: true });
  });
  afterEach(async () => {
    for (const g of gateways.splice(0)) await g.stop();
  });
  afterAll(async () => {
    await redis.stop();
  });

  const start = async (opts: { env?: Record<string, string>; args?: string[]; file?: string }) => {
    const gateway = await spawnGateway(opts.file ?? EXAMPLE, {
      env: { LOG_LEVEL: 'info', ...opts.env },
      args: opts.args,
    });
    gateways.push(gateway);
    return gateway;
  };
  const readyz = async (g: GatewayProcess) =>
    (await (await fetch(`${g.url}/readyz`)).json()) as {
      ready: boolean;
      queue: { backend: string; reachable: boolean };
    };
  /** The startup line `queue backend: ...` from the JSON logs, once written. */
  const backendLine = async (g: GatewayProcess) =>
    (await g.waitForOutput('"msg":"queue backend: '))
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map(
        (line) => JSON.parse(line) as { level: number; msg: string; queue?: string; redis?: string; source?: string },
      )
      .find((entry) => entry.msg.startsWith('queue backend: '));
  const flush = async () => {
    const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    await client.flushall();
    client.disconnect();
  };

  it('REDIS_URL selects redis over queue.backend: memory, says so at info level, and puts its keys in that Redis', async () => {
    await flush();
    const gateway = await start({ env: { REDIS_URL: redis.url } });
    expect(await readyz(gateway)).toEqual({ ready: true, queue: { backend: 'redis', reachable: true } });
    expect(await backendLine(gateway)).toMatchObject({
      level: 30,
      queue: 'redis',
      source: 'REDIS_URL',
      redis: redis.url,
      msg: `queue backend: redis at ${redis.url} (REDIS_URL overrides queue.backend: memory)`,
    });
    // The pool providers' queue keys (health records aside) are in that Redis once the gateway listens.
    const queueKeys = (await scanKeys(redis.url, `${PREFIX}:`)).filter((k) => !k.startsWith(`${PREFIX}:health:`));
    expect(queueKeys.some((k) => k.includes('demo-llama-a'))).toBe(true);
    expect(queueKeys.some((k) => k.includes('demo-llama-b'))).toBe(true);
  });

  it('--redis selects redis over queue.backend: memory, and beats REDIS_URL', async () => {
    await flush();
    // REDIS_URL names a port nothing listens on: a gateway that used it would not be ready.
    const gateway = await start({ env: { REDIS_URL: 'redis://127.0.0.1:1' }, args: ['--redis', redis.url] });
    expect(await readyz(gateway)).toEqual({ ready: true, queue: { backend: 'redis', reachable: true } });
    expect(await backendLine(gateway)).toMatchObject({
      level: 30,
      source: '--redis',
      msg: `queue backend: redis at ${redis.url} (--redis overrides REDIS_URL and queue.backend: memory)`,
    });
    const queueKeys = (await scanKeys(redis.url, `${PREFIX}:`)).filter((k) => !k.startsWith(`${PREFIX}:health:`));
    expect(queueKeys.some((k) => k.includes('demo-llama-a'))).toBe(true);
  });

  it('logs the URL with its password redacted', async () => {
    // This Redis has no password: the client warns and goes on, so the gateway still starts.
    const withPassword = redis.url.replace('redis://', 'redis://:s3cret@');
    const gateway = await start({ env: { REDIS_URL: withPassword } });
    expect((await readyz(gateway)).queue.backend).toBe('redis');
    expect((await backendLine(gateway))?.msg).toBe(
      `queue backend: redis at ${redis.url.replace('redis://', 'redis://***@')} (REDIS_URL overrides queue.backend: memory)`,
    );
    await gateway.settled();
    expect(gateway.output()).not.toContain('s3cret');
  });

  it('stays on memory without --redis or REDIS_URL (what npm start runs), and says why', async () => {
    await flush();
    const gateway = await start({ env: { REDIS_URL: '' } });
    expect(await readyz(gateway)).toEqual({ ready: true, queue: { backend: 'memory', reachable: true } });
    expect(await backendLine(gateway)).toMatchObject({
      level: 30,
      queue: 'memory',
      msg: 'queue backend: memory (queue.backend: memory)',
    });
    expect(await scanKeys(redis.url, `${PREFIX}:`)).toEqual([]);
  });

  it('a reload that changes queue.backend or queue.redis_url under REDIS_URL warns only when the backend in use would change', async () => {
    const example = readFileSync(EXAMPLE, 'utf8');
    const file = writeTempConfig(example);
    const gateway = await start({ env: { REDIS_URL: redis.url }, file });
    const restartWarnings = () =>
      gateway
        .output()
        .split('\n')
        .filter((line) => line.includes('takes effect only after a restart'));
    const reloads = () =>
      gateway
        .output()
        .split('\n')
        .filter((line) => line.includes('"msg":"config reloaded"')).length;

    // REDIS_URL still wins over both: nothing in use changes, so no warning.
    writeFileSync(file, example.replace('backend: memory', 'backend: redis\n  redis_url: redis://127.0.0.1:1'));
    gateway.child.kill('SIGHUP');
    await waitUntil(() => reloads() >= 1, 5000, 'the first reload');
    expect(restartWarnings()).toEqual([]);

    // A new prefix would change the Redis keys in use: a restart is needed, and the log says so.
    writeFileSync(file, example.replace('backend: memory', 'backend: memory\n  prefix: other'));
    const before = reloads();
    gateway.child.kill('SIGHUP');
    await waitUntil(() => reloads() > before, 5000, 'the second reload');
    expect(restartWarnings()).toHaveLength(1);
    expect(restartWarnings()[0]).toContain('queue.prefix changed');
    expect((await readyz(gateway)).queue.backend).toBe('redis');
  });

  it('refuses a REDIS_URL that is not a redis:// URL (exit 2), password redacted', async () => {
    await expect(start({ env: { REDIS_URL: 'http://user:s3cret@127.0.0.1:6379' } })).rejects.toThrow(
      /exited with 2 before listening:\nREDIS_URL: "http:\/\/\*\*\*@127\.0\.0\.1:6379" is not a redis:\/\/, rediss:\/\/ or redis\+sentinel:\/\/ URL/,
    );
  });
});

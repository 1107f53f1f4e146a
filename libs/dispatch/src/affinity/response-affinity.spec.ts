import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../testing';
import { MemoryResponseAffinity, RedisResponseAffinity, type ResponseAffinity } from './response-affinity';

let redis: TestRedis;
const connections: Redis[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const c of connections) c.disconnect();
  await redis.stop();
});

async function connect(): Promise<Redis> {
  const conn = new Redis(redis.url, { enableOfflineQueue: false });
  connections.push(conn);
  await new Promise((resolve, reject) => conn.once('ready', resolve).once('error', reject));
  return conn;
}

describe.each([
  [
    'memory',
    async (): Promise<[ResponseAffinity, ResponseAffinity]> => {
      const one = new MemoryResponseAffinity();
      return [one, one];
    },
  ],
  [
    'redis (two replicas)',
    async (): Promise<[ResponseAffinity, ResponseAffinity]> => {
      const prefix = uniquePrefix('affinity');
      return [new RedisResponseAffinity(await connect(), prefix), new RedisResponseAffinity(await connect(), prefix)];
    },
  ],
])('ResponseAffinity: %s', (_name, make) => {
  it('returns the provider that produced a response, to every replica', async () => {
    const [a, b] = await make();
    await a.set('resp_1', 'gpu-a-llama');
    expect(await b.get('resp_1')).toBe('gpu-a-llama');
    expect(await b.get('resp_unknown')).toBeUndefined();
  });
});

it('forgets a mapping after its TTL', async () => {
  const affinity = new MemoryResponseAffinity(20);
  await affinity.set('resp_1', 'p');
  const until = Date.now() + 1000;
  while ((await affinity.get('resp_1')) && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  expect(await affinity.get('resp_1')).toBeUndefined();
});

it('keeps at most maxEntries mappings, dropping the oldest', async () => {
  const affinity = new MemoryResponseAffinity(60_000, 2);
  await affinity.set('r1', 'a');
  await affinity.set('r2', 'b');
  await affinity.set('r3', 'c');
  expect(await affinity.get('r1')).toBeUndefined();
  expect(await affinity.get('r3')).toBe('c');
});

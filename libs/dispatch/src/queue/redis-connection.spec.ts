import type { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../testing';
import { connectRedis } from './redis-connection';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** A connected client of `redis` whose socket writes are counted. */
async function countedClient(autoPipelining: boolean): Promise<{ client: Redis; writes: () => number }> {
  const client = connectRedis({ url: redis.url, autoPipelining, failFast: true }) as Redis;
  client.on('error', () => undefined);
  // failFast: no command is taken before the connection is ready.
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  const stream = client.stream;
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  let writes = 0;
  stream.write = ((...args: unknown[]) => {
    writes++;
    return write(...args);
  }) as typeof stream.write;
  return { client, writes: () => writes };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

// docs/architecture.md, "Lease protocol": the command connection batches only while it is busy.
describe('connectRedis with autoPipelining (a single Redis)', () => {
  it('writes a command made on an idle connection at once, not a turn of the event loop later', async () => {
    const { client, writes } = await countedClient(true);
    try {
      const pong = client.ping();
      expect(writes()).toBe(1);
      await expect(pong).resolves.toBe('PONG');
    } finally {
      client.disconnect();
    }
  });

  it('writes a command at once while one other awaits its answer (a lone request: the release before)', async () => {
    const { client, writes } = await countedClient(true);
    try {
      const release = client.ping();
      const admit = client.ping();
      expect(writes()).toBe(2);
      await Promise.all([release, admit]);
    } finally {
      client.disconnect();
    }
  });

  it('sends the commands made while two await their answer in one write, in the order they were made', async () => {
    const { client, writes } = await countedClient(true);
    const key = `${uniquePrefix('pipeline')}:n`;
    try {
      const first = [client.incr(key), client.incr(key)];
      const rest = Array.from({ length: 20 }, () => client.incr(key));
      expect(writes()).toBe(2);
      await nextTurn();
      expect(writes()).toBe(3);
      expect(await Promise.all([...first, ...rest])).toEqual(Array.from({ length: 22 }, (_, i) => i + 1));
      // Idle again: the next command goes straight out.
      const after = client.incr(key);
      expect(writes()).toBe(4);
      expect(await after).toBe(23);
    } finally {
      client.disconnect();
    }
  });

  it('keeps the order of commands made across turns while batches wait to leave and answers are due', async () => {
    const { client } = await countedClient(true);
    const key = `${uniquePrefix('pipeline-order')}:list`;
    try {
      const sent: Promise<unknown>[] = [];
      for (let turn = 0; turn < 5; turn++) {
        for (let i = 0; i < 4; i++) sent.push(client.rpush(key, `${turn}.${i}`));
        // Some turns end with a microtask, some with a full turn of the loop.
        await (turn % 2 ? nextTurn() : Promise.resolve());
      }
      await Promise.all(sent);
      const expected = Array.from({ length: 20 }, (_, n) => `${Math.floor(n / 4)}.${n % 4}`);
      expect(await client.lrange(key, 0, -1)).toEqual(expected);
    } finally {
      client.disconnect();
    }
  });
});

describe('connectRedis without autoPipelining', () => {
  it('writes every command at once, busy or not', async () => {
    const { client, writes } = await countedClient(false);
    try {
      const replies = Array.from({ length: 5 }, () => client.ping());
      expect(writes()).toBe(5);
      await Promise.all(replies);
    } finally {
      client.disconnect();
    }
  });
});

import { scanKeys, startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { configPrefix, startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import { randomBytes } from 'node:crypto';
import {
  EXPORTER_MAIN,
  GATEWAY_MAIN,
  spawnService,
  writeTempConfig,
  type ServiceProcess,
} from './testing/exporter-fixtures';

const STATUS_KEY = 'status-key-jobdata-1';
/** Marked so that a copy anywhere in Redis or on the board is found by a plain substring search. */
const CLIENT_KEY = `sk-jobdata-${randomBytes(8).toString('hex')}`;
const PROMPT = `prompt-marker-${randomBytes(8).toString('hex')}`;

/** Every value a key holds, whatever its type, as one string. */
async function contents(redis: Redis, key: string): Promise<string> {
  switch (await redis.type(key)) {
    case 'hash':
      return JSON.stringify(await redis.hgetall(key));
    case 'string':
      return (await redis.get(key)) ?? '';
    case 'list':
      return (await redis.lrange(key, 0, -1)).join('\n');
    case 'zset':
      return (await redis.zrange(key, 0, -1)).join('\n');
    case 'set':
      return (await redis.smembers(key)).join('\n');
    default:
      return '';
  }
}

/**
 * What the queue board can show is what Redis holds, and Redis never holds a prompt or a key
 * (README "Status": the queue board; docs/architecture.md, "Key layout": a job's `data` is origin,
 * model and client id). A real gateway process takes requests of a client with a distinctive key and
 * prompt on a provider of one slot: one holds the lease, the others (chat streamed, Responses,
 * embeddings) wait; then every key under the prefix and the board's job listings are searched.
 */
describe('job data in Redis and on the queue board never holds prompts or API keys', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let gateway: ServiceProcess;
  let exporter: ServiceProcess;
  const prefix = configPrefix('jobdata');

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
    const file = writeTempConfig(`
version: 1
gateway:
  request_timeout_ms: 60000
  clients:
    - { id: chat-ui, keys: ["${CLIENT_KEY}"], priority: 5 }
queue: { prefix: ${prefix}, redis_url: "${redis.url}", max_wait_ms: 60000 }
status: { api_keys: ["${STATUS_KEY}"] }
nodes:
  - id: gpu
    adapters:
      - { id: up, type: openai_compat, base_url: "${upstream.url}" }
    providers:
      - { id: solo, category: openai_compat, adapter: up, models: [llama], max_concurrency: 1 }
`);
    gateway = await spawnService(GATEWAY_MAIN, ['serve', '--config', file, '--listen', '127.0.0.1:0'], {
      env: { REDIS_URL: '' },
    });
    exporter = await spawnService(EXPORTER_MAIN, ['--config', file, '--listen', '127.0.0.1:0'], {
      env: { REDIS_URL: '' },
    });
  });
  afterAll(async () => {
    await exporter?.stop();
    await gateway?.stop();
    await upstream?.close();
    await redis?.stop();
  });

  it('a held lease and three waiters (chat streamed, Responses, embeddings): no key or value under the prefix, no board answer, holds either', async () => {
    const client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });
    const messages = [{ role: 'user' as const, content: `${PROMPT} chat` }];
    // Held until the checks are done (then aborted), however slow the machine: the waiters stay queued meanwhile.
    const hold = new AbortController();
    const holder = client.chat.completions
      .create({ model: 'llama', messages, fake: { delay_ms: 60_000 } } as never, { signal: hold.signal })
      .then(
        () => 'answered',
        () => 'aborted',
      );
    const auth = { authorization: `Bearer ${STATUS_KEY}` };
    const solo = async () =>
      ((await (await fetch(`${exporter.url}/status`, { headers: auth })).json()) as StatusSnapshot).nodes[0]
        .resources[0];
    await waitUntil(async () => (await solo()).in_flight === 1, 10_000, 'the lease held');
    const waiters = [
      (async () => {
        const stream = await client.chat.completions.create({ model: 'llama', messages, stream: true });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
        return text;
      })(),
      client.responses.create({ model: 'llama', input: `${PROMPT} responses` }).then((r) => r.output_text),
      client.embeddings.create({ model: 'llama', input: `${PROMPT} embeddings` }).then((r) => r.data.length),
    ];
    await waitUntil(async () => (await solo()).queued === 3, 10_000, 'three requests waiting');

    const reader = new Redis(redis.url);
    try {
      const keys = await scanKeys(redis.url, prefix);
      const jobs: Record<string, string>[] = [];
      for (const key of keys) {
        const held = `${key}\n${await contents(reader, key)}`;
        expect([key, held.includes(PROMPT), held.includes(CLIENT_KEY)]).toEqual([key, false, false]);
        const hash = (await reader.type(key)) === 'hash' ? await reader.hgetall(key) : {};
        if (hash['name'] === 'lease') jobs.push(hash);
      }
      // The search found the jobs: the held one and the three waiting, each naming its client, never its key.
      expect(jobs).toHaveLength(4);
      for (const job of jobs)
        expect(JSON.parse(job['data'])).toEqual({ origin: expect.any(String), model: 'llama', client: 'chat-ui' });
    } finally {
      reader.disconnect();
    }

    for (const status of ['active', 'prioritized', 'latest']) {
      const res = await fetch(`${exporter.url}/queues/api/queues?activeQueue=provider.solo&status=${status}`, {
        headers: auth,
      });
      const body = await res.text();
      expect(res.status).toBe(200);
      expect(body).toContain('"client":"chat-ui"');
      expect([status, body.includes(PROMPT), body.includes(CLIENT_KEY)]).toEqual([status, false, false]);
    }

    hold.abort();
    expect(await holder).toBe('aborted');
    const [streamed, responded, embedded] = await Promise.all(waiters);
    expect(streamed).not.toBe('');
    expect(responded).not.toBe('');
    expect(embedded).toBe(1);
  }, 60_000);
});

import { connectRedis, type QueueClient, type RedisClient } from '@iop/dispatch';
import { seedLeases, startRedis, type TestRedis } from '@iop/dispatch/testing';
import { parseConfigText } from '@iop/validate';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import pino from 'pino';
import { startExporter, type RunningExporter } from '../exporter';
import { boardCalls } from '../testing/board-routes';
import { changedKeys, frozenCopy, keyspace } from '../testing/keyspace';

const KEY = 'status-key-board-1';
const bearer = { authorization: `Bearer ${KEY}` };
const basic = (password: string) => ({
  authorization: `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`,
});

interface BoardQueue {
  name: string;
  displayName: string;
  counts: Record<string, number>;
  readOnlyMode: boolean;
  allowRetries: boolean;
  jobs: { id: string; name: string; data: unknown }[];
}
interface OpenAiError {
  error: { message: string; type: string; code: string };
}

/**
 * The requests waiting on llama-a, in arrival order: a sheddable batch, two of `a` and one of `b`
 * (band 0, equal weights), then the chat UI (band 10). Grant order (docs/architecture.md, "Clients,
 * priority and fair share": band, then fair-share start tag) is chat-ui, a, b, a, batch: neither
 * arrival order nor its reverse.
 */
const client = (id: string, band: number): QueueClient => ({ id, band, weight: 1 });
const WAITERS: readonly QueueClient[] = [
  client('batch', -1),
  client('a', 0),
  client('a', 0),
  client('b', 0),
  client('chat-ui', 10),
];

/** README "Status" (the queue board) and "Security": the board on a real exporter, real Redis, real HTTP. */
describe('the read-only queue board at /queues', () => {
  let redis: TestRedis;
  let reader: RedisClient;
  let exporter: RunningExporter;
  const closers: (() => Promise<unknown>)[] = [];
  const live = configPrefix('board-live');
  const prefix = configPrefix('board');

  beforeAll(async () => {
    // An own server: the test compares its whole keyspace before and after.
    redis = await startRedis({ forceOwn: true });
    reader = connectRedis({ url: redis.url });
    reader.on('error', () => undefined);
    await new Promise((r) => reader.once('ready', r));
    // What gateways left: llama-a 3 leases (full) and 5 waiting, llama-b 1 lease; then a copy no one renews.
    closers.push(
      await seedLeases(redis.url, live, 'llama-a', 3, WAITERS.length, { pool: 'pool.llama-a', waitClients: WAITERS }),
    );
    closers.push(await seedLeases(redis.url, live, 'llama-b', 1, 0, { pool: 'pool.llama-a' }));
    await frozenCopy(reader, live, prefix);
    const yaml = exporterYaml({ prefix, redisUrl: redis.url, statusKeys: [KEY] });
    const loaded = parseConfigText(yaml, {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    exporter = await startExporter({
      config: loaded.config,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
  });
  afterAll(async () => {
    await exporter?.close();
    for (const close of closers.reverse()) await close();
    reader?.disconnect();
    await redis?.stop();
  });
  const frozen = async () => new Map([...(await keyspace(reader))].filter(([key]) => !key.startsWith(`${live}:`)));
  const queues = async (query = '') => {
    const res = await fetch(`${exporter.url}/queues/api/queues${query}`, { headers: bearer });
    expect(res.status).toBe(200);
    return ((await res.json()) as { queues: BoardQueue[] }).queues;
  };

  it('answers 401 OpenAI-shaped JSON with a Basic challenge without a status key, pages and API alike', async () => {
    for (const path of ['/queues', '/queues/', '/queues/api/queues', '/queues/queue/provider.llama-a']) {
      for (const headers of [{}, { authorization: 'Bearer wrong-key-1' }, basic('wrong-key-1')]) {
        const res = await fetch(`${exporter.url}${path}`, { headers });
        expect([path, res.status]).toEqual([path, 401]);
        expect(res.headers.get('www-authenticate')).toBe('Basic realm="iop-edge status", charset="UTF-8"');
        const body = (await res.json()) as OpenAiError;
        expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
        expect(body.error.message).toMatch(/status\.api_keys/);
      }
    }
    // A mutation without a key is a 401 too: the key is checked first.
    expect((await fetch(`${exporter.url}/queues/api/queues/pause`, { method: 'PUT' })).status).toBe(401);
  });

  it('serves the board page to a Bearer key or the Basic password a browser sends, with no third-party fetch allowed', async () => {
    for (const headers of [bearer, basic(KEY)]) {
      const res = await fetch(`${exporter.url}/queues`, { headers });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('content-security-policy')).toMatch(
        /default-src 'self'.*style-src 'self' 'unsafe-inline'/,
      );
      expect(res.headers.get('x-powered-by')).toBeNull();
      const html = await res.text();
      expect(html).toContain('<base href="/queues/" />');
      expect(html).toContain('<title>iop-edge queues</title>');
    }
  });

  it("lists every provider queue under its provider id with BullMQ's counts: leases active, waiting requests prioritized", async () => {
    const listed = await queues();
    expect(listed.map((q) => [q.name, q.displayName])).toEqual([
      ['provider.llama-a', 'llama-a'],
      ['provider.llama-b', 'llama-b'],
    ]);
    const [a, b] = listed;
    expect(a.counts).toMatchObject({ active: 3, prioritized: 5, waiting: 0, completed: 0, failed: 0, delayed: 0 });
    expect(b.counts).toMatchObject({ active: 1, prioritized: 0, waiting: 0 });
    for (const q of listed) expect([q.readOnlyMode, q.allowRetries]).toEqual([true, false]);
    // The waiting requests themselves, as the board shows them: BullMQ jobs named `lease`.
    const jobs = (await queues('?activeQueue=provider.llama-a&status=prioritized'))[0].jobs;
    expect(jobs.map((j) => j.name)).toEqual(['lease', 'lease', 'lease', 'lease', 'lease']);
    expect(jobs[0].data).toEqual({ origin: expect.any(String), model: 'seed', client: 'chat-ui' });
  });

  it('lists the waiting requests in grant order: highest band first, then fair-share tag (README "Status": the queue board)', async () => {
    const jobs = (await queues('?activeQueue=provider.llama-a&status=prioritized'))[0].jobs;
    expect(jobs.map((j) => (j.data as { client: string }).client)).toEqual(['chat-ui', 'a', 'b', 'a', 'batch']);
    // The two of `a` in their own arrival order (`<replica uuid>.<n>`).
    const seq = (id: string) => Number(id.slice(id.lastIndexOf('.') + 1));
    const [firstA, secondA] = [jobs[1], jobs[3]].map((j) => seq(j.id));
    expect(firstA).toBeLessThan(secondA);
    // A page of it is the same line cut: the second page of two starts at the third in line.
    const page = (await queues('?activeQueue=provider.llama-a&status=prioritized&jobsPerPage=2&page=2'))[0].jobs;
    expect(page.map((j) => j.id)).toEqual([jobs[2].id, jobs[3].id]);
  });

  it('refuses every mutating call of the board (405, OpenAI-shaped, Allow: GET, HEAD) and nothing changes in Redis', async () => {
    const before = await frozen();
    const jobId = (await queues('?activeQueue=provider.llama-a&status=active'))[0].jobs[0].id;
    const { write } = boardCalls('provider.llama-a', jobId);
    // retry, clean, pause, resume, promote, empty, obliterate, add, update data, priority, delay, schedulers...
    expect(write.length).toBeGreaterThanOrEqual(20);
    const extra = [
      { method: 'DELETE', path: `/api/queues/provider.llama-a/${jobId}` },
      { method: 'POST', path: '/api/queues/provider.llama-b/add' },
    ];
    for (const call of [...write, ...extra]) {
      const res = await fetch(`${exporter.url}/queues${call.path}`, {
        method: call.method,
        headers: { ...bearer, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'x', data: { prompt: 'injected' }, delay: 0, priority: 1 }),
      });
      expect([call.method, call.path, res.status]).toEqual([call.method, call.path, 405]);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      const body = (await res.json()) as OpenAiError;
      expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'method_not_allowed' });
      expect(body.error.message).toContain('read-only');
    }
    expect(changedKeys(before, await frozen())).toEqual([]);
    const [a] = await queues();
    expect(a.counts).toMatchObject({ active: 3, prioritized: 5 });
  });

  it('answers an unknown board path 404 and HEAD like GET', async () => {
    const head = await fetch(`${exporter.url}/queues/api/queues`, { method: 'HEAD', headers: bearer });
    expect(head.status).toBe(200);
    const res = await fetch(`${exporter.url}/queues/nope/at/all`, { headers: bearer });
    expect(res.status).toBe(404);
  });
});

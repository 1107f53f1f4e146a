import { MemoryProviderQueue, type LeaseRequest, type Lease, type QueueClient } from '@iop/dispatch';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/** A memory queue that also remembers the client of every lease request it was asked for. */
class ClientRecordingQueue extends MemoryProviderQueue {
  readonly clients: (QueueClient | undefined)[] = [];
  override acquireLease(request: LeaseRequest): Promise<Lease> {
    this.clients.push(request.client);
    return super.acquireLease(request);
  }
}

describe('clients: identity from the key, band from the client and x-iop-priority', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let queue: ClientRecordingQueue;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    queue = new ClientRecordingQueue();
    const yaml = fleetYaml({
      apiKeys: ['flat-key'],
      clients: [
        { id: 'chat', keys: ['${CHAT_KEY}'], priority: 10, weight: 3, max_in_flight: 2 },
        { id: 'batch', keys: ['batch-key'], priority: -1, max_queued: 5 },
      ],
    });
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k', CHAT_KEY: 'chat-key' }, queue);
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });
  beforeEach(() => queue.clients.splice(0));

  const send = (key: string, headers: Record<string, string> = {}) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hi' }] }),
    });

  it('hands the queue the client of the key, with its band, weight and caps (max_queued by default half of max_connections)', async () => {
    expect((await send('chat-key')).status).toBe(200);
    expect((await send('batch-key')).status).toBe(200);
    expect((await send('flat-key')).status).toBe(200);
    expect(queue.clients).toEqual([
      { id: 'chat', band: 10, weight: 3, maxInFlight: 2, maxQueued: 2048 },
      { id: 'batch', band: -1, weight: 1, maxQueued: 5 },
      { id: 'api_keys[0]', band: 0, weight: 1, maxQueued: 2048 },
    ]);
  });

  it('lowers the band with x-iop-priority and never raises it', async () => {
    expect((await send('chat-key', { 'x-iop-priority': '-3' })).status).toBe(200);
    expect((await send('batch-key', { 'x-iop-priority': '500' })).status).toBe(200);
    expect(queue.clients.map((c) => c?.band)).toEqual([-3, -1]);
  });

  it.each(['high', '1.5', '2000', '', '1e2'])('answers 400 naming the header for x-iop-priority %j', async (value) => {
    const res = await send('chat-key', { 'x-iop-priority': value });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { param: string; code: string } };
    expect(body.error).toMatchObject({ param: 'x-iop-priority', code: 'invalid_request_error' });
    expect(queue.clients).toEqual([]);
  });

  it('counts a 400 for x-iop-priority against the client whose key was accepted, never none', async () => {
    expect((await send('batch-key', { 'x-iop-priority': 'abc' })).status).toBe(400);
    expect((await send('nope', { 'x-iop-priority': 'abc' })).status).toBe(401);
    const samples = parsePrometheusText(await (await fetch(`${gateway.url}/metrics`)).text());
    const count = (status: string, client: string) =>
      sampleValue(samples, 'iop_edge_requests_total', { model: 'other', route: 'none', status, client });
    expect(count('400', 'batch')).toBe(1);
    expect(count('400', 'none')).toBeUndefined();
    // The unknown key stays `none`: no client was known when it was refused.
    expect(count('401', 'none')).toBe(1);
  });

  it('refuses an unknown key with 401 before anything is queued', async () => {
    expect((await send('nope')).status).toBe(401);
    expect(queue.clients).toEqual([]);
  });
});

describe('clients: flow control off (no gateway.clients, at most one flat key)', () => {
  it.each([
    ['no key', {}, undefined, 'anonymous'],
    ['one flat key', { apiKeys: ['only-key'] }, 'only-key', 'api_keys[0]'],
  ])('with %s hands the queue the one client of the fleet, marked solo', async (_, settings, key, id) => {
    const upstream = await startFakeUpstream();
    const queue = new ClientRecordingQueue();
    const gateway = await startTestGateway(fleetYaml(settings), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, queue);
    try {
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      expect(queue.clients).toEqual([{ id, band: 0, weight: 1, solo: true }]);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  });
});

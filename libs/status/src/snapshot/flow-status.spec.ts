import { edgeConfigSchema } from '@iop/validate';
import { buildFlowStatus } from './flow-status';

const config = (gateway: object) =>
  edgeConfigSchema.parse({
    version: 1,
    gateway,
    nodes: [
      {
        id: 'gpu',
        adapters: [{ id: 'v', type: 'vllm', base_url: 'http://10.0.0.5:8000/v1' }],
        providers: [
          { id: 'a', category: 'vllm', adapter: 'v', models: ['llama'], max_concurrency: 2 },
          { id: 'b', category: 'vllm', adapter: 'v', models: ['llama'], max_concurrency: 2 },
          { id: 'c', category: 'vllm', adapter: 'v', models: ['qwen'], max_concurrency: 1 },
        ],
      },
    ],
  });

describe('buildFlowStatus', () => {
  const gateway = {
    api_keys: ['flat'],
    clients: [
      { id: 'chat', keys: ['k1'], priority: 10, weight: 3, max_in_flight: 2 },
      { id: 'batch', keys: ['k2'], priority: -1, max_queued: 5 },
    ],
  };
  const counts = new Map([
    ['a', { inFlight: 2, queued: 3 }],
    ['b', { inFlight: 1, queued: 0 }],
    ['c', { inFlight: 0, queued: 0 }],
  ]);

  it('shows per pool its providers, summed counts and each busy client there, in config order', () => {
    const { pools } = buildFlowStatus(config(gateway), counts, [
      { pool: 'pool.a', clientId: 'batch', inFlight: 1, queued: 3 },
      { pool: 'pool.a', clientId: 'chat', inFlight: 2, queued: 0 },
      { pool: 'pool.c', clientId: 'chat', inFlight: 0, queued: 0 },
    ]);
    expect(pools).toEqual([
      {
        pool: 'pool.a',
        providers: ['a', 'b'],
        in_flight: 3,
        queued: 3,
        parked: 0,
        clients: [
          { client: 'chat', band: 10, in_flight: 2, queued: 0 },
          { client: 'batch', band: -1, in_flight: 1, queued: 3 },
        ],
      },
      { pool: 'pool.c', providers: ['c'], in_flight: 0, queued: 0, parked: 0, clients: [] },
    ]);
  });

  it("counts a client's requests held at its max_in_flight as the pool's parked, never as its queued", () => {
    // chat holds its 2 leases (max_in_flight 2) and has 2 more waiting: parked, in no provider's line.
    // batch has 3 waiting for a slot of a or b: those are the pool's queued.
    const { pools } = buildFlowStatus(config(gateway), counts, [
      { pool: 'pool.a', clientId: 'chat', inFlight: 2, queued: 2 },
      { pool: 'pool.a', clientId: 'batch', inFlight: 1, queued: 3 },
    ]);
    expect(pools[0]).toMatchObject({ pool: 'pool.a', in_flight: 3, queued: 3, parked: 2 });
    expect(pools[1]).toMatchObject({ pool: 'pool.c', queued: 0, parked: 0 });
  });

  it('never shows a negative parked when the two reads disagree for a moment', () => {
    // The provider counts saw 3 waiting, the client counts (read after a grant) only 1.
    const { pools } = buildFlowStatus(config(gateway), counts, [
      { pool: 'pool.a', clientId: 'batch', inFlight: 2, queued: 1 },
    ]);
    expect(pools[0]).toMatchObject({ queued: 3, parked: 0 });
  });

  it('lists every configured client with its band, weight, caps (max_queued by default half of gateway.max_connections) and counts over every pool', () => {
    const { clients } = buildFlowStatus(config(gateway), counts, [
      { pool: 'pool.a', clientId: 'chat', inFlight: 2, queued: 1 },
      { pool: 'pool.c', clientId: 'chat', inFlight: 1, queued: 0 },
    ]);
    expect(clients).toEqual([
      { id: 'chat', band: 10, weight: 3, max_in_flight: 2, max_queued: 2048, in_flight: 3, queued: 1 },
      { id: 'batch', band: -1, weight: 1, max_in_flight: null, max_queued: 5, in_flight: 0, queued: 0 },
      { id: 'api_keys[0]', band: 0, weight: 1, max_in_flight: null, max_queued: 2048, in_flight: 0, queued: 0 },
    ]);
  });

  it('shows null counts, never a made-up 0, when the queue could not answer', () => {
    const { pools, clients } = buildFlowStatus(config({}), undefined, undefined);
    expect(pools[0]).toMatchObject({ in_flight: null, queued: null, parked: null, clients: [] });
    expect(clients).toEqual([
      { id: 'anonymous', band: 0, weight: 1, max_in_flight: null, max_queued: null, in_flight: null, queued: null },
    ]);
  });

  it.each([
    ['no key', {}, 'anonymous'],
    ['one flat key', { api_keys: ['only'] }, 'api_keys[0]'],
  ])(
    "with flow control off (%s) shows the pools' counts as the one client's, whatever the client counts say",
    (_, settings, id) => {
      // The Redis backend keeps no counts for the fleet's only client (QueueClient.solo): none to read.
      const { pools, clients } = buildFlowStatus(config(settings), counts, []);
      expect(pools.map((p) => p.clients)).toEqual([[{ client: id, band: 0, in_flight: 3, queued: 3 }], []]);
      expect(clients).toEqual([
        { id, band: 0, weight: 1, max_in_flight: null, max_queued: null, in_flight: 3, queued: 3 },
      ]);
    },
  );
});

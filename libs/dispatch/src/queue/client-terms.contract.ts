import { waitUntil } from '../testing/wait-until';
import type { Lease, ProviderQueue, QueueClient, QueueProvider } from './provider-queue';

const pool: QueueProvider = { providerId: 'terms', maxConcurrency: 8, maxQueued: 100 };
const capped = (maxInFlight?: number): QueueClient => ({
  id: 'capped',
  band: 0,
  weight: 1,
  ...(maxInFlight === undefined ? {} : { maxInFlight }),
});

/**
 * A config reload reaches requests already waiting (README "Config refresh", "Clients, priority and
 * fair share"; docs/architecture.md, "Clients, priority and fair share"): `configure` with the
 * clients' new caps grants parked requests the room a raised or removed cap made at once, while the
 * leases running stay; a lowered cap ends no lease and holds new grants until the client's leases
 * fall under it. Run by `describeProviderQueueContract` on every backend.
 */
export function describeClientTermsContract(queueOf: () => ProviderQueue): void {
  const pending: Promise<unknown>[] = [];
  afterEach(async () => {
    await Promise.allSettled(pending.splice(0));
  });
  /** Asks for a lease as `who`, its outcome kept in `granted` (undefined while it waits). */
  const ask = (who: QueueClient) => {
    const entry: { lease?: Lease } = {};
    const lease = queueOf().acquireLease({
      modelGroupKey: 'llama',
      candidates: [pool],
      maxWaitMs: 20_000,
      client: who,
    });
    pending.push(lease.then((l) => (entry.lease = l)).catch(() => undefined));
    return entry;
  };
  const countsOf = async () =>
    (await queueOf().clientCounts()).find((c) => c.clientId === 'capped') ?? { inFlight: 0, queued: 0 };

  it.each([
    ['raised', 6],
    ['removed', undefined],
  ])('a %s max_in_flight grants the parked requests at once while the first leases still run', async (_, cap) => {
    await queueOf().configure([pool], [capped(2)]);
    const requests = Array.from({ length: 6 }, () => ask(capped(2)));
    await waitUntil(
      async () => (await countsOf()).inFlight === 2 && (await countsOf()).queued === 4,
      5000,
      '2 held, 4 parked',
    );
    const first = requests.filter((r) => r.lease);
    expect(first).toHaveLength(2);

    // 6 free slots of 8, and the client's cap goes from 2 to 6 (or away): the 4 parked start now.
    await queueOf().configure([pool], [capped(cap)]);
    await waitUntil(() => requests.every((r) => r.lease), 2000, 'the 4 parked requests granted');
    expect(await countsOf()).toEqual(expect.objectContaining({ inFlight: 6, queued: 0 }));
    await Promise.all(requests.map((r) => r.lease?.release()));
  });

  it('a lowered max_in_flight ends no lease and starts nothing new until the client holds fewer', async () => {
    await queueOf().configure([pool], [capped(6)]);
    const running = Array.from({ length: 6 }, () => ask(capped(6)));
    await waitUntil(() => running.every((r) => r.lease), 5000, '6 running');
    await queueOf().configure([pool], [capped(2)]);
    // Requests that still name the old cap (a replica that has not reloaded) wait all the same.
    const waiting = [ask(capped(6)), ask(capped(2))];
    await waitUntil(async () => (await countsOf()).queued === 2, 5000, '2 waiting');
    const leases = running.map((r) => r.lease as Lease);
    // 6, 5, 4, 3, 2 running: at or over the new cap of 2, nothing starts.
    for (let i = 0; i < 4; i++) {
      await leases[i].release();
      expect(waiting.filter((r) => r.lease)).toHaveLength(0);
      expect((await countsOf()).inFlight).toBe(5 - i);
    }
    // One running: under the new cap of 2, one waiting request starts, not two.
    await leases[4].release();
    await waitUntil(() => waiting.some((r) => r.lease), 2000, 'one waiting request granted');
    expect(waiting.filter((r) => r.lease)).toHaveLength(1);
    expect(await countsOf()).toEqual(expect.objectContaining({ inFlight: 2, queued: 1 }));
    await leases[5].release();
    await waitUntil(() => waiting.every((r) => r.lease), 2000, 'the other waiting request granted');
    await Promise.all(waiting.map((r) => r.lease?.release()));
  });
}

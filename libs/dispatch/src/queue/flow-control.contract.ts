import { waitUntil } from '../testing/wait-until';
import { AdmissionError } from './admission-error';
import type { Lease, LeaseRequest, ProviderQueue, QueueClient, QueueProvider } from './provider-queue';

const provider = (providerId: string, maxConcurrency: number, maxQueued = 1000): QueueProvider => ({
  providerId,
  maxConcurrency,
  maxQueued,
});
const client = (id: string, band: number, extra: Partial<QueueClient> = {}): QueueClient => ({
  id,
  band,
  weight: 1,
  ...extra,
});
const request = (candidates: QueueProvider[], who: QueueClient): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates,
  maxWaitMs: 20_000,
  client: who,
});

/** Grants to a lower band while a higher band waited: for each grant, whether a later grant had a higher band. */
export function priorityInversions(bands: readonly number[]): number {
  let inversions = 0;
  let highestLater = -Infinity;
  for (let i = bands.length - 1; i >= 0; i--) {
    if (highestLater > bands[i]) inversions++;
    highestLater = Math.max(highestLater, bands[i]);
  }
  return inversions;
}

/**
 * The flow-control scenarios of the `ProviderQueue` contract (docs/architecture.md, "Clients, priority
 * and fair share"), run by `describeProviderQueueContract` on every backend: strict priority, weighted
 * fair share, per-client caps and shedding.
 */
export function describeFlowControlContract(queueOf: () => ProviderQueue): void {
  const pending: Promise<unknown>[] = [];
  afterEach(async () => {
    await Promise.allSettled(pending.splice(0));
  });

  /** Starts `who`'s request; its promise's rejection is kept for the test or for afterEach. */
  const ask = (candidates: QueueProvider[], who: QueueClient) => {
    const lease = queueOf().acquireLease(request(candidates, who));
    pending.push(lease.catch(() => undefined));
    return lease;
  };
  const queuedOn = async (ids: string[]) =>
    [...(await queueOf().counts(ids)).values()].reduce((n, c) => n + c.queued, 0);

  /**
   * Queues `who` (one entry per request, in arrival order) behind `holder`, then releases the holder
   * and each lease as soon as it is granted, until `count` grants: the clients granted, in order.
   */
  async function grantOrder(holder: Lease, providers: QueueProvider[], who: QueueClient[], count: number) {
    const order: QueueClient[] = [];
    for (const c of who)
      void ask(providers, c)
        .then(async (lease) => {
          order.push(c);
          if (order.length < count) await lease.release();
        })
        .catch(() => undefined);
    const ids = providers.map((p) => p.providerId);
    await waitUntil(async () => (await queuedOn(ids)) === who.length, 20_000, `${who.length} requests to queue`);
    await holder.release();
    await waitUntil(() => order.length >= count, 30_000, `${count} grants`);
    return order.slice(0, count);
  }

  const share = (order: QueueClient[], id: string) => order.filter((c) => c.id === id).length / order.length;

  it('grants a burst of mixed bands highest band first: 0 priority inversions', async () => {
    const a = provider('a', 1);
    await queueOf().configure([a]);
    const holder = await ask([a], client('holder', 0));
    const bands = [7, 3, 0, -5];
    const who = Array.from({ length: 40 }, (_, i) => client(`c${i % 5}`, bands[(i * 7 + 3) % 4]));
    const order = await grantOrder(holder, [a], who, who.length);
    expect(priorityInversions(order.map((c) => c.band))).toBe(0);
    expect(order.map((c) => c.band)).toEqual([...who.map((c) => c.band)].sort((x, y) => y - x));
  });

  it('keeps strict priority across the pool: a provider serves a higher band waiting on a sibling first', async () => {
    const a = provider('a', 1);
    const b = provider('b', 1);
    await queueOf().configure([a, b]);
    const holdA = await ask([a], client('holder', 0));
    const holdB = await ask([b], client('holder', 0));
    const who = Array.from({ length: 24 }, (_, i) => client(`c${i % 3}`, [0, 9, -2][i % 3]));
    // b stays held: a's slot alone serves waiters queued on a and on b, in one order.
    const order = await grantOrder(holdA, [a, b], who, who.length);
    expect(priorityInversions(order.map((c) => c.band))).toBe(0);
    await holdB.release();
  });

  it('gives two backlogged clients of equal weight 45-55% each, though one sends 10 times the other', async () => {
    const a = provider('a', 1);
    await queueOf().configure([a]);
    const holder = await ask([a], client('holder', 0));
    const [heavy, light] = [client('heavy', 0), client('light', 0)];
    const who = Array.from({ length: 330 }, (_, i) => (i % 11 === 10 ? light : heavy));
    const order = await grantOrder(holder, [a], who, 40);
    expect(share(order, 'light')).toBeGreaterThanOrEqual(0.45);
    expect(share(order, 'light')).toBeLessThanOrEqual(0.55);
  });

  it('splits slots 3:1 between backlogged clients of weights 3 and 1: 72-78% and 22-28%', async () => {
    const a = provider('a', 1);
    await queueOf().configure([a]);
    const holder = await ask([a], client('holder', 0));
    const [three, one] = [client('three', 0, { weight: 3 }), client('one', 0)];
    const who = [...Array.from({ length: 60 }, () => one), ...Array.from({ length: 150 }, () => three)];
    const order = await grantOrder(holder, [a], who, 80);
    expect(share(order, 'three')).toBeGreaterThanOrEqual(0.72);
    expect(share(order, 'three')).toBeLessThanOrEqual(0.78);
  });

  it('holds a client at max_in_flight: its further requests wait while others take free slots', async () => {
    const a = provider('a', 4);
    await queueOf().configure([a]);
    const capped = client('capped', 0, { maxInFlight: 2 });
    let running = 0;
    let most = 0;
    const done = Array.from({ length: 6 }, () =>
      ask([a], capped).then(async (lease) => {
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        await lease.release();
      }),
    );
    await waitUntil(async () => running === 2, 5000, 'two leases of the capped client');
    const other = await ask([a], client('other', 0));
    expect(other.providerId).toBe('a');
    const counts = await queueOf().clientCounts();
    expect(counts.find((c) => c.clientId === 'capped')).toMatchObject({ inFlight: 2 });
    await other.release();
    await Promise.all(done);
    expect(most).toBe(2);
    await waitUntil(
      async () => (await queueOf().clientCounts()).every((c) => c.inFlight === 0 && c.queued === 0),
      5000,
      'every client count back to 0',
    );
  });

  it('passes the room of a waiter that leaves on to the next waiter its client has parked', async () => {
    const [a, b] = [provider('a', 1), provider('b', 1)];
    await queueOf().configure([a, b]);
    const one = client('one', 0, { maxInFlight: 1 });
    const onB = await ask([b], one);
    const other = await ask([a], client('other', 0));
    const abort = new AbortController();
    const second = queueOf().acquireLease({ ...request([a], one), signal: abort.signal });
    pending.push(second.catch(() => undefined));
    const third = ask([a], one);
    await waitUntil(
      async () => (await queueOf().clientCounts()).find((c) => c.clientId === 'one')?.queued === 2,
      5000,
      'two requests of the capped client parked',
    );
    await onB.release(); // the second is back in line, behind the full provider a
    abort.abort(); // ... and leaves: the third must not stay parked
    await other.release();
    await (await third).release();
  });

  it("answers queue_full with Retry-After once a client's max_queued requests wait", async () => {
    const a = provider('a', 1);
    await queueOf().configure([a]);
    const holder = await ask([a], client('holder', 0));
    const limited = client('limited', 0, { maxQueued: 2 });
    const waiting = [ask([a], limited), ask([a], limited)];
    await waitUntil(async () => (await queuedOn(['a'])) === 2, 5000, 'two waiting requests');
    const error = await ask([a], limited).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AdmissionError);
    expect(error).toMatchObject({ code: 'queue_full', message: expect.stringContaining('"limited"') });
    expect((error as AdmissionError).retryAfterS).toBeGreaterThanOrEqual(1);
    await holder.release();
    for (const lease of waiting) await (await lease).release();
  });

  it('sheds the newest sheddable waiter before it refuses a higher band, and never sheds band 0', async () => {
    const a = provider('a', 1, 2);
    await queueOf().configure([a]);
    const holder = await ask([a], client('holder', 0));
    const [batch, chat] = [client('batch', -1), client('chat', 0)];
    const first = ask([a], batch).catch((e: unknown) => e);
    await waitUntil(async () => (await queuedOn(['a'])) === 1, 5000, 'the first batch request to queue');
    const second = ask([a], batch).catch((e: unknown) => e);
    await waitUntil(async () => (await queuedOn(['a'])) === 2, 5000, 'both batch requests to queue');
    const chat1 = ask([a], chat);
    expect(await second).toMatchObject({ code: 'queue_full', message: expect.stringContaining('sheddable') });
    const chat2 = ask([a], chat);
    expect(await first).toMatchObject({ code: 'queue_full' });
    expect(((await first) as AdmissionError).retryAfterS).toBeGreaterThanOrEqual(1);
    expect(await ask([a], chat).catch((e: unknown) => e)).toMatchObject({ code: 'queue_full' });
    expect(await ask([a], batch).catch((e: unknown) => e)).toMatchObject({ code: 'queue_full' });
    await holder.release();
    await (await chat1).release();
    await (await chat2).release();
  });

  it('gives a client under its fair share a place in a full queue: the last waiter of the client over it goes', async () => {
    const a = provider('a', 1, 4);
    await queueOf().configure([a]);
    const [flooder, polite] = [client('flooder', 0), client('polite', 0)];
    const holder = await ask([a], flooder);
    const flood = [0, 1, 2, 3].map(() => ask([a], flooder).catch((e: unknown) => e));
    await waitUntil(async () => (await queuedOn(['a'])) === 4, 5000, "the flooder's four waiters");
    // Retrying at once changes nothing: the queue is full and the flooder is served last in it.
    expect(await ask([a], flooder).catch((e: unknown) => e)).toMatchObject({ code: 'queue_full' });
    // The polite client's newcomer would be served before the flooder's last waiter: it takes its place.
    const politeLease = ask([a], polite);
    expect(await flood[3]).toMatchObject({ code: 'queue_full', message: expect.stringContaining('fair share') });
    expect(await queuedOn(['a'])).toBe(4);
    // A second polite newcomer takes the next one; then the polite client is even with the flooder: full.
    const politeLease2 = ask([a], polite);
    expect(await flood[2]).toMatchObject({ code: 'queue_full' });
    expect(await ask([a], polite).catch((e: unknown) => e)).toMatchObject({ code: 'queue_full' });
    expect(await ask([a], flooder).catch((e: unknown) => e)).toMatchObject({ code: 'queue_full' });
    // The four left are served, each released as it is granted.
    const served = [flood[0], flood[1], politeLease, politeLease2].map(async (lease) =>
      (await (lease as Promise<Lease>)).release(),
    );
    await holder.release();
    await Promise.all(served);
    expect(await queuedOn(['a'])).toBe(0);
  });

  it("reads a pool's counts and its clients' in one snapshot: under churn they always add up", async () => {
    // Clients at their max_in_flight (parked requests) beside requests waiting for a slot, leases
    // released and taken all the time; every snapshot must add up (README "Clients, priority and fair
    // share"): the clients' in_flight sum to the pool's, and their queued
    // (parked included) is at least the pool's: the difference, the pool's parked, is never negative.
    const providers = [provider('a', 3), provider('b', 3)];
    const ids = providers.map((p) => p.providerId);
    await queueOf().configure(providers);
    // 4 requests each, all the time, of two capped clients (1 and 2 leases: parked requests) and one
    // without a cap (3 slots left for its 4: its requests wait for a slot now and then).
    const clients = [client('one', 0, { maxInFlight: 1 }), client('two', 0, { maxInFlight: 2 }), client('free', 0)];
    const until = Date.now() + 3000;
    const churn = async (who: QueueClient) => {
      while (Date.now() < until) {
        const lease = await ask(providers, who);
        if (Math.random() < 0.3) await new Promise((r) => setTimeout(r, Math.random() * 2));
        await lease.release();
      }
    };
    const loops = clients.flatMap((c) => Array.from({ length: 4 }, () => churn(c)));
    const broken: string[] = [];
    let reads = 0;
    let mostParked = 0;
    while (Date.now() < until) {
      const { providers: counts, clients: byClient } = await queueOf().snapshotCounts(ids);
      const pool = [...counts.values()].reduce(
        (n, c) => ({ inFlight: n.inFlight + c.inFlight, queued: n.queued + c.queued }),
        {
          inFlight: 0,
          queued: 0,
        },
      );
      const held = byClient.reduce((n, c) => n + c.inFlight, 0);
      const waiting = byClient.reduce((n, c) => n + c.queued, 0);
      const parked = waiting - pool.queued;
      mostParked = Math.max(mostParked, parked);
      reads++;
      if (held !== pool.inFlight || parked < 0)
        broken.push(
          `pool in_flight ${pool.inFlight} queued ${pool.queued}, clients in_flight ${held} queued ${waiting}`,
        );
    }
    await Promise.all(loops);
    expect({ reads: reads > 20, broken: broken.slice(0, 5), brokenCount: broken.length }).toEqual({
      reads: true,
      broken: [],
      brokenCount: 0,
    });
    expect(mostParked).toBeGreaterThan(0);
  });
}

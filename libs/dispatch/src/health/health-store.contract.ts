import type { HealthTransition } from './health-record';
import type { HealthStore } from './health-store';

/** A pair of stores over one shared state (two replicas), and what each reported. */
export interface HealthStorePair {
  stores: [HealthStore, HealthStore];
  /** Transitions reported by each store, in order (`providerId: from → to`). */
  transitions: [string[], string[]];
  cleanup(): Promise<void>;
}

/** Settings every contract store is built with: 3 failures / 2 successes, cooldown 200 ms, probes every 300 ms. */
export const CONTRACT_SETTINGS = { unhealthy_after: 3, healthy_after: 2, cooldown_ms: 200, interval_ms: 300 };

/** A probe that got no answer within `health.timeout_ms`. */
const TIMED_OUT = 'GET /health timed out after 150 ms';

/** A transition listener that appends `id: from → to` to `into`. */
export const collectTransitions = (into: string[]) => (id: string, t: HealthTransition) =>
  into.push(`${id}: ${t.from} → ${t.to}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The behaviour both health stores share (README "Provider health"), with {@link CONTRACT_SETTINGS}. */
export function describeHealthStoreContract(name: string, make: () => Promise<HealthStorePair>): void {
  describe(`HealthStore contract: ${name}`, () => {
    it('turns a provider unhealthy after 3 consecutive probe failures and healthy after 2 probe successes', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        await store.record('p', false);
        await store.record('p', false);
        expect(store.unhealthy().has('p')).toBe(false);
        await store.record('p', false, 'HTTP 503');
        expect(store.unhealthy().has('p')).toBe(true);
        expect(store.views().get('p')).toMatchObject({ state: 'unhealthy', reason: '3 probes failed: HTTP 503' });
        await store.record('p', true);
        expect(store.unhealthy().has('p')).toBe(true);
        await store.record('p', true);
        expect(store.unhealthy().has('p')).toBe(false);
      } finally {
        await cleanup();
      }
    });

    it('resets the probe failure run on a probe success', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (const ok of [false, false, true, false, false]) await store.record('p', ok);
        expect(store.unhealthy().has('p')).toBe(false);
      } finally {
        await cleanup();
      }
    });

    it('keeps providers independent', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (let i = 0; i < 3; i++) await store.record('a', false);
        await store.record('b', true);
        await store.refresh(['a', 'b']);
        expect([...store.unhealthy()]).toEqual(['a']);
      } finally {
        await cleanup();
      }
    });

    it('turns a provider unhealthy on failing requests while its probe passes, and a passing probe never brings it back', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (let i = 0; i < 3; i++) {
          await store.record('p', true);
          await store.recordRequest('p', false, 'upstream_timeout');
        }
        expect(store.unhealthy().has('p')).toBe(true);
        expect(store.views().get('p')).toMatchObject({
          state: 'unhealthy',
          reason: '3 requests failed: upstream_timeout',
        });
        for (let i = 0; i < 5; i++) await store.record('p', true);
        expect(store.unhealthy().has('p')).toBe(true);
      } finally {
        await cleanup();
      }
    });

    it('a request that succeeds resets the failed-request run', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (const ok of [false, false, true, false, false]) await store.recordRequest('p', ok);
        expect(store.unhealthy().has('p')).toBe(false);
      } finally {
        await cleanup();
      }
    });

    it('after the cooldown gives exactly one trial (across replicas); its success brings the provider back', async () => {
      const { stores, transitions, cleanup } = await make();
      const [a, b] = stores;
      try {
        for (let i = 0; i < 3; i++) await a.recordRequest('p', false, 'upstream_error');
        await b.refresh(['p']);
        expect(a.trialsDue().has('p')).toBe(false);
        expect(await a.claimTrial('p', 5000)).toBe(false);
        await sleep(250);
        await b.refresh(['p']);
        expect(a.views().get('p')?.state).toBe('half_open');
        expect(a.trialsDue().has('p')).toBe(true);
        expect(a.unhealthy().has('p')).toBe(true);
        const claims = await Promise.all([a.claimTrial('p', 5000), b.claimTrial('p', 5000)]);
        expect(claims.filter(Boolean)).toHaveLength(1);
        const winner = claims[0] ? a : b;
        expect(winner.views().get('p')?.state).toBe('trial');
        await winner.recordRequest('p', true);
        expect(winner.unhealthy().has('p')).toBe(false);
        await a.refresh(['p']);
        await b.refresh(['p']);
        expect(a.unhealthy().has('p')).toBe(false);
        expect(b.unhealthy().has('p')).toBe(false);
        // Every transition reported once, by the replica that made it.
        expect([...transitions[0], ...transitions[1]].sort()).toEqual(
          ['p: healthy → unhealthy', 'p: half_open → trial', 'p: trial → healthy'].sort(),
        );
      } finally {
        await cleanup();
      }
    });

    it('a failed trial starts another cooldown', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (let i = 0; i < 3; i++) await store.recordRequest('p', false);
        await sleep(250);
        expect(await store.claimTrial('p', 5000)).toBe(true);
        await store.recordRequest('p', false, 'upstream_timeout');
        expect(store.views().get('p')).toMatchObject({
          state: 'unhealthy',
          reason: 'trial request failed: upstream_timeout',
        });
        expect(store.trialsDue().has('p')).toBe(false);
        await sleep(250);
        expect(store.trialsDue().has('p')).toBe(true);
      } finally {
        await cleanup();
      }
    });

    it('a trial given back by its own claim is half-open again at once (across replicas); another claim gives nothing back', async () => {
      const { stores, transitions, cleanup } = await make();
      const [a, b] = stores;
      try {
        for (let i = 0; i < 3; i++) await a.recordRequest('p', false, 'upstream_error');
        await sleep(250);
        await b.refresh(['p']);
        expect(await a.claimTrial('p', 60_000, 'claim-1')).toBe(true);
        await b.refresh(['p']);
        expect(b.views().get('p')?.state).toBe('trial');
        // Not the holder's claim: the trial stays out.
        await b.releaseTrial('p', 'claim-2');
        await a.refresh(['p']);
        expect(a.views().get('p')?.state).toBe('trial');
        expect(await b.claimTrial('p', 60_000, 'claim-2')).toBe(false);
        // The holder gives it back: the next request, on either replica, may take it now, not in 60 s.
        await a.releaseTrial('p', 'claim-1');
        expect(a.views().get('p')?.state).toBe('half_open');
        await b.refresh(['p']);
        expect(b.trialsDue().has('p')).toBe(true);
        expect(await b.claimTrial('p', 60_000, 'claim-3')).toBe(true);
        // A release that comes late (the trial was taken again) leaves the new claim alone.
        await a.releaseTrial('p', 'claim-1');
        await a.refresh(['p']);
        expect(a.views().get('p')?.state).toBe('trial');
        await b.recordRequest('p', true);
        // A release after the trial was booked changes nothing.
        await b.releaseTrial('p', 'claim-3');
        await a.refresh(['p']);
        expect(a.unhealthy().has('p')).toBe(false);
        expect([...transitions[0], ...transitions[1]].filter((t) => t.includes('half_open')).sort()).toEqual(
          ['p: half_open → trial', 'p: half_open → trial', 'p: trial → half_open'].sort(),
        );
      } finally {
        await cleanup();
      }
    });

    it('a trial answered 429 is over when its back-off is, not at the end of its hold', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (let i = 0; i < 3; i++) await store.recordRequest('p', false);
        await sleep(250);
        expect(await store.claimTrial('p', 60_000, 'claim-1')).toBe(true);
        await store.backOff('p', 0.2, 'upstream 429');
        expect(store.views().get('p')?.state).toBe('trial');
        expect(store.trialsDue().has('p')).toBe(false);
        await sleep(250);
        expect(store.trialsDue().has('p')).toBe(true);
      } finally {
        await cleanup();
      }
    });

    it('a probe that timed out while the provider was busy is no evidence; a refused one still is', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        for (let i = 0; i < 5; i++) await store.record('p', false, TIMED_OUT, { timedOut: true, busy: true });
        expect(store.unhealthy().has('p')).toBe(false);
        // A timeout while idle counts; a failure that is not a timeout counts whatever the load.
        await store.record('p', false, TIMED_OUT, { timedOut: true, busy: false });
        await store.record('p', false, 'GET /health failed (ECONNREFUSED)', { timedOut: false, busy: true });
        await store.record('p', false, 'GET /health answered 503');
        expect(store.views().get('p')).toMatchObject({
          state: 'unhealthy',
          reason: '3 probes failed: GET /health answered 503',
        });
      } finally {
        await cleanup();
      }
    });

    it('a probe that timed out within interval_ms of a success on any replica is no evidence; later it is', async () => {
      const { stores, cleanup } = await make();
      const [a, b] = stores;
      try {
        // b served a request; its probe round reports it, so a's timeouts right after do not count.
        await b.recordRequest('p', true);
        await b.record('p', true);
        for (let i = 0; i < 3; i++) await a.record('p', false, TIMED_OUT, { timedOut: true, busy: false });
        expect(a.unhealthy().has('p')).toBe(false);
        await sleep(400);
        for (let i = 0; i < 3; i++) await a.record('p', false, TIMED_OUT, { timedOut: true, busy: false });
        expect(a.views().get('p')).toMatchObject({ state: 'unhealthy', reason: `3 probes failed: ${TIMED_OUT}` });
      } finally {
        await cleanup();
      }
    });

    it('a request that succeeds ends a run of failed probes and brings back a provider its probe took out', async () => {
      const { stores, transitions, cleanup } = await make();
      const [a, b] = stores;
      try {
        for (let i = 0; i < 2; i++) await a.record('p', false, 'GET /health answered 503');
        await b.refresh(['p']);
        await b.recordRequest('p', true);
        for (let i = 0; i < 2; i++) await a.record('p', false, 'GET /health answered 503');
        expect(a.unhealthy().has('p')).toBe(false);
        await a.record('p', false, 'GET /health answered 503');
        expect(a.unhealthy().has('p')).toBe(true);
        await b.refresh(['p']);
        await b.recordRequest('p', true);
        await a.refresh(['p']);
        expect(a.unhealthy().has('p')).toBe(false);
        expect([...transitions[0], ...transitions[1]].sort()).toEqual([
          'p: healthy → unhealthy',
          'p: unhealthy → healthy',
        ]);
      } finally {
        await cleanup();
      }
    });

    it('backs a provider off for the seconds asked, shared by replicas, without touching its health', async () => {
      const { stores, cleanup } = await make();
      const [a, b] = stores;
      try {
        await a.backOff('p', 1, 'upstream 429');
        await b.refresh(['p']);
        const since = a.views().get('p')?.since;
        // `since` is when the back-off began, on the store's clock (Redis TIME with Redis), the same for both.
        expect(since).toEqual(expect.any(Number));
        for (const store of [a, b]) {
          expect(store.unhealthy().has('p')).toBe(true);
          expect(store.views().get('p')).toMatchObject({ state: 'backoff', reason: 'upstream 429', since });
        }
        // A 429 that extends the running back-off keeps when it began.
        await sleep(20);
        await b.backOff('p', 1, 'upstream 429');
        await a.refresh(['p']);
        expect(a.views().get('p')).toMatchObject({ state: 'backoff', since });
        const until = a.views().get('p')?.retryAt;
        expect(until).toBeGreaterThanOrEqual((since ?? Infinity) + 1020);
        await sleep(1200);
        expect(a.unhealthy().has('p')).toBe(false);
        expect(b.unhealthy().has('p')).toBe(false);
        // Healthy again: its last change is the end of the back-off.
        expect(a.views().get('p')).toMatchObject({ state: 'healthy', since: until });
      } finally {
        await cleanup();
      }
    });
  });
}

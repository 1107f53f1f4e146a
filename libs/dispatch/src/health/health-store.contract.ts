import type { HealthStore } from './provider-health';

/** The behaviour both health stores share (issue 5 "provider health"), thresholds 3 failures / 2 successes. */
export function describeHealthStoreContract(name: string, make: () => Promise<{ stores: [HealthStore, HealthStore]; cleanup(): Promise<void> }>): void {
  describe(`HealthStore contract: ${name}`, () => {
    it('turns a provider unhealthy after 3 consecutive failures and healthy after 2 successes', async () => {
      const { stores, cleanup } = await make();
      const [store] = stores;
      try {
        await store.record('p', false);
        await store.record('p', false);
        expect(store.unhealthy().has('p')).toBe(false);
        await store.record('p', false);
        expect(store.unhealthy().has('p')).toBe(true);
        await store.record('p', true);
        expect(store.unhealthy().has('p')).toBe(true);
        await store.record('p', true);
        expect(store.unhealthy().has('p')).toBe(false);
      } finally {
        await cleanup();
      }
    });

    it('resets the failure run on a success', async () => {
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
  });
}

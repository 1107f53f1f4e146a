import { describeHealthStoreContract } from './health-store.contract';
import { MemoryHealthStore } from './memory-health-store';
import { nextHealth, INITIAL_HEALTH } from './provider-health';

describeHealthStoreContract('memory', async () => {
  const store = new MemoryHealthStore(() => ({ unhealthy_after: 3, healthy_after: 2 }));
  return { stores: [store, store], cleanup: async () => undefined };
});

describe('nextHealth', () => {
  const settings = { unhealthy_after: 2, healthy_after: 1 };
  it.each([
    [INITIAL_HEALTH, false, { state: 'healthy', failures: 1, successes: 0 }],
    [{ state: 'healthy', failures: 1, successes: 0 }, false, { state: 'unhealthy', failures: 2, successes: 0 }],
    [{ state: 'unhealthy', failures: 5, successes: 0 }, true, { state: 'healthy', failures: 0, successes: 1 }],
    [{ state: 'healthy', failures: 1, successes: 0 }, true, { state: 'healthy', failures: 0, successes: 1 }],
  ] as const)('moves %j on ok=%s to %j', (prev, ok, next) => {
    expect(nextHealth(prev, ok, settings)).toEqual(next);
  });
});

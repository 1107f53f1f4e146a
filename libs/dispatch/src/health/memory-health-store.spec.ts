import { collectTransitions, CONTRACT_SETTINGS, describeHealthStoreContract } from './health-store.contract';
import { MemoryHealthStore } from './memory-health-store';
import { INITIAL_HEALTH, nextHealth } from './health-record';
import { healthView } from './health-view';

describeHealthStoreContract('memory', async () => {
  const seen: string[] = [];
  const store = new MemoryHealthStore(() => CONTRACT_SETTINGS, collectTransitions(seen));
  return { stores: [store, store], transitions: [seen, []], cleanup: async () => undefined };
});

describe('nextHealth', () => {
  const settings = { unhealthy_after: 2, healthy_after: 1, cooldown_ms: 1000 };
  it.each([
    [INITIAL_HEALTH, false, { state: 'healthy', failures: 1, successes: 0 }],
    [{ ...INITIAL_HEALTH, failures: 1 }, false, { state: 'unhealthy', cause: 'probe', failures: 2, successes: 0 }],
    [
      { ...INITIAL_HEALTH, state: 'unhealthy', cause: 'probe', failures: 5 },
      true,
      { state: 'healthy', failures: 0, successes: 1 },
    ],
    [{ ...INITIAL_HEALTH, failures: 1 }, true, { state: 'healthy', failures: 0, successes: 1 }],
  ] as const)('moves %j on probe ok=%s to %j', (prev, ok, next) => {
    expect(nextHealth(prev, { kind: 'probe', ok }, settings, 0).next).toMatchObject(next);
  });

  it('leaves a provider taken out by requests unhealthy whatever its probe says, until its trial succeeds', () => {
    let record = INITIAL_HEALTH;
    for (let i = 0; i < 2; i++)
      record = nextHealth(record, { kind: 'request', ok: false, reason: 'reset' }, settings, 100).next;
    expect(record).toMatchObject({
      state: 'unhealthy',
      cause: 'requests',
      retryAt: 1100,
      reason: '2 requests failed: reset',
    });
    for (let i = 0; i < 5; i++) record = nextHealth(record, { kind: 'probe', ok: true }, settings, 200).next;
    expect(healthView(record, 500).state).toBe('unhealthy');
    expect(healthView(record, 1100).state).toBe('half_open');
    const claimed = nextHealth(record, { kind: 'trial', holdMs: 300 }, settings, 1100);
    expect(claimed.transition).toEqual({ from: 'half_open', to: 'trial', reason: '2 requests failed: reset' });
    const healed = nextHealth(claimed.next, { kind: 'request', ok: true }, settings, 1200);
    expect(healed.transition).toEqual({ from: 'trial', to: 'healthy', reason: undefined });
    expect(healed.next.state).toBe('healthy');
  });

  it('reports no change for a request that succeeds on a provider with nothing to reset', () => {
    expect(nextHealth(INITIAL_HEALTH, { kind: 'request', ok: true }, settings, 0).changed).toBe(false);
  });

  it('caps the probe success run so a steady healthy provider is not rewritten', () => {
    const once = nextHealth(INITIAL_HEALTH, { kind: 'probe', ok: true }, settings, 0).next;
    expect(nextHealth(once, { kind: 'probe', ok: true }, settings, 0).changed).toBe(false);
  });

  it('keeps the latest success a probe round reports, never moving it back, and weighs a timeout against it', () => {
    const timedOut = { kind: 'probe', ok: false, timedOut: true, busy: false } as const;
    let record = nextHealth(INITIAL_HEALTH, { kind: 'probe', ok: true, okAt: 5000 }, settings, 5000).next;
    record = nextHealth(record, { kind: 'probe', ok: true, okAt: 3000 }, settings, 5100).next;
    expect(record.lastOkAt).toBe(5000);
    // interval_ms defaults to 5000: a timeout 5 s after the success is no evidence, one just after that is.
    expect(nextHealth(record, timedOut, settings, 10_000).changed).toBe(false);
    expect(nextHealth(record, timedOut, settings, 10_001).next.failures).toBe(1);
    expect(nextHealth(record, timedOut, { ...settings, interval_ms: 1000 }, 6001).next.failures).toBe(1);
  });
});

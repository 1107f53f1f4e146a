import { ProbeClock, probeFreshMs } from './probe-clock';

describe('ProbeClock: whether a provider probe passes, for weighing first-byte timeouts (README "Provider health")', () => {
  const timing = { interval_ms: 1000, timeout_ms: 100 };

  it('a fresh pass passes; a failure after it, a stale pass or none at all does not', () => {
    const clock = new ProbeClock();
    expect(clock.passing('p', timing, 0)).toBe(false);
    clock.note('p', true, 1000);
    expect(clock.passing('p', timing, 1000)).toBe(true);
    expect(clock.passing('p', timing, 1000 + probeFreshMs(timing))).toBe(true);
    expect(clock.passing('p', timing, 1001 + probeFreshMs(timing))).toBe(false);
    clock.note('p', false, 1500);
    expect(clock.passing('p', timing, 1500)).toBe(false);
    expect(clock.passing('q', timing, 1500)).toBe(false);
  });

  it('stands for two probe rounds, each at most interval_ms and three timeout_ms', () => {
    expect(probeFreshMs(timing)).toBe(2600);
  });
});

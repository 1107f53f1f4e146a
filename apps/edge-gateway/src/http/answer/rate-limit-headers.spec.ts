import { resetDuration } from './rate-limit-headers';

// OpenAI guide "Rate limits", "Rate limits in headers": x-ratelimit-reset-tokens reads like `6m0s`, `1s`, `20ms`.
describe('resetDuration', () => {
  it.each([
    [0, '0s'],
    [-5, '0s'],
    [Number.NaN, '0s'],
    [0.2, '1ms'],
    [20, '20ms'],
    [999, '999ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [1020, '1.02s'],
    [1001, '1.001s'],
    [59_999, '59.999s'],
    [60_000, '1m0s'],
    [360_000, '6m0s'],
    [361_250, '6m1.25s'],
    [3_600_000, '1h0m0s'],
    [86_399_000, '23h59m59s'],
    [86_400_000, '24h0m0s'],
  ])('%p ms is %p', (ms, text) => {
    expect(resetDuration(ms)).toBe(text);
  });
});

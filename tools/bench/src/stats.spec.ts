import { littleMeanMs, mean, median, pairedDifferences, pairedRatios, percentile, spread } from './stats';

describe('stats', () => {
  it.each([
    [[5, 1, 3], 3],
    [[4, 1, 3, 2], 2.5],
    [[7], 7],
  ])('takes the median of %j as %d', (values, expected) => {
    expect(median(values)).toBe(expected);
  });

  it.each([
    [50, 5],
    [99, 10],
    [100, 10],
    [0, 1],
    [10, 1],
    [11, 2],
  ])('takes the nearest-rank p%d of 1..10 as %d', (p, expected) => {
    expect(percentile([10, 9, 8, 7, 6, 5, 4, 3, 2, 1], p)).toBe(expected);
  });

  it('gives NaN for empty inputs instead of a made-up 0', () => {
    expect(median([])).toBeNaN();
    expect(mean([])).toBeNaN();
    expect(percentile([], 50)).toBeNaN();
    expect(spread([NaN])).toEqual({ median: NaN, min: NaN, max: NaN, n: 0 });
  });

  it('reports the median with min and max of the rounds, leaving out rounds that did not run', () => {
    expect(spread([3, NaN, 1, 2])).toEqual({ median: 2, min: 1, max: 3, n: 3 });
  });

  it("derives the mean latency from throughput by Little's law", () => {
    expect(littleMeanMs(1, 5000)).toBeCloseTo(0.2, 10);
    expect(littleMeanMs(64, 32000)).toBeCloseTo(2, 10);
    expect(littleMeanMs(1, 0)).toBeNaN();
  });

  it('pairs interleaved rounds and skips a round missing on either side', () => {
    expect(pairedDifferences([1.5, 2, NaN], [1, 1, 1])).toEqual([0.5, 1]);
    expect(pairedRatios([8, 9, 4], [2, 0, 1])).toEqual([4, 4]);
  });
});

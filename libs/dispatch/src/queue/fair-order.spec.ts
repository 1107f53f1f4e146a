import { bandRank, FairTags, orderScore, PRIORITY_SPAN, rankBand } from './fair-order';
import fairOrderLua from './scripts/includes/fair-order.lua';
import { ServiceRate } from './service-rate';

describe('fair order', () => {
  it.each([
    [1000, 1],
    [0, 1001],
    [-1000, 2001],
  ])('gives band %i the BullMQ priority %i (1 is served first)', (band, rank) => {
    expect(bandRank(band)).toBe(rank);
    expect(rankBand(rank)).toBe(band);
  });

  it('orders by band first, then start tag, in the score layout priority * 2^32 + tag', () => {
    expect(orderScore(5, 1e6)).toBeLessThan(orderScore(4, 0));
    expect(orderScore(0, 2.5)).toBeLessThan(orderScore(0, 2.75));
    expect(orderScore(0, 3) - bandRank(0) * PRIORITY_SPAN).toBe(3);
  });

  it("uses the same span as the Redis scripts' score layout", () => {
    expect(/local PRIORITY_SPAN = (\d+)/.exec(fairOrderLua)?.[1]).toBe(String(PRIORITY_SPAN));
  });

  it('tags a waiting request S = max(V, F_c) and advances F_c by 1/weight; a grant moves V up only', () => {
    const tags = new FairTags();
    const heavy = { id: 'heavy', band: 0, weight: 2 };
    const light = { id: 'light', band: 0, weight: 1 };
    expect([tags.arrive('p', heavy), tags.arrive('p', heavy), tags.arrive('p', heavy)]).toEqual([0, 0.5, 1]);
    expect([tags.arrive('p', light), tags.arrive('p', light)]).toEqual([0, 1]);
    tags.granted('p', 0, 4);
    tags.granted('p', 0, 1);
    expect(tags.arrive('p', light)).toBe(4);
    expect(tags.arrive('other-pool', light)).toBe(0);
    expect(tags.arrive('p', { ...light, band: 3 })).toBe(0);
  });
});

describe('ServiceRate', () => {
  it('estimates Retry-After from the waiters ahead, the mean lease time and the slots, 1 to 60 s', () => {
    const rate = new ServiceRate(1000, 0.5);
    expect(rate.retryAfterS('p', 4, 2)).toBe(2);
    rate.record('p', 4000);
    expect(rate.retryAfterS('p', 4, 2)).toBe(8);
    rate.record('p', 2000);
    expect(rate.retryAfterS('p', 4, 2)).toBe(6);
    expect(rate.retryAfterS('p', 0, 8)).toBe(1);
    expect(rate.retryAfterS('p', 1000, 1)).toBe(60);
  });
});

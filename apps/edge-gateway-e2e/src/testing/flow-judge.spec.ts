import { certainInversions, peakConcurrency, sharesBetween, type JudgedCall } from './flow-judge';

const call = (client: string, band: number, provider: string, startedAt: number, endedAt: number): JudgedCall => ({
  client,
  band,
  provider,
  startedAt,
  endedAt,
});

describe('flow judge', () => {
  it('counts no inversion for grants in band order, even when two providers overlap', () => {
    const calls = [
      call('hi', 5, 'p1', 10, 20),
      call('hi', 5, 'p2', 11, 21),
      call('mid', 0, 'p1', 21, 30),
      call('lo', -1, 'p2', 22, 31),
    ];
    expect(certainInversions(calls, [call('h', 0, 'p1', 0, 9), call('h', 0, 'p2', 0, 10)])).toBe(0);
  });

  it('counts a lower band granted for certain before a higher band waiting', () => {
    const calls = [call('lo', -1, 'p1', 10, 20), call('hi', 5, 'p1', 21, 30)];
    expect(certainInversions(calls, [call('h', 0, 'p1', 0, 9)])).toBe(1);
  });

  it('does not count what the lag between Redis and the upstream could explain', () => {
    // p2's grant window [8, 12] overlaps p1's [9, 10]: either could have been granted first.
    const calls = [call('lo', -1, 'p1', 10, 20), call('hi', 5, 'p2', 12, 30)];
    expect(certainInversions(calls, [call('h', 0, 'p1', 0, 9), call('h', 0, 'p2', 0, 8)])).toBe(0);
  });

  it('measures peak concurrency per client, a hand-off at the same ms not counted twice', () => {
    const calls = [
      call('c', 0, 'p', 0, 10),
      call('c', 0, 'p', 10, 20),
      call('c', 0, 'p', 5, 15),
      call('x', 0, 'p', 0, 30),
    ];
    expect(peakConcurrency(calls, 'c')).toBe(2);
  });

  it('computes shares of the calls started in a window', () => {
    const calls = [call('a', 0, 'p', 0, 1), call('b', 0, 'p', 1, 2), call('a', 0, 'p', 2, 3), call('a', 0, 'p', 9, 10)];
    expect(Object.fromEntries(sharesBetween(calls, 0, 5))).toEqual({ a: 2 / 3, b: 1 / 3 });
  });
});

import {
  certainInversions,
  grantWindows,
  inversionsWhileWaiting,
  peakConcurrency,
  sharesBetween,
  type JudgedCall,
  type WaitingSample,
} from './flow-judge';

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

  it('opens each grant window at the end of the previous call on the provider', () => {
    const a = call('a', 0, 'p1', 10, 20);
    const b = call('b', 0, 'p1', 22, 30);
    const c = call('c', 0, 'p2', 5, 9);
    const windows = grantWindows([b, a, c]);
    expect(windows.get(a)).toEqual({ lo: -Infinity, hi: 10 });
    expect(windows.get(b)).toEqual({ lo: 20, hi: 22 });
    expect(windows.get(c)).toEqual({ lo: -Infinity, hi: 5 });
  });

  describe('inversions of a continuous run, judged from waiting counts', () => {
    const bands = new Map([
      ['hi', 5],
      ['mid', 0],
    ]);
    const sample = (sentAt: number, receivedAt: number, hi: number): WaitingSample => ({
      sentAt,
      receivedAt,
      waiting: new Map([['hi', hi]]),
    });

    it('counts a lower grant made while more higher-band requests waited than were granted since', () => {
      // hi had 2 waiting at ~[8, 9]; mid is granted in [20, 21]; only one hi call could have been granted since.
      const calls = [
        call('mid', 0, 'p1', 0, 20),
        call('mid', 0, 'p1', 21, 40),
        call('hi', 5, 'p2', 12, 30),
        call('hi', 5, 'p2', 31, 50),
      ];
      const judged = inversionsWhileWaiting(calls, [sample(8, 9, 2)], bands);
      expect(judged.inversions.map((c) => [c.client, c.startedAt])).toEqual([['mid', 21]]);
      expect(judged.judged).toBe(1);
    });

    it('counts none when the higher-band waiters could all have been granted before', () => {
      const calls = [call('mid', 0, 'p1', 0, 20), call('mid', 0, 'p1', 21, 40), call('hi', 5, 'p2', 12, 30)];
      // One hi waited; its call could have been granted in [-inf, 12], before mid's grant in [20, 21].
      expect(inversionsWhileWaiting(calls, [sample(8, 9, 1)], bands).inversions).toEqual([]);
    });

    it('judges nothing from a sample read after the grant window opened, or with no higher band waiting', () => {
      const calls = [call('mid', 0, 'p1', 0, 20), call('mid', 0, 'p1', 21, 40)];
      expect(inversionsWhileWaiting(calls, [sample(19, 21, 3)], bands)).toEqual({ inversions: [], judged: 0 });
      expect(inversionsWhileWaiting(calls, [sample(8, 9, 0)], bands)).toEqual({ inversions: [], judged: 0 });
    });

    it('never counts a grant to the higher band itself', () => {
      const calls = [call('hi', 5, 'p1', 0, 20), call('hi', 5, 'p1', 21, 40)];
      expect(inversionsWhileWaiting(calls, [sample(8, 9, 5)], bands)).toEqual({ inversions: [], judged: 0 });
    });
  });
});

import type { JudgedCall, WaitingSample } from '@iop/fake-upstream';
import { FLOW_BENCH_CLIENTS, type FlowAnswers } from './flow-config';
import { emptyFlow, judgeFlow } from './flow-judging';
import { flowChecks } from './flow-report';

const opts = { seconds: 10, replicas: 1, holdMs: 40 };
const answers = Object.fromEntries(
  FLOW_BENCH_CLIENTS.map((c) => [c.id, { ok: 0, queueFull: 0, other: 0 }]),
) as FlowAnswers;
const bandOf = (client: string) => FLOW_BENCH_CLIENTS.find((c) => c.id === client)?.band ?? 0;

/** Back-to-back calls on two providers of one slot, 30 ms each, 34 ms apart, in the order of `clients`. */
function calls(clients: readonly string[]): JudgedCall[] {
  return clients.map((client, i) => {
    const startedAt = 1000 + Math.floor(i / 2) * 34;
    return { client, band: bandOf(client), provider: `up-p${(i % 2) + 1}`, startedAt, endedAt: startedAt + 30 };
  });
}

describe('flow judging', () => {
  // The window skips the first tenth of the 2 s run (0.2 s): the first 12 calls, two rounds of the pattern.
  const order = Array.from(
    { length: 96 },
    (_, i) => ['w3', 'heavy', 'w3', 'light', 'w3', 'w1'][i % 6] as (typeof FLOW_BENCH_CLIENTS)[number]['id'],
  );
  const base = { opts, answers, startedAt: 1000, stoppedAt: 3000 };

  it('shares the band-0 grants of the window by client and by pair, against the weights', () => {
    const samples: WaitingSample[] = [
      {
        sentAt: 1500,
        receivedAt: 1501,
        waiting: new Map([
          ['heavy', 30],
          ['light', 3],
          ['w3', 15],
          ['w1', 15],
        ]),
      },
    ];
    const flow = judgeFlow({ ...base, calls: calls(order), samples });
    expect(flow.window).toEqual([200, 2000]);
    const share = (id: string) => flow.clients.find((c) => c.id === id);
    expect(share('w3')).toMatchObject({ weightShare: 0.5, backlogged: 1 });
    expect(share('w3')?.share).toBeCloseTo(0.5, 10);
    expect(share('heavy')?.weightShare).toBeCloseTo(1 / 6, 10);
    expect(share('hi')).toMatchObject({ share: null, weightShare: null, backlogged: 0 });
    expect(flow.pairs.map((p) => p.a)).toEqual(['heavy', 'w3']);
    expect(flow.pairs[0].aShare).toBeCloseTo(0.5, 10);
    expect(flow.pairs[1].aShare).toBeCloseTo(0.75, 10);
    expect(flow.inversions).toBe(0);
    expect(flowChecks(flow).map((c) => c.met)).toEqual([true, true, null]);
  });

  it('counts a band-0 grant made while more hi requests waited than hi could have been granted since', () => {
    // A read at 1400 shows 3 hi requests waiting; hi gets only one call afterwards, at the very end.
    const withHi = [...order.slice(0, 95), 'hi'] as typeof order;
    const samples: WaitingSample[] = [{ sentAt: 1400, receivedAt: 1401, waiting: new Map([['hi', 3]]) }];
    const flow = judgeFlow({ ...base, calls: calls(withHi), samples });
    expect(flow.inversions).toBeGreaterThan(0);
    expect(flow.inversionExamples[0]).toMatchObject({ band: 0 });
    expect(flowChecks(flow).at(-1)).toMatchObject({ met: false });
  });

  it('reports the targets as not measured, with the reason, when the run failed', () => {
    const checks = flowChecks(emptyFlow(opts, 'redis-server did not start'));
    expect(checks.map((c) => [c.met, c.measured])).toEqual([
      [null, 'failed: redis-server did not start'],
      [null, 'failed: redis-server did not start'],
    ]);
  });
});

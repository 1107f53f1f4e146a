import type { TargetCheck } from './bench-results';
import type { FlowResults } from './flow-judging';
import { table } from './markdown';

const pct = (share: number | null) => (share === null ? '—' : `${(share * 100).toFixed(1)}%`);
const range = ([low, high]: [number, number]) => `${(low * 100).toFixed(0)}–${(high * 100).toFixed(0)}%`;
const within = (share: number, [low, high]: [number, number]) => share >= low && share <= high;

/**
 * The flow-control targets of the `flow` scenario (README "Benchmarks"): each band-0 pair's shares
 * while backlogged within their ranges (equal weights 45–55%, weights 3:1 72–78% / 22–28%), and no
 * priority inversion.
 */
export function flowChecks(flow: FlowResults | undefined): TargetCheck[] {
  const notMeasured = flow?.error ? `failed: ${flow.error}` : 'not measured';
  const pairChecks = (flow?.pairs ?? []).map((p): TargetCheck => ({
    goal: `flow control: ${p.what}, both backlogged: ${p.a} ${range(p.target)} and ${p.b} ${range([1 - p.target[1], 1 - p.target[0]])} of their grants`,
    measured: `${p.a} ${pct(p.aShare)} / ${p.b} ${pct(1 - p.aShare)} of ${p.grants} grants`,
    met: p.grants > 0 ? within(p.aShare, p.target) : null,
  }));
  if (!flow || flow.error || pairChecks.length === 0)
    return [
      { goal: 'flow control: shares of backlogged clients by weight', measured: notMeasured, met: null },
      { goal: 'flow control: 0 priority inversions', measured: notMeasured, met: null },
    ];
  return [
    ...pairChecks,
    {
      goal: 'flow control: 0 priority inversions (a grant to a lower band while a higher-band request the provider could serve waited)',
      measured: `${flow.inversions} of ${flow.judged} grants to a lower band made while a higher band had requests waiting`,
      met: flow.judged > 0 ? flow.inversions === 0 : null,
    },
  ];
}

/** The `flow` section of the report: the run, each client's grants and shares, the pairs, inversions. */
export function flowSection(flow: FlowResults): string {
  const o = flow.options;
  const out: string[] = [
    `A mixed run of ${flow.seconds.toFixed(0)} s (\`--flow-seconds\`): ${o.replicas} gateway replica(s) with the Redis backend on a redis-server of ` +
      `their own, one pool of two providers of one slot each on a fake upstream that journals every call (client, provider, start, end) and holds it ${o.holdMs} ms; ` +
      `each client keeps its requests outstanding (sent to the replicas in turn). The higher band (hi) sends one request per lane with a pause of 50–300 ms between, ` +
      `the sheddable band (batch) retries 100 ms after a refusal. Shares are of the grants (calls started) between ${(flow.window[0] / 1000).toFixed(1)} s and ` +
      `${(flow.window[1] / 1000).toFixed(1)} s: ${flow.grants} grants; the clients' waiting counts were read from Redis every 10 ms (${flow.samples} reads in the window).`,
  ];
  if (flow.error) return [...out, '', `failed: ${flow.error}`].join('\n');
  out.push(
    '',
    table(
      [
        'client',
        'band',
        'weight',
        'outstanding',
        'grants',
        'share of band-0 grants',
        'weight share',
        'waiting in reads',
        'answers over the run: 200 / 429 queue_full / other',
      ],
      flow.clients.map((c) => [
        c.id,
        String(c.band),
        String(c.weight),
        String(c.lanes),
        String(c.grants),
        pct(c.share),
        pct(c.weightShare),
        pct(c.backlogged),
        `${c.answers.ok} / ${c.answers.queueFull} / ${c.answers.other}`,
      ]),
    ),
    '',
    table(
      ['pair (band 0, both backlogged)', 'grants', 'shares', 'target', 'result'],
      flow.pairs.map((p) => [
        `${p.a} / ${p.b}: ${p.what}`,
        String(p.grants),
        `${pct(p.aShare)} / ${pct(1 - p.aShare)}`,
        `${range(p.target)} / ${range([1 - p.target[1], 1 - p.target[0]])}`,
        within(p.aShare, p.target) ? 'met' : 'MISSED',
      ]),
    ),
    '',
    `Priority inversions: **${flow.inversions}** among ${flow.judged} grants to a lower band made while a read had shown a higher band waiting ` +
      '(a grant to client c counts when, at the last read before its grant window opened, some higher-band client had more requests waiting than ' +
      'it can have been granted between that read and the end of the window: one of them waited through the grant for certain; ' +
      'grant windows as in the e2e tests, `inversionsWhileWaiting` of `@iop/fake-upstream`).' +
      (flow.inversionExamples.length
        ? ` First: ${flow.inversionExamples.map((e) => `${e.client} (band ${e.band}) at ${(e.atMs / 1000).toFixed(2)} s`).join(', ')}.`
        : ''),
    '',
    'waiting in reads: share of the window’s reads in which the client had a request waiting (100% = backlogged throughout). ' +
      'batch is sheddable: its waiters are shed when a higher band finds every line full, and it is starved while band 0 is backlogged.',
  );
  return out.join('\n');
}

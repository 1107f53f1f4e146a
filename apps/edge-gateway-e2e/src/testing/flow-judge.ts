import type { JournalCall } from '@iop/fake-upstream';

/** One upstream call of a flow-control test: which client sent it, at which band, on which provider, when (ms). */
export interface JudgedCall {
  client: string;
  band: number;
  /** The upstream model name, one per provider in these tests: the provider that served the call. */
  provider: string;
  startedAt: number;
  endedAt: number;
}

/** The calls of the journal whose tag is one of `clients` (tag = index), each named by its client and band. */
export function judgedCalls(
  journal: readonly JournalCall[],
  clients: readonly { id: string; band: number }[],
  offsetMs = 0,
): JudgedCall[] {
  return journal.flatMap((call) => {
    const who = call.tag === undefined ? undefined : clients[call.tag];
    if (!who || call.endedAt === null) return [];
    const at = (t: number) => t + offsetMs;
    return [
      {
        client: who.id,
        band: who.band,
        provider: call.model,
        startedAt: at(call.startedAt),
        endedAt: at(call.endedAt),
      },
    ];
  });
}

/**
 * Priority inversions among calls that all waited before the first of them was granted, on providers
 * of `max_concurrency` 1 (docs/architecture.md, "Clients, priority and fair share"). A provider of one
 * slot grants its next call between the end of its previous call and the start of this one: a grant
 * window `[lo, hi]` in time. Call `c` was granted while call `d` of a higher band waited when `d`'s
 * window opens after `c`'s closes (`lo_d > hi_c`): an inversion for certain, whatever the lag between
 * Redis and the upstream. `before` are calls that held each provider before the burst (their ends
 * open the first windows).
 */
export function certainInversions(calls: readonly JudgedCall[], before: readonly JudgedCall[] = []): number {
  const windows = new Map<JudgedCall, { lo: number; hi: number }>();
  const byProvider = new Map<string, JudgedCall[]>();
  for (const c of [...before, ...calls]) byProvider.set(c.provider, [...(byProvider.get(c.provider) ?? []), c]);
  for (const list of byProvider.values()) {
    list.sort((a, b) => a.startedAt - b.startedAt);
    list.forEach((c, i) => windows.set(c, { lo: i === 0 ? -Infinity : list[i - 1].endedAt, hi: c.startedAt }));
  }
  const window = (c: JudgedCall) => windows.get(c) ?? { lo: -Infinity, hi: Infinity };
  return calls.filter((c) => calls.some((d) => d.band > c.band && window(d).lo > window(c).hi)).length;
}

/** Most calls of `client` at the upstream at once. */
export function peakConcurrency(calls: readonly JudgedCall[], client: string): number {
  const edges = calls
    .filter((c) => c.client === client)
    .flatMap((c) => [
      [c.startedAt, 1],
      [c.endedAt, -1],
    ])
    // An end at the same ms as a start counts first: the slot was handed on, not doubled.
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let peak = 0;
  for (const [, step] of edges) peak = Math.max(peak, (now += step));
  return peak;
}

/** Each client's share of the calls that started in `[from, to)`. */
export function sharesBetween(calls: readonly JudgedCall[], from: number, to: number): Map<string, number> {
  const inWindow = calls.filter((c) => c.startedAt >= from && c.startedAt < to);
  const out = new Map<string, number>();
  for (const c of inWindow) out.set(c.client, (out.get(c.client) ?? 0) + 1 / inWindow.length);
  return out;
}

import type { JournalCall } from './call-journal';

/**
 * Judging flow control from the upstream's side (docs/architecture.md, "Clients, priority and fair
 * share"), for the gateway's e2e tests and the bench's `flow` scenario alike: which client each call
 * came from (its `tag`), on which provider (its upstream model), and when it started and ended (ms).
 */

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

/** When a call was granted, for certain: not before `lo`, not after `hi` (ms). */
export interface GrantWindow {
  lo: number;
  hi: number;
}

/**
 * Grant windows of calls on providers of `max_concurrency` 1: a provider of one slot grants its next
 * call between the end of its previous call and the start of this one, whatever the lag between Redis
 * and the upstream. `before` are calls that held each provider before `calls` (their ends open the
 * first windows); a provider's first call has `lo = -Infinity`.
 */
export function grantWindows(
  calls: readonly JudgedCall[],
  before: readonly JudgedCall[] = [],
): Map<JudgedCall, GrantWindow> {
  const windows = new Map<JudgedCall, GrantWindow>();
  const byProvider = new Map<string, JudgedCall[]>();
  for (const c of [...before, ...calls]) byProvider.set(c.provider, [...(byProvider.get(c.provider) ?? []), c]);
  for (const list of byProvider.values()) {
    list.sort((a, b) => a.startedAt - b.startedAt);
    list.forEach((c, i) => windows.set(c, { lo: i === 0 ? -Infinity : list[i - 1].endedAt, hi: c.startedAt }));
  }
  return windows;
}

/**
 * Priority inversions among calls that all waited before the first of them was granted, on providers
 * of `max_concurrency` 1 (docs/architecture.md, "Clients, priority and fair share"). Call `c` was
 * granted while call `d` of a higher band waited when `d`'s grant window ({@link grantWindows}) opens
 * after `c`'s closes (`lo_d > hi_c`): an inversion for certain, whatever the lag between Redis and the
 * upstream. `before` are calls that held each provider before the burst.
 */
export function certainInversions(calls: readonly JudgedCall[], before: readonly JudgedCall[] = []): number {
  const windows = grantWindows(calls, before);
  const window = (c: JudgedCall) => windows.get(c) ?? { lo: -Infinity, hi: Infinity };
  return calls.filter((c) => calls.some((d) => d.band > c.band && window(d).lo > window(c).hi)).length;
}

/**
 * How many requests of each client waited in the pool at one moment between `sentAt` and `receivedAt`
 * (ms, on the journal's clock): one read of the clients' waiting counts (e.g. the queue's client
 * counts in Redis, parked requests included).
 */
export interface WaitingSample {
  sentAt: number;
  receivedAt: number;
  /** Waiting requests by client id; a client not listed had none. */
  waiting: ReadonlyMap<string, number>;
}

/** What {@link inversionsWhileWaiting} found. */
export interface WaitingJudgement {
  /** Grants to a lower band made, for certain, while a request of a higher band waited. */
  inversions: JudgedCall[];
  /** Grants to a lower band made after a sample that showed a higher band waiting: the grants that were judged. */
  judged: number;
}

/**
 * Priority inversions of a continuous run, where requests keep arriving (docs/architecture.md,
 * "Clients, priority and fair share": no provider grants a lower band while a higher-band waiter it
 * can serve waits). For each call `c` with grant window `[lo, hi]` ({@link grantWindows}), the last
 * sample read before `lo` (`receivedAt ≤ lo`) says client `x` of a higher band had `k` requests
 * waiting at a moment `r ≥ sentAt`. A request of `x` granted between `r` and `c`'s grant has a window
 * with `hi ≥ sentAt` and `lo ≤ c.hi`; if fewer than `k` calls of `x` have such a window, one of the
 * `k` still waited when `c` was granted: an inversion for certain. Sound when requests leave the line
 * only by a grant (no deadline, abort or shedding in the higher band during the run), and when the
 * waiting requests could be served by every provider (same pool, no `max_in_flight` reached).
 * @param bands band of every client that appears in the samples or the calls.
 */
export function inversionsWhileWaiting(
  calls: readonly JudgedCall[],
  samples: readonly WaitingSample[],
  bands: ReadonlyMap<string, number>,
  before: readonly JudgedCall[] = [],
): WaitingJudgement {
  const windows = grantWindows(calls, before);
  const sorted = [...samples].sort((a, b) => a.receivedAt - b.receivedAt);
  const windowOf = (c: JudgedCall) => windows.get(c) ?? { lo: -Infinity, hi: Infinity };
  const byClient = new Map<string, GrantWindow[]>();
  for (const c of calls) byClient.set(c.client, [...(byClient.get(c.client) ?? []), windowOf(c)]);
  const out: WaitingJudgement = { inversions: [], judged: 0 };
  for (const c of calls) {
    const w = windowOf(c);
    const sample = lastAtOrBefore(sorted, w.lo);
    if (!sample) continue;
    const higher = [...sample.waiting].filter(([x, k]) => k > 0 && (bands.get(x) ?? -Infinity) > c.band);
    if (higher.length === 0) continue;
    out.judged++;
    const stillWaiting = higher.some(([x, k]) => {
      const grantedSince = (byClient.get(x) ?? []).filter((g) => g.hi >= sample.sentAt && g.lo <= w.hi).length;
      return k > grantedSince;
    });
    if (stillWaiting) out.inversions.push(c);
  }
  return out;
}

/** The last sample of `sorted` (by `receivedAt`) read by `at`, or undefined. */
function lastAtOrBefore(sorted: readonly WaitingSample[], at: number): WaitingSample | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid].receivedAt <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? undefined : sorted[lo - 1];
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

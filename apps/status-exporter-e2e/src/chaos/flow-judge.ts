import type { JournalCall } from '@iop/fake-upstream';

/**
 * Judging the flow-control chaos run from the upstream's side: the fake upstream's call journal
 * (each call's `tag`, the client that sent it, and its `startedAt`/`endedAt`, `Date.now()` ms). A
 * call holds its slot at the upstream from its arrival to its end (README "Tests": "at once" as a
 * model server counts it).
 */

/** One moment a call of a client arrived at the upstream, and how many of that client's calls were open then (itself included). */
export interface OpenAtStart {
  /** ms since the epoch. */
  at: number;
  open: number;
}

/**
 * For each call tagged `tag`, the calls of the same tag open when it arrived, itself included; a
 * call still running (`endedAt` null) is open to the end. A call that ended at the very ms another
 * arrived counts as ended (the slot was handed on, not doubled). In arrival order.
 */
export function openAtStarts(calls: readonly JournalCall[], tag: number): OpenAtStart[] {
  const mine = calls.filter((c) => c.tag === tag);
  return mine
    .map((c) => ({
      at: c.startedAt,
      open: mine.filter((o) => o.startedAt <= c.startedAt && (o.endedAt ?? Infinity) > c.startedAt).length,
    }))
    .sort((a, b) => a.at - b.at);
}

/**
 * The first moment at or after `from` (ms since the epoch) when `level` calls tagged `tag` were open
 * at once at the upstream; undefined when it never happened.
 */
export function firstReach(
  calls: readonly JournalCall[],
  tag: number,
  level: number,
  from: number,
): number | undefined {
  return openAtStarts(calls, tag).find((s) => s.at >= from && s.open >= level)?.at;
}

/**
 * The arrivals of calls tagged `tag` that found more of that client's calls open than `allowed(at)`
 * (a cap in force at that moment, ms since the epoch) permits: each a breach of `max_in_flight`.
 */
export function capBreaches(
  calls: readonly JournalCall[],
  tag: number,
  allowed: (at: number) => number,
): OpenAtStart[] {
  return openAtStarts(calls, tag).filter((s) => s.open > allowed(s.at));
}

/** Calls per tag among those that arrived in `[from, to)` (ms since the epoch). */
export function callsByTag(calls: readonly JournalCall[], from: number, to: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const c of calls)
    if (c.tag !== undefined && c.startedAt >= from && c.startedAt < to) out.set(c.tag, (out.get(c.tag) ?? 0) + 1);
  return out;
}

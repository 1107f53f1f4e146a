/**
 * The fix sentences of rules that bound a setting by another value (README "Configuration": the
 * rules beyond the shape), worded to read sensibly at the edge of the setting's own range: a bound
 * equal to the least (or the most) value the setting allows leaves one value to write, so the fix
 * names that value instead of "0 or less" (or "N or more"). Pure.
 */

/**
 * "lower `key` to `bound` or less", or "set `key` to `bound`" when `bound` is `least`, the smallest
 * value the setting's schema accepts (e.g. 0 for a client's `max_queued`, 1 for `max_in_flight`).
 * No trailing period: a rule appends its alternatives.
 */
export function lowerTo(key: string, bound: number, least: number): string {
  return bound <= least ? `set ${key} to ${least}` : `lower ${key} to ${bound} or less`;
}

/**
 * "raise `key` to `bound` or more", or "set `key` to `bound`" when `bound` is `most`, the largest
 * value the setting's schema accepts (e.g. `Number.MAX_SAFE_INTEGER` for a token budget).
 * No trailing period: a rule appends its alternatives.
 */
export function raiseTo(key: string, bound: number, most: number): string {
  return bound >= most ? `set ${key} to ${most}` : `raise ${key} to ${bound} or more`;
}

/**
 * The candidate closest to `word` by edit distance (case-insensitive), when close enough to be a
 * likely typo: at most 1 edit for short words, about a third of the length for longer ones, or a
 * prefix of at least 4 characters (`timeout` → `timeout_ms`).
 * Used for "did you mean" hints on unknown keys and values.
 */
export function closestName(word: string, candidates: readonly string[]): string | undefined {
  const limit = Math.max(1, Math.floor(word.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const [a, b] = [word.toLowerCase(), name.toLowerCase()];
    const distance = Math.min(a.length, b.length) >= 4 && (a.startsWith(b) || b.startsWith(a)) ? 1 : editDistance(a, b);
    if (distance <= limit && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Levenshtein distance with adjacent transpositions counted as one edit. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

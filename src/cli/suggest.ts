/**
 * "Did you mean" for mistyped commands and options: the candidate with the smallest edit distance,
 * when it is close enough to be a likely typo rather than a different word.
 */

/** Levenshtein distance, counting a swap of two adjacent characters as one edit (`--verison`). */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate nearest to `input`, or null when none is plausibly meant: a typo within a third of
 * the word's length (at least one edit), or a candidate that starts with what was typed (`--api`).
 */
export function nearest(input: string, candidates: readonly string[]): string | null {
  const typed = input.toLowerCase();
  let best: { candidate: string; distance: number } | null = null;
  for (const candidate of candidates) {
    const distance = editDistance(typed, candidate.toLowerCase());
    if (best === null || distance < best.distance) best = { candidate, distance };
  }
  if (best === null) return null;
  if (best.distance <= Math.max(1, Math.floor(typed.length / 3))) return best.candidate;
  const prefixed = candidates.filter((c) => typed.length >= 2 && c.toLowerCase().startsWith(typed));
  return prefixed.length === 1 ? prefixed[0]! : null;
}

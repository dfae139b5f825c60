import type { TermRange } from '../state/record.js';

/**
 * A log's shape as runs of equal terms. Because a term has one master and a master never writes two records
 * at one idx, (term, idx) names a record everywhere; and because each record's hash covers its predecessor,
 * two logs that share a record share everything before it. So comparing term runs finds where two logs part
 * without shipping hashes.
 */
export interface LogShape {
  /** Sorted by firstIdx; may start above idx 1 when only a tail was sent. */
  terms: readonly TermRange[];
  lastIdx: number;
}

/** Appends `term` at `idx` to a run list (mutates). */
export function extendTerms(terms: TermRange[], term: number, idx: number): void {
  const last = terms[terms.length - 1];
  if (last === undefined || last.term !== term) terms.push({ term, firstIdx: idx });
}

/** The runs that remain when everything after `afterIdx` is cut. */
export function truncateTerms(terms: readonly TermRange[], afterIdx: number): TermRange[] {
  return terms.filter((range) => range.firstIdx <= afterIdx);
}

export function termAt(shape: LogShape, idx: number): number | undefined {
  if (idx < 1 || idx > shape.lastIdx) return undefined;
  let found: number | undefined;
  for (const range of shape.terms) {
    if (range.firstIdx > idx) break;
    found = range.term;
  }
  return found;
}

/** The last `count` runs: a bounded summary for messages. */
export function tailTerms(terms: readonly TermRange[], count: number): TermRange[] {
  return terms.slice(Math.max(0, terms.length - count));
}

function spans(shape: LogShape): { term: number; from: number; to: number }[] {
  const out: { term: number; from: number; to: number }[] = [];
  for (let i = 0; i < shape.terms.length; i++) {
    const range = shape.terms[i]!;
    const next = shape.terms[i + 1];
    const to = Math.min(next === undefined ? shape.lastIdx : next.firstIdx - 1, shape.lastIdx);
    if (to >= range.firstIdx) out.push({ term: range.term, from: range.firstIdx, to });
  }
  return out;
}

/**
 * The highest idx both logs hold the same record at (0 when they share nothing), or null when a run list that
 * was cut short hides the answer.
 */
export function commonPrefix(a: LogShape, b: LogShape): number | null {
  if (a.lastIdx === 0 || b.lastIdx === 0) return 0;
  const bByTerm = new Map<number, { from: number; to: number }[]>();
  for (const span of spans(b)) {
    const list = bByTerm.get(span.term);
    if (list === undefined) bByTerm.set(span.term, [span]);
    else list.push(span);
  }
  const aSpans = spans(a);
  for (let i = aSpans.length - 1; i >= 0; i--) {
    const sa = aSpans[i]!;
    let best = -1;
    for (const sb of bByTerm.get(sa.term) ?? []) {
      const lo = Math.max(sa.from, sb.from);
      const hi = Math.min(sa.to, sb.to);
      if (lo <= hi && hi > best) best = hi;
    }
    if (best >= 0) return best;
  }
  const aComplete = (a.terms[0]?.firstIdx ?? 1) === 1;
  const bComplete = (b.terms[0]?.firstIdx ?? 1) === 1;
  return aComplete && bComplete ? 0 : null;
}

import { MAX_MEMBERS } from '../master/state/state.js';

/**
 * Terms are partitioned among members by their term slot: a node may only claim terms t with
 * (t - 1) mod TERM_SLOTS === its slot. With plain "max seen + 1", two partitions would pick the same number and
 * a term could have two masters; with slots that needs two members holding one slot, which only happens when
 * both sides of a partition admit a different new node at the same time.
 */
export const TERM_SLOTS = MAX_MEMBERS;

/** The smallest term above `above` that `termSlot` may claim. */
export function nextTerm(above: number, termSlot: number): number {
  if (!Number.isInteger(termSlot) || termSlot < 0 || termSlot >= TERM_SLOTS) throw new Error(`term slot ${termSlot} out of range`);
  const base = Math.floor(above / TERM_SLOTS) * TERM_SLOTS;
  let term = base + termSlot + 1;
  while (term <= above) term += TERM_SLOTS;
  return term;
}

export function termSlotOf(term: number): number {
  return (term - 1) % TERM_SLOTS;
}

/** What ranking looks at; MemberState has it. */
export interface Rankable {
  nodeId: string;
  hostPreferred: boolean;
  admittedIdx: number;
}

/**
 * Bully order over the roster: the operator's "make host" first, then seniority (admitted earlier), then node
 * id ascending (by UTF-16 code units, so every node breaks ties the same way). Negative when `a` ranks above `b`.
 */
export function compareRank(a: Rankable, b: Rankable): number {
  if (a.hostPreferred !== b.hostPreferred) return a.hostPreferred ? -1 : 1;
  if (a.admittedIdx !== b.admittedIdx) return a.admittedIdx - b.admittedIdx;
  if (a.nodeId === b.nodeId) return 0;
  return a.nodeId < b.nodeId ? -1 : 1;
}

export function outranks(a: Rankable, b: Rankable): boolean {
  return compareRank(a, b) < 0;
}

/** Best first. */
export function byRank<T extends Rankable>(members: Iterable<T>): T[] {
  return [...members].sort(compareRank);
}

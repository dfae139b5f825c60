// What a person types to name a model, matched against the ids this node knows: the exact id, a hub
// repo without its quant (`owner/name` for `owner/name:Q4_K_M` when only one quant is known), or the
// name without its owner (`tiny-eos` for `shoal/tiny-eos`). Pure; the CLI's launch uses it.

export type NameMatch = { kind: 'found'; id: string } | { kind: 'ambiguous'; choices: string[] } | { kind: 'none' };

/** The part of an id after its owner and before its quant: `owner/name:Q8_0` -> `name`. */
function bareName(id: string): string {
  const noQuant = id.includes(':') ? id.slice(0, id.lastIndexOf(':')) : id;
  return noQuant.slice(noQuant.lastIndexOf('/') + 1);
}

/** Matches `name` against `ids`, most specific rule first; case-insensitive only when nothing matches exactly. */
export function matchModelName(name: string, ids: readonly string[]): NameMatch {
  const wanted = name.trim();
  for (const same of [(a: string, b: string) => a === b, (a: string, b: string) => a.toLowerCase() === b.toLowerCase()]) {
    const exact = ids.filter((id) => same(id, wanted));
    if (exact.length === 1) return { kind: 'found', id: exact[0] as string };
    const rules: ((id: string) => boolean)[] = [
      (id) => id.includes(':') && same(id.slice(0, id.lastIndexOf(':')), wanted),
      ...(wanted.includes('/') ? [] : [(id: string) => same(bareName(id), wanted)]),
    ];
    for (const rule of rules) {
      const matches = [...new Set(ids.filter(rule))].sort();
      if (matches.length === 1) return { kind: 'found', id: matches[0] as string };
      if (matches.length > 1) return { kind: 'ambiguous', choices: matches };
    }
  }
  return { kind: 'none' };
}

import fc from 'fast-check';

/** Multiplies every property's run count (e.g. SHOAL_FUZZ_RUNS=50 for a long run on demand). */
export const FUZZ_RUNS_ENV = 'SHOAL_FUZZ_RUNS';

/**
 * fast-check parameters for one property: `runs` by default, scaled by SHOAL_FUZZ_RUNS. The seed is
 * printed by fast-check on failure; SHOAL_FUZZ_SEED replays it.
 */
export function fuzzParams<T>(runs: number): fc.Parameters<T> {
  const factor = Number(process.env[FUZZ_RUNS_ENV]);
  const seed = Number(process.env.SHOAL_FUZZ_SEED);
  return {
    numRuns: Number.isFinite(factor) && factor > 0 ? Math.ceil(runs * factor) : runs,
    ...(Number.isInteger(seed) ? { seed } : {}),
  };
}

/** JSON values of bounded size, the kind a hostile client or a broken peer sends (as parsed: no -0). */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.parse(JSON.stringify(value)) as unknown);

/**
 * `seed` with some of its fields (at any depth) replaced by arbitrary JSON or removed, and sometimes an
 * unknown field added: near-valid bodies reach past the schema into the code behind it.
 */
export function mutated(seed: unknown): fc.Arbitrary<unknown> {
  const paths = pathsOf(seed);
  const edit = fc.record({
    path: fc.constantFrom(...paths),
    action: fc.constantFrom('replace', 'replace', 'remove', 'add'),
    value: fc.oneof(anyJson, fc.constantFrom<unknown>('', 0, -1, 1e308, -0, null, [], {}, true, 'x'.repeat(5000), 2 ** 53, 0.5)),
    key: fc.oneof(fc.constantFrom('type', 'role', 'content', '__proto__', 'constructor', 'model'), fc.string({ maxLength: 8 })),
  });
  return fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
    let body = structuredClone(seed);
    for (const e of edits) body = apply(body, e.path, e.action, structuredClone(e.value), e.key);
    return body;
  });
}

type Path = ReadonlyArray<string | number>;

function pathsOf(value: unknown, prefix: Path = []): Path[] {
  const out: Path[] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...pathsOf(v, [...prefix, i])));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...prefix, k]));
  return out;
}

function apply(body: unknown, path: Path, action: string, value: unknown, key: string): unknown {
  if (path.length === 0) {
    if (action === 'add' && body !== null && typeof body === 'object' && !Array.isArray(body)) {
      Object.defineProperty(body, key, { value, enumerable: true, writable: true, configurable: true });
      return body;
    }
    return action === 'remove' ? {} : value;
  }
  let parent = body as Record<string | number, unknown> | null;
  for (const step of path.slice(0, -1)) {
    if (parent === null || typeof parent !== 'object') return body;
    parent = parent[step] as Record<string | number, unknown> | null;
  }
  if (parent === null || typeof parent !== 'object') return body;
  const last = path[path.length - 1]!;
  if (action === 'remove') {
    if (Array.isArray(parent) && typeof last === 'number') parent.splice(last, 1);
    else delete parent[last];
  } else if (action === 'add') {
    const target = parent[last];
    if (target !== null && typeof target === 'object' && !Array.isArray(target)) {
      Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
    } else parent[last] = value;
  } else parent[last] = value;
  return body;
}

/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests: it throws on
 * anything Prometheus would refuse or that the format forbids, naming the line. Checked:
 * - metric and label names, label value escapes (`\\`, `\"`, `\n` only), values (Go float syntax:
 *   decimal or exponent, `NaN`, `+Inf`, `-Inf`, case-insensitive as Prometheus reads them), timestamps;
 * - `# HELP` / `# TYPE` at most once per family, TYPE before the family's first sample, known types;
 * - a family's lines together (no interleaving), no duplicate series, no reserved `__` label names;
 * - histograms: `_bucket` series with `le`, cumulative counts non-decreasing, a `+Inf` bucket equal to
 *   `_count`, `_sum` and `_count` present; summaries: `quantile` labels in [0, 1], `_sum` and `_count`;
 *   counters: no negative values.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  timestampMs: number | null;
}

export interface MetricFamily {
  name: string;
  type: MetricType;
  help: string | null;
  samples: ParsedSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const FLOAT = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const SPECIAL = /^(?:[+-]?inf(?:inity)?|nan)$/i;
const TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

export class ExpositionError extends Error {
  constructor(lineNo: number, line: string, what: string) {
    super(`line ${lineNo}: ${what}: ${JSON.stringify(line)}`);
    this.name = 'ExpositionError';
  }
}

export function parseValue(text: string): number | null {
  if (FLOAT.test(text)) return Number(text);
  if (!SPECIAL.test(text)) return null;
  const lower = text.toLowerCase();
  if (lower === 'nan') return Number.NaN;
  return lower.startsWith('-') ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
}

/** The family a sample belongs to, given the TYPE lines seen (histogram/summary suffixes fold in). */
function familyOf(sampleName: string, types: Map<string, MetricType>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue;
    const base = sampleName.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return sampleName;
}

function unescapeHelp(text: string, fail: (what: string) => never): string {
  return text.replace(/\\(.?)/g, (_, c: string) => {
    if (c === '\\') return '\\';
    if (c === 'n') return '\n';
    return fail(`bad escape '\\${c}' in HELP`);
  });
}

/** Parses `{a="x",b="y"}` starting at `text[0] === '{'`; returns the labels and the rest of the line. */
function parseLabels(text: string, fail: (what: string) => never): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  const skipSpaces = (): void => {
    while (text[i] === ' ' || text[i] === '\t') i += 1;
  };
  skipSpaces();
  while (text[i] !== '}') {
    const nameStart = i;
    while (i < text.length && /[a-zA-Z0-9_]/.test(text[i]!)) i += 1;
    const name = text.slice(nameStart, i);
    if (!LABEL_NAME.test(name)) fail(`bad label name '${name}'`);
    if (name.startsWith('__')) fail(`reserved label name '${name}'`);
    if (Object.hasOwn(labels, name)) fail(`label '${name}' twice`);
    skipSpaces();
    if (text[i] !== '=') fail(`expected '=' after label '${name}'`);
    i += 1;
    skipSpaces();
    if (text[i] !== '"') fail(`expected '"' to open the value of '${name}'`);
    i += 1;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) fail(`unterminated value of '${name}'`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i + 1];
        if (next === '\\') value += '\\';
        else if (next === '"') value += '"';
        else if (next === 'n') value += '\n';
        else fail(`bad escape '\\${next ?? ''}' in the value of '${name}'`);
        i += 2;
        continue;
      }
      value += c;
      i += 1;
    }
    i += 1;
    labels[name] = value;
    skipSpaces();
    if (text[i] === ',') {
      i += 1;
      skipSpaces();
      continue;
    }
    if (text[i] !== '}') fail(`expected ',' or '}' after label '${name}'`);
  }
  return { labels, rest: text.slice(i + 1) };
}

export function parseExposition(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const types = new Map<string, MetricType>();
  const helps = new Set<string>();
  const closed = new Set<string>();
  const seriesSeen = new Set<string>();
  let current: string | null = null;
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  else if (text !== '') throw new ExpositionError(lines.length, lines.at(-1) ?? '', 'the last line must end with a newline');

  const enter = (name: string, fail: (what: string) => never): MetricFamily => {
    if (current !== name) {
      if (closed.has(name)) fail(`the lines of '${name}' are not together`);
      if (current !== null) closed.add(current);
      current = name;
    }
    let family = families.get(name);
    if (!family) {
      family = { name, type: types.get(name) ?? 'untyped', help: null, samples: [] };
      families.set(name, family);
    }
    return family;
  };

  lines.forEach((line, index) => {
    const fail = (what: string): never => {
      throw new ExpositionError(index + 1, line, what);
    };
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const match = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line);
      if (!match) return; // a plain comment
      const [, keyword, name, restRaw] = match as unknown as [string, 'HELP' | 'TYPE', string, string | undefined];
      if (!METRIC_NAME.test(name)) fail(`bad metric name '${name}'`);
      if (keyword === 'HELP') {
        if (helps.has(name)) fail(`second HELP for '${name}'`);
        helps.add(name);
        enter(name, fail).help = unescapeHelp(restRaw ?? '', fail);
        return;
      }
      const type = (restRaw ?? '').trim() as MetricType;
      if (!TYPES.includes(type)) fail(`unknown type '${restRaw ?? ''}'`);
      if (types.has(name)) fail(`second TYPE for '${name}'`);
      if (families.get(name)?.samples.length) fail(`TYPE for '${name}' after its samples`);
      types.set(name, type);
      enter(name, fail).type = type;
      return;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nameMatch) fail('a sample line must start with a metric name');
    const sampleName = nameMatch![0];
    let rest = line.slice(sampleName.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, fail));
    const fields = rest.trim().split(/[ \t]+/);
    if (!/^[ \t]/.test(rest) || fields.length < 1 || fields.length > 2 || fields[0] === '') fail('expected a value and an optional timestamp after the name');
    const value = parseValue(fields[0]!);
    if (value === null) fail(`bad value '${fields[0]}'`);
    let timestampMs: number | null = null;
    if (fields.length === 2) {
      if (!/^-?\d+$/.test(fields[1]!)) fail(`bad timestamp '${fields[1]}'`);
      timestampMs = Number(fields[1]);
    }
    const familyName = familyOf(sampleName, types);
    const family = enter(familyName, fail);
    const key = `${sampleName}{${Object.keys(labels).sort().map((k) => `${k}=${JSON.stringify(labels[k])}`).join(',')}}`;
    if (seriesSeen.has(key)) fail(`duplicate series ${key}`);
    seriesSeen.add(key);
    if (family.type === 'counter' && !(value! >= 0)) fail('a counter cannot be negative or NaN');
    if (family.type === 'histogram' && sampleName === `${familyName}_bucket` && labels.le === undefined) fail("a histogram bucket needs an 'le' label");
    if (family.type === 'histogram' && sampleName === familyName) fail('a histogram has only _bucket, _sum and _count samples');
    if (family.type === 'summary' && sampleName === familyName) {
      const q = labels.quantile === undefined ? null : parseValue(labels.quantile);
      if (q === null || !(q >= 0 && q <= 1)) fail("a summary sample needs a 'quantile' label in [0, 1]");
    }
    family.samples.push({ name: sampleName, labels, value: value!, timestampMs });
  });

  for (const family of families.values()) {
    if (family.type === 'histogram') checkHistogram(family);
    if (family.type === 'summary') checkSumAndCount(family);
  }
  return families;
}

function groupKey(labels: Record<string, string>, without: string): string {
  return Object.keys(labels)
    .filter((k) => k !== without)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`)
    .join(',');
}

function checkSumAndCount(family: MetricFamily): void {
  const groups = new Set(family.samples.map((s) => groupKey(s.labels, family.type === 'histogram' ? 'le' : 'quantile')));
  for (const group of groups) {
    for (const suffix of ['_sum', '_count']) {
      if (!family.samples.some((s) => s.name === family.name + suffix && groupKey(s.labels, '') === group)) {
        throw new Error(`${family.type} '${family.name}' {${group}} has no ${suffix}`);
      }
    }
  }
}

function checkHistogram(family: MetricFamily): void {
  checkSumAndCount(family);
  const byGroup = new Map<string, ParsedSample[]>();
  for (const s of family.samples) {
    if (s.name !== `${family.name}_bucket`) continue;
    const key = groupKey(s.labels, 'le');
    byGroup.set(key, [...(byGroup.get(key) ?? []), s]);
  }
  for (const [group, buckets] of byGroup) {
    const sorted = buckets.map((b) => ({ le: parseValue(b.labels.le!), value: b.value })).sort((a, b) => a.le! - b.le!);
    if (sorted.some((b) => b.le === null || Number.isNaN(b.le))) throw new Error(`histogram '${family.name}' {${group}} has a bad 'le'`);
    for (let i = 1; i < sorted.length; i += 1) {
      if (sorted[i]!.value < sorted[i - 1]!.value) throw new Error(`histogram '${family.name}' {${group}}: bucket le=${sorted[i]!.le} is below le=${sorted[i - 1]!.le}`);
    }
    const inf = sorted.at(-1)!;
    if (inf.le !== Number.POSITIVE_INFINITY) throw new Error(`histogram '${family.name}' {${group}} has no +Inf bucket`);
    const count = family.samples.find((s) => s.name === `${family.name}_count` && groupKey(s.labels, '') === group);
    if (count && count.value !== inf.value) throw new Error(`histogram '${family.name}' {${group}}: _count ${count.value} differs from the +Inf bucket ${inf.value}`);
  }
}

/**
 * Renders the JSON results of one `bench/run.ts` run as a readable REPORT.md. Pure: no I/O, and
 * missing or malformed fields come out as "n/a" rather than an exception.
 */

export interface ReportMeta {
  startedAt: Date | string;
  durationS: number;
  machine: { cpuModel: string; cores: number; memoryBytes: number; gpu: string | null };
  versions: { shoal: string; node: string; nodeLlamaCpp: string; llamaCppCommit: string | null };
}

const NA = 'n/a';

interface SummaryLike {
  median: number;
  min?: unknown;
  max?: unknown;
  p25?: unknown;
  p75?: unknown;
  n?: unknown;
}

type Comparison = '<=' | '>=';
interface Target {
  op: Comparison;
  value: number;
}

interface Row {
  figure: string;
  summary: unknown;
  unit?: string;
  target?: Target | null;
  /** Whether the target is met, when the benchmark says so itself; else it is worked out from the median. */
  met?: unknown;
  /** Comparison against the baseline measured in the same run (or against the target), already formatted. */
  versus?: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNum(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function isSummary(value: unknown): value is SummaryLike {
  return isRecord(value) && isNum(value.median);
}

function get(value: unknown, ...path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (!isRecord(current)) return undefined;
    current = current[key];
  }
  return current;
}

/** A number for a table: at most 3 decimals, thousands kept readable; "n/a" for anything else. */
export function fmt(value: unknown, digits = 3): string {
  if (!isNum(value)) return NA;
  const abs = Math.abs(value);
  const places = abs >= 1000 ? 0 : abs >= 100 ? 1 : abs >= 1 ? 2 : digits;
  return value.toLocaleString('en-US', { maximumFractionDigits: places, useGrouping: abs >= 10_000 });
}

function range(a: unknown, b: unknown): string {
  return isNum(a) && isNum(b) ? `${fmt(a)}–${fmt(b)}` : NA;
}

/** Parses "<= 10", ">= 0.97" (the targets the benchmarks print). */
export function parseTarget(value: unknown): Target | null {
  if (typeof value !== 'string') return null;
  const match = /^\s*(<=|>=)\s*(-?\d+(?:\.\d+)?)\s*$/.exec(value);
  if (!match) return null;
  return { op: match[1] as Comparison, value: Number(match[2]) };
}

function targetOf(op: Comparison, value: unknown): Target | null {
  return isNum(value) ? { op, value } : null;
}

function meets(target: Target | null | undefined, value: unknown): boolean | null {
  if (!target || !isNum(value)) return null;
  return target.op === '<=' ? value <= target.value : value >= target.value;
}

function metText(met: boolean | null): string {
  return met === null ? NA : met ? '✅ met' : '❌ not met';
}

function escapeCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function table(rows: Row[]): string {
  const lines = [
    '| Figure | Median | Min–max | p25–p75 | Reps | Target | Met | vs baseline / target |',
    '| --- | ---: | ---: | ---: | ---: | --- | --- | --- |',
  ];
  for (const row of rows) {
    const s = isSummary(row.summary) ? row.summary : null;
    const unit = row.unit ? ` ${row.unit}` : '';
    const met = typeof row.met === 'boolean' ? row.met : meets(row.target, s?.median);
    const cells = [
      row.figure,
      s ? `${fmt(s.median)}${unit}` : NA,
      s ? range(s.min, s.max) : NA,
      s ? range(s.p25, s.p75) : NA,
      s && isNum(s.n) ? String(s.n) : NA,
      row.target ? `${row.target.op} ${fmt(row.target.value)}${unit}` : '—',
      row.target || typeof row.met === 'boolean' ? metText(met) : '—',
      row.versus ?? '—',
    ];
    lines.push(`| ${cells.map(escapeCell).join(' | ')} |`);
  }
  return lines.join('\n');
}

function ratioToTarget(summary: unknown, target: Target | null): string {
  if (!isSummary(summary) || !target || target.value === 0) return NA;
  return `${fmt(summary.median / target.value)}× target`;
}

function signed(value: unknown, unit: string): string {
  if (!isNum(value)) return NA;
  return `${value >= 0 ? '+' : ''}${fmt(value)} ${unit}`;
}

function errorNote(part: unknown): string | null {
  const error = get(part, 'error');
  return typeof error === 'string' ? `**Failed:** ${escapeCell(error)}` : null;
}

function serveOverhead(result: unknown): string {
  const targets = get(result, 'targets');
  const decodeTarget = parseTarget(get(targets, 'decodeRatio'));
  const ttftTarget = parseTarget(get(targets, 'ttftOverheadMs'));
  const decodeRatio = get(result, 'decodeRatio');
  const ttftOverhead = get(result, 'ttftOverheadMs');
  const model = get(result, 'model');
  const lines: string[] = [];
  const modelBits = [get(model, 'type'), isNum(get(model, 'params')) ? `${fmt((get(model, 'params') as number) / 1e6)}M params` : null]
    .filter((x): x is string => typeof x === 'string');
  lines.push(
    `Shoal's HTTP serving path against node-llama-cpp called directly, same model, same run. ` +
      `Model: ${modelBits.length ? modelBits.join(', ') : NA}; threads: ${fmt(get(result, 'threads'))}; ` +
      `max tokens: ${fmt(get(result, 'maxTokens'))}.`,
  );
  lines.push('');
  lines.push(
    table([
      {
        figure: 'Decode tok/s, via Shoal',
        summary: get(result, 'shoal', 'decodeTokPerS'),
        unit: 'tok/s',
        versus: `ratio ${fmt(decodeRatio)} (target ${decodeTarget ? `${decodeTarget.op} ${fmt(decodeTarget.value)}` : NA}: ${metText(meets(decodeTarget, decodeRatio))})`,
      },
      { figure: 'Decode tok/s, node-llama-cpp direct (baseline)', summary: get(result, 'direct', 'decodeTokPerS'), unit: 'tok/s' },
      {
        figure: 'TTFT, via Shoal',
        summary: get(result, 'shoal', 'ttftMs'),
        unit: 'ms',
        versus: `overhead ${signed(ttftOverhead, 'ms')} (target ${ttftTarget ? `${ttftTarget.op} ${fmt(ttftTarget.value)} ms` : NA}: ${metText(meets(ttftTarget, ttftOverhead))})`,
      },
      { figure: 'TTFT, node-llama-cpp direct (baseline)', summary: get(result, 'direct', 'ttftMs'), unit: 'ms' },
    ]),
  );
  lines.push('');
  lines.push(`- Decode ratio (Shoal ÷ direct, medians): **${fmt(decodeRatio)}**, target ${String(get(targets, 'decodeRatio') ?? NA)}: ${metText(meets(decodeTarget, decodeRatio))}`);
  lines.push(`- TTFT overhead (Shoal − direct, medians): **${signed(ttftOverhead, 'ms')}**, target ${String(get(targets, 'ttftOverheadMs') ?? NA)}: ${metText(meets(ttftTarget, ttftOverhead))}`);
  return lines.join('\n');
}

function controlPlane(result: unknown): string {
  const targets = get(result, 'targets');
  const parts: { part: string; figure: string; field: string; unit: string; target: Target | null }[] = [
    { part: 'failover', figure: 'Failover: master loss → write accepted', field: 'acceptedMs', unit: 'ms', target: parseTarget(get(targets, 'failoverMs')) ?? targetOf('<=', get(result, 'failover', 'targetMs')) },
    { part: 'eventAppend', figure: 'Event append (group commit)', field: 'eventsPerS', unit: 'events/s', target: parseTarget(get(targets, 'eventsPerS')) ?? targetOf('>=', get(result, 'eventAppend', 'target')) },
    { part: 'catchUp', figure: 'Follower catch-up', field: 'caughtUpMs', unit: 'ms', target: parseTarget(get(targets, 'catchUpMs')) ?? targetOf('<=', get(result, 'catchUp', 'targetMs')) },
    { part: 'idleRss', figure: 'Idle node RSS', field: 'nodeRssMiB', unit: 'MiB', target: parseTarget(get(targets, 'nodeRssMiB')) ?? targetOf('<=', get(result, 'idleRss', 'targetNodeRssMiB')) },
    { part: 'startToListed', figure: 'Start → listed by a peer', field: 'listedMs', unit: 'ms', target: parseTarget(get(targets, 'startToListedMs')) ?? targetOf('<=', get(result, 'startToListed', 'targetMs')) },
  ];
  const rows: Row[] = [];
  const notes: string[] = [];
  for (const p of parts) {
    const part = get(result, p.part);
    if (part === undefined) continue;
    const summary = get(part, p.field);
    rows.push({ figure: p.figure, summary, unit: p.unit, target: p.target, met: get(part, 'meetsTarget'), versus: ratioToTarget(summary, p.target) });
    const error = errorNote(part);
    if (error) notes.push(`- ${p.part}: ${error}`);
    const failures = get(part, 'failures');
    if (Array.isArray(failures) && failures.length > 0) notes.push(`- ${p.part}: ${failures.length} failed repetition(s): ${escapeCell(failures.map(String).join('; '))}`);
  }
  const lines = [`Control-plane figures against their targets; ${fmt(get(result, 'reps'))} repetitions per part.`, ''];
  lines.push(rows.length ? table(rows) : `No parts: ${NA}`);
  if (notes.length) lines.push('', ...notes);
  return lines.join('\n');
}

function logAppend(result: unknown): string {
  const target = targetOf('>=', get(result, 'targetEventsPerS'));
  const entries = get(result, 'results');
  const rows: Row[] = [];
  if (Array.isArray(entries)) {
    for (const entry of entries) {
      const fsyncs = get(entry, 'fsyncsPerS');
      rows.push({
        figure: `${fmt(get(entry, 'appenders'))} appender(s)`,
        summary: get(entry, 'eventsPerS'),
        unit: 'events/s',
        target,
        versus: `${isSummary(fsyncs) ? fmt(fsyncs.median) : NA} fsyncs/s, ${fmt(get(entry, 'recordsPerFsync'))} records/fsync`,
      });
    }
  }
  const lines = [
    `LogStore.append throughput by concurrent appender count; ${fmt(get(result, 'recordBytes'))} B records, ${fmt(get(result, 'runs'))} runs of ${fmt(get(result, 'durationMs'))} ms each.`,
    '',
    rows.length ? table(rows) : `Results: ${NA}`,
    '',
    `- Best median meets the target (${target ? `>= ${fmt(target.value)} events/s` : NA}): ${metText(typeof get(result, 'meetsTarget') === 'boolean' ? (get(result, 'meetsTarget') as boolean) : null)}`,
  ];
  return lines.join('\n');
}

/** Every summary (an object with a numeric median) anywhere in the result, by dotted path. */
function collectSummaries(value: unknown, path: string[], out: Row[]): void {
  if (isSummary(value)) {
    out.push({ figure: path.join('.'), summary: value });
    return;
  }
  if (isRecord(value)) for (const [key, child] of Object.entries(value)) collectSummaries(child, [...path, key], out);
  else if (Array.isArray(value)) value.forEach((child, i) => collectSummaries(child, [...path, String(i)], out));
}

function generic(result: unknown): string {
  const rows: Row[] = [];
  collectSummaries(result, [], rows);
  const scalars = isRecord(result)
    ? Object.entries(result).filter(([, v]) => isNum(v) || typeof v === 'boolean').map(([k, v]) => `- ${k}: ${typeof v === 'boolean' ? String(v) : fmt(v)}`)
    : [];
  const lines = ['No dedicated layout for this benchmark; its numeric summaries follow.', ''];
  lines.push(rows.length ? table(rows) : `Summaries: ${NA}`);
  if (scalars.length) lines.push('', ...scalars);
  return lines.join('\n');
}

const RENDERERS: Record<string, (result: unknown) => string> = {
  'serve-overhead': serveOverhead,
  'control-plane': controlPlane,
  'log-append': logAppend,
};

function dateText(value: Date | string): string {
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toISOString();
}

export function renderReport(results: Record<string, unknown>, meta: ReportMeta): string {
  const started = dateText(meta?.startedAt);
  const machine = meta?.machine;
  const versions = meta?.versions;
  const gib = isNum(machine?.memoryBytes) ? `${fmt(machine.memoryBytes / 1024 ** 3)} GiB` : NA;
  const lines = [
    `# Shoal benchmark report — ${started.slice(0, 10)}`,
    '',
    `- Started: ${started}; duration: ${isNum(meta?.durationS) ? `${fmt(meta.durationS)} s` : NA}`,
    `- Machine: ${machine?.cpuModel || NA}, ${isNum(machine?.cores) ? machine.cores : NA} logical cores, ${gib} memory, GPU: ${machine?.gpu || 'none'}`,
    `- Versions: Shoal ${versions?.shoal || NA}, Node ${versions?.node || NA}, node-llama-cpp ${versions?.nodeLlamaCpp || NA}, llama.cpp ${versions?.llamaCppCommit || NA}`,
    '',
    'Medians with spread (min–max, p25–p75) over the repetitions; speed figures compared against the baseline measured in the same run.',
  ];
  const names = Object.keys(results ?? {});
  if (names.length === 0) lines.push('', 'No benchmark results.');
  for (const name of names) {
    const result = results[name];
    lines.push('', `## ${name}`, '');
    if (!isRecord(result)) {
      lines.push(`Result: ${NA} (missing or not a JSON object)`);
      continue;
    }
    const error = errorNote(result);
    if (error) lines.push(error, '');
    const render = RENDERERS[name] ?? generic;
    try {
      lines.push(render(result));
    } catch (err) {
      lines.push(`Result: ${NA} (${escapeCell((err as Error).message)})`);
    }
  }
  return `${lines.join('\n')}\n`;
}

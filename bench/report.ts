/**
 * Renders the JSON results of one `bench/run.ts` run as a readable REPORT.md. Pure: no I/O, and
 * missing or malformed fields come out as "n/a" rather than an exception.
 */

export interface ReportMeta {
  startedAt: Date | string;
  durationS: number;
  /** A --quick run: fewer repetitions, smaller models and files, no fresh install (each section says what). */
  quick?: boolean;
  machine: { cpuModel: string; cores: number; memoryBytes: number; gpu: string | null };
  versions: { shoal: string; node: string; nodeLlamaCpp: string; llamaCppCommit: string | null; enginesBuildCommit?: string | null };
  /** 1-minute load average when the run started and ended: other work on the machine makes figures noisy. */
  loadAverage?: { start: number; end: number };
  /** Images written next to the report, embedded in their benchmark's section. */
  plots?: Plot[];
  /** Wall seconds each benchmark took, in the order they ran. */
  secondsByBenchmark?: Record<string, number>;
}

export interface Plot {
  benchmark: string;
  /** File name relative to the report. */
  file: string;
  alt: string;
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
  const lines: string[] = [];
  lines.push(
    `Shoal's HTTP serving path against node-llama-cpp called directly, same model, same run. ` +
      `Model: ${modelText(get(result, 'model'))}; threads: ${fmt(get(result, 'threads'))}; ` +
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
  if (typeof get(result, 'shoalEngine') === 'string') lines.push(`- Shoal's node ran the model with ${String(get(result, 'shoalEngine'))}.`);
  if (get(result, 'machine') !== undefined) lines.push('', conditions(result));
  return lines.join('\n');
}

function controlPlane(result: unknown): string {
  const targets = get(result, 'targets');
  const parts: { part: string; figure: string; field: string; unit: string; target: Target | null }[] = [
    { part: 'failover', figure: 'Failover: master loss → write accepted', field: 'acceptedMs', unit: 'ms', target: parseTarget(get(targets, 'failoverMs')) ?? targetOf('<=', get(result, 'failover', 'targetMs')) },
    { part: 'eventAppend', figure: 'Event append (group commit)', field: 'eventsPerS', unit: 'events/s', target: parseTarget(get(targets, 'eventsPerS')) ?? targetOf('>=', get(result, 'eventAppend', 'target')) },
    { part: 'catchUp', figure: isNum(get(result, 'catchUp', 'events')) ? `Follower catch-up, ${fmt(get(result, 'catchUp', 'events'))}-event tail` : 'Follower catch-up', field: 'caughtUpMs', unit: 'ms', target: parseTarget(get(targets, 'catchUpMs')) ?? targetOf('<=', get(result, 'catchUp', 'targetMs')) },
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

function modelText(model: unknown): string {
  const bits = [
    get(model, 'name'),
    isNum(get(model, 'params')) ? `${fmt((get(model, 'params') as number) / 1e6)}M params` : null,
    get(model, 'type'),
    isNum(get(model, 'bytes')) ? mib(get(model, 'bytes')) : null,
  ].filter((x): x is string => typeof x === 'string');
  return bits.length ? bits.join(', ') : NA;
}

function mib(bytes: unknown): string {
  return isNum(bytes) ? `${fmt(bytes / 1024 ** 2)} MiB` : NA;
}

function median(summary: unknown): unknown {
  return isSummary(summary) ? summary.median : undefined;
}

/** "0.93×", or n/a. */
function times(value: unknown): string {
  return isNum(value) ? `${fmt(value)}×` : NA;
}

/** A closing line with the conditions that make a figure noisy. */
function conditions(result: unknown): string {
  const load = get(result, 'machine', 'loadAverage1m');
  const quick = get(result, 'quick') === true ? ' --quick run.' : '';
  return `_Load average (1 min) when it finished: ${fmt(load)} on ${fmt(get(result, 'machine', 'cores'))} cores.${quick}_`;
}

function llamaServerBaseline(result: unknown): string {
  const lines = [
    `Shoal's API (streaming chat completions from a real node) against \`llama-server\` launched by hand with the same model, threads and slots, ` +
      `alternating which goes first. Model: ${modelText(get(result, 'model'))}; threads: ${fmt(get(result, 'threads'))}; slots: ${fmt(get(result, 'slots'))}; ` +
      `${fmt(get(result, 'maxTokens'))} tokens per request.`,
    '',
    table([
      { figure: "Decode tok/s, Shoal's API", summary: get(result, 'shoal', 'decodeTokPerS'), unit: 'tok/s', versus: `ratio ${times(get(result, 'decodeRatio'))} llama-server` },
      { figure: 'Decode tok/s, llama-server by hand (baseline)', summary: get(result, 'llamaServer', 'decodeTokPerS'), unit: 'tok/s' },
      {
        figure: "TTFT, Shoal's API",
        summary: get(result, 'shoal', 'ttftMs'),
        unit: 'ms',
        versus: `ratio ${times(get(result, 'ttftRatio'))}, ${signed(get(result, 'ttftOverheadMs'), 'ms')}`,
      },
      { figure: 'TTFT, llama-server by hand (baseline)', summary: get(result, 'llamaServer', 'ttftMs'), unit: 'ms' },
    ]),
    '',
    `- Baseline command: \`${String(get(result, 'llamaServerCommand') ?? NA)}\``,
    engineNote(result),
    '',
    conditions(result),
  ];
  return lines.join('\n');
}

/** Which engine Shoal's node ran, and what that means for a comparison with a locally built llama-server. */
function engineNote(result: unknown): string {
  const engine = get(result, 'shoalEngine');
  if (typeof engine !== 'string') return "- Shoal's engine: n/a.";
  const note = engine.startsWith('node-llama-cpp')
    ? ': llama-server is compiled on this machine from the same llama.cpp commit, so part of a gap is the engine build rather than Shoal\'s layers (serve-overhead compares Shoal with node-llama-cpp itself)'
    : '';
  return `- Shoal's node ran the model with ${engine}${note}.`;
}

function pair(a: unknown, b: unknown, unit: string): string {
  return `${fmt(a)} / ${fmt(b)} ${unit}`;
}

function concurrency(result: unknown): string {
  const levels = get(result, 'results');
  const lines = [
    `Bursts of N concurrent streaming requests against Shoal's API and against \`llama-server\` launched by hand, same model, threads and slots. ` +
      `Model: ${modelText(get(result, 'model'))}; threads: ${fmt(get(result, 'threads'))}; slots: ${fmt(get(result, 'slots'))}; ` +
      `${fmt(get(result, 'maxTokens'))} tokens per request; ${fmt(get(result, 'reps'))} burst(s) per level and server.`,
    '',
    '| Clients | Shoal aggregate tok/s (median, min–max) | llama-server aggregate tok/s (median, min–max) | Ratio | Shoal TTFT p50 / p95 | llama-server TTFT p50 / p95 | TTFT p95 ratio |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  if (Array.isArray(levels)) {
    for (const level of levels) {
      const s = get(level, 'shoal');
      const l = get(level, 'llamaServer');
      const agg = (side: unknown): string => {
        const a = get(side, 'aggregateTokPerS');
        return isSummary(a) ? `${fmt(a.median)} (${range(a.min, a.max)})` : NA;
      };
      const cells = [
        fmt(get(level, 'clients')),
        agg(s),
        agg(l),
        times(get(level, 'aggregateRatio')),
        pair(get(s, 'ttftMs', 'p50'), get(s, 'ttftMs', 'p95'), 'ms'),
        pair(get(l, 'ttftMs', 'p50'), get(l, 'ttftMs', 'p95'), 'ms'),
        times(get(level, 'ttftP95Ratio')),
      ];
      lines.push(`| ${cells.map(escapeCell).join(' | ')} |`);
    }
  }
  lines.push(
    '',
    `- Ratios are Shoal ÷ llama-server (medians for throughput, percentiles over all requests of a level for TTFT).`,
    `- Baseline command: \`${String(get(result, 'llamaServerCommand') ?? NA)}\``,
    engineNote(result),
    '',
    conditions(result),
  );
  return lines.join('\n');
}

/** Decode rates other benchmarks of this run measured on the physical-limit model. */
function sameModelDecodes(model: unknown, all: Record<string, unknown>): { label: string; tokPerS: unknown }[] {
  const bytes = get(model, 'bytes');
  const out: { label: string; tokPerS: unknown }[] = [];
  const baseline = all['llama-server-baseline'];
  if (isNum(bytes) && get(baseline, 'model', 'bytes') === bytes && get(baseline, 'threads') !== undefined) {
    out.push({ label: "Shoal's API (llama-server-baseline)", tokPerS: median(get(baseline, 'shoal', 'decodeTokPerS')) });
  }
  const overhead = all['serve-overhead'];
  if (isNum(bytes) && get(overhead, 'model', 'bytes') === bytes) {
    out.push({ label: 'node-llama-cpp in-process (serve-overhead)', tokPerS: median(get(overhead, 'direct', 'decodeTokPerS')) });
  }
  return out;
}

function physicalLimit(result: unknown, all: Record<string, unknown>): string {
  const bound = get(result, 'decodeBoundTokPerS');
  const model = get(result, 'model');
  const bandwidth = get(result, 'bandwidth');
  const lines = [
    `Decode reads every weight once per token, so memory read bandwidth bounds it: bound = bandwidth ÷ bytes read per token. ` +
      `Model: ${modelText(model)}; bytes read per token: ${mib(get(model, 'bytesReadPerToken'))}.`,
    '',
  ];
  const rows: Row[] = [];
  if (Array.isArray(bandwidth)) {
    for (const b of bandwidth) rows.push({ figure: `Memory read bandwidth, ${fmt(get(b, 'threads'))} thread(s)`, summary: get(b, 'gbPerS'), unit: 'GB/s' });
  }
  const own = get(result, 'llamaServerDecodeTokPerS');
  rows.push({
    figure: 'Decode, llama-server by hand',
    summary: own,
    unit: 'tok/s',
    versus: `${percent(get(result, 'fractionOfBound'))} of the ${fmt(bound)} tok/s bound`,
  });
  lines.push(table(rows));
  lines.push('');
  lines.push(`- Bound at ${fmt(get(result, 'engineThreads'))} engine thread(s): ${fmt(get(result, 'bandwidthGBPerS'))} GB/s ÷ ${mib(get(model, 'bytesReadPerToken'))} = **${fmt(bound)} tok/s**.`);
  for (const other of sameModelDecodes(model, all)) {
    const fraction = isNum(other.tokPerS) && isNum(bound) && bound > 0 ? other.tokPerS / bound : null;
    lines.push(`- ${other.label}: ${fmt(other.tokPerS)} tok/s = ${percent(fraction)} of the bound.`);
  }
  lines.push('- Placement predicts no speed for a node that has not measured its bandwidth (src/placement/speed.ts).');
  lines.push(`- Method: ${String(get(result, 'method') ?? NA)}.`);
  lines.push('', conditions(result));
  return lines.join('\n');
}

function percent(fraction: unknown): string {
  return isNum(fraction) ? `${fmt(fraction * 100)}%` : NA;
}

function modelTransfer(result: unknown): string {
  const throughput = get(result, 'throughput');
  const baseline = String(get(result, 'baseline') ?? 'curl');
  const target = parseTarget(get(result, 'targetRatio'));
  const ratios = get(result, 'ratios');
  const file = get(result, 'file');
  const link = get(result, 'link');
  const over = isRecord(link) ? `across a ${String(get(link, 'rate') ?? NA)} link (two network namespaces, \`${String(get(link, 'qdisc') ?? NA)}\` on both ends)` : 'over loopback';
  const lines = [
    `One generated GGUF (${String(get(file, 'name') ?? NA)}, ${mib(get(file, 'bytes'))}) served by the local hub server ${over}, fetched by each measurement into a fresh directory, rotating the order.`,
    '',
  ];
  const rows: Row[] = [];
  const labels: Record<string, string> = {
    hubDownload: "Shoal's download path (ModelStore.pull: hash, fsync, verify)",
    curl: 'curl -o (baseline)',
    curlFsync: 'curl -o, then fsync',
  };
  if (isRecord(throughput)) {
    for (const [name, figures] of Object.entries(throughput)) {
      const r = get(ratios, name);
      const isTarget = name === 'hubDownload' && target !== null;
      rows.push({
        figure: labels[name] ?? name,
        summary: get(figures, 'mbPerS'),
        unit: 'MB/s',
        versus: name === baseline ? 'baseline' : `ratio ${times(r)} ${baseline}${isTarget ? ` (target ${target.op} ${fmt(target.value)}: ${metText(meets(target, r))})` : ''}`,
      });
    }
  }
  lines.push(rows.length ? table(rows) : `Throughput: ${NA}`);
  lines.push('', `- Method: ${String(get(result, 'method') ?? NA)}.`, '', conditions(result));
  return lines.join('\n');
}

function installSize(result: unknown): string {
  const fresh = get(result, 'fresh') === true;
  const byCategory = get(result, 'bytesByCategory');
  const lines = [
    fresh
      ? `A fresh \`npm ci\` (npm ${String(get(result, 'npm') ?? NA)}, ${fmt(get(result, 'npmCiSeconds'))} s with this machine's npm cache): **${mib(get(result, 'totalBytes'))}** of node_modules, ${fmt(get(result, 'packages'))} packages.`
      : `**Not a fresh install** (--quick): this checkout's node_modules, **${mib(get(result, 'totalBytes'))}**, ${fmt(get(result, 'packages'))} packages.`,
    '',
    `- Production dependencies: ${mib(get(byCategory, 'production'))}; optional prebuilt engines (node-llama-cpp's CUDA, Vulkan, other platforms; \`npm ci --omit=optional\` leaves them out): ${mib(get(byCategory, 'optional'))}; dev tools: ${mib(get(byCategory, 'dev'))}.`,
    '',
    '| Largest packages | Size | Kind |',
    '| --- | ---: | --- |',
  ];
  const largest = get(result, 'largest');
  if (Array.isArray(largest)) for (const p of largest) lines.push(`| ${escapeCell(String(get(p, 'name') ?? NA))} | ${mib(get(p, 'bytes'))} | ${String(get(p, 'category') ?? NA)} |`);
  return lines.join('\n');
}

const RENDERERS: Record<string, (result: unknown, all: Record<string, unknown>) => string> = {
  'serve-overhead': serveOverhead,
  'llama-server-baseline': llamaServerBaseline,
  concurrency,
  'physical-limit': physicalLimit,
  'model-transfer': modelTransfer,
  'model-transfer-link': modelTransfer,
  'install-size': installSize,
  'control-plane': controlPlane,
  'log-append': logAppend,
};

// ---------------------------------------------------------------------------------------------------
// Headlines: the figures the top of the report and the README quote

export interface Headline {
  key: string;
  label: string;
  /** The figure, formatted (a ratio, a percentage, a size). */
  value: string;
  /** What it compares, formatted. */
  detail: string;
}

/** The last level of the concurrency curve that has both servers' figures. */
function topLevel(result: unknown): unknown {
  const levels = get(result, 'results');
  if (!Array.isArray(levels)) return undefined;
  return [...levels].reverse().find((l) => isSummary(get(l, 'shoal', 'aggregateTokPerS')) && isSummary(get(l, 'llamaServer', 'aggregateTokPerS')));
}

export function headlines(results: Record<string, unknown>): Headline[] {
  const out: Headline[] = [];
  const base = results['llama-server-baseline'];
  if (isNum(get(base, 'decodeRatio'))) {
    out.push({
      key: 'decodeVsLlamaServer',
      label: "Decode, Shoal's API vs llama-server launched by hand",
      value: times(get(base, 'decodeRatio')),
      detail: `${fmt(median(get(base, 'shoal', 'decodeTokPerS')))} vs ${fmt(median(get(base, 'llamaServer', 'decodeTokPerS')))} tok/s, ${modelText(get(base, 'model'))}, ${fmt(get(base, 'threads'))} engine thread(s)`,
    });
  }
  if (isNum(get(base, 'ttftOverheadMs'))) {
    out.push({
      key: 'ttftVsLlamaServer',
      label: "Time to first token, Shoal's API vs llama-server",
      value: signed(get(base, 'ttftOverheadMs'), 'ms'),
      detail: `${fmt(median(get(base, 'shoal', 'ttftMs')))} vs ${fmt(median(get(base, 'llamaServer', 'ttftMs')))} ms (medians)`,
    });
  }
  const overhead = results['serve-overhead'];
  if (isNum(get(overhead, 'decodeRatio'))) {
    out.push({
      key: 'decodeVsDirect',
      label: "Decode, Shoal's API vs node-llama-cpp in-process (same engine build)",
      value: times(get(overhead, 'decodeRatio')),
      detail: `${fmt(median(get(overhead, 'shoal', 'decodeTokPerS')))} vs ${fmt(median(get(overhead, 'direct', 'decodeTokPerS')))} tok/s; TTFT ${signed(get(overhead, 'ttftOverheadMs'), 'ms')}`,
    });
  }
  const top = topLevel(results.concurrency);
  if (top !== undefined) {
    out.push({
      key: 'concurrencyThroughput',
      label: `Aggregate throughput at ${fmt(get(top, 'clients'))} concurrent clients, Shoal vs llama-server`,
      value: times(get(top, 'aggregateRatio')),
      detail: `${fmt(median(get(top, 'shoal', 'aggregateTokPerS')))} vs ${fmt(median(get(top, 'llamaServer', 'aggregateTokPerS')))} tok/s; TTFT p95 ${fmt(get(top, 'shoal', 'ttftMs', 'p95'))} vs ${fmt(get(top, 'llamaServer', 'ttftMs', 'p95'))} ms`,
    });
  }
  const inProcess = get(results['in-process-concurrency'], 'results');
  const firstModel = Array.isArray(inProcess) ? inProcess[0] : undefined;
  if (isNum(get(firstModel, 'aggregateRatio'))) {
    const run = results['in-process-concurrency'];
    out.push({
      key: 'inProcessConcurrency',
      label: `Aggregate throughput at ${fmt(get(run, 'clients'))} concurrent clients, Shoal's in-process engine vs node-llama-cpp called directly`,
      value: times(get(firstModel, 'aggregateRatio')),
      detail: `${fmt(median(get(firstModel, 'shoal', 'aggregateTokPerS')))} vs ${fmt(median(get(firstModel, 'direct', 'aggregateTokPerS')))} tok/s, ${modelText(get(firstModel, 'model'))}, ${fmt(get(run, 'threads'))} engine thread(s); TTFT p95 ${fmt(get(firstModel, 'shoal', 'ttftMs', 'p95'))} vs ${fmt(get(firstModel, 'direct', 'ttftMs', 'p95'))} ms; target ${String(get(run, 'targets', 'aggregateRatio') ?? NA)}`,
    });
  }
  const limit = results['physical-limit'];
  if (isNum(get(limit, 'fractionOfBound'))) {
    const shoal = sameModelDecodes(get(limit, 'model'), results).find((d) => d.label.startsWith("Shoal's API"));
    const bound = get(limit, 'decodeBoundTokPerS');
    const shoalFraction = shoal && isNum(shoal.tokPerS) && isNum(bound) && bound > 0 ? `; Shoal's API ${percent(shoal.tokPerS / bound)}` : '';
    out.push({
      key: 'physicalBound',
      label: 'Decode vs the memory-bandwidth bound (llama-server)',
      value: percent(get(limit, 'fractionOfBound')),
      detail: `${fmt(median(get(limit, 'llamaServerDecodeTokPerS')))} of ${fmt(bound)} tok/s (${fmt(get(limit, 'bandwidthGBPerS'))} GB/s ÷ ${mib(get(limit, 'model', 'bytesReadPerToken'))})${shoalFraction}`,
    });
  }
  const transfer = results['model-transfer'];
  if (isNum(get(transfer, 'ratios', 'hubDownload'))) {
    out.push({
      key: 'downloadVsCurl',
      label: 'Model download through Shoal vs curl, same local server',
      value: times(get(transfer, 'ratios', 'hubDownload')),
      detail: `${fmt(median(get(transfer, 'throughput', 'hubDownload', 'mbPerS')))} vs ${fmt(median(get(transfer, 'throughput', 'curl', 'mbPerS')))} MB/s, ${mib(get(transfer, 'file', 'bytes'))} file; target ${String(get(transfer, 'targetRatio') ?? NA)}`,
    });
  }
  const overLink = results['model-transfer-link'];
  if (isNum(get(overLink, 'ratios', 'hubDownload'))) {
    out.push({
      key: 'downloadVsCurlLink',
      label: `Model download through Shoal vs curl, across a ${String(get(overLink, 'link', 'rate') ?? NA)} link`,
      value: times(get(overLink, 'ratios', 'hubDownload')),
      detail: `${fmt(median(get(overLink, 'throughput', 'hubDownload', 'mbPerS')))} vs ${fmt(median(get(overLink, 'throughput', 'curl', 'mbPerS')))} MB/s, ${mib(get(overLink, 'file', 'bytes'))} file; target ${String(get(overLink, 'targetRatio') ?? NA)}`,
    });
  }
  const copyOverLink = results['peer-copy-link'];
  if (isNum(get(copyOverLink, 'ratios', 'peerCopy'))) {
    out.push({
      key: 'peerCopyVsCurlLink',
      label: `Model copy between two nodes vs curl from the hub, across a ${String(get(copyOverLink, 'link', 'rate') ?? NA)} link`,
      value: times(get(copyOverLink, 'ratios', 'peerCopy')),
      detail: `${fmt(median(get(copyOverLink, 'throughput', 'peerCopy', 'mbPerS')))} vs ${fmt(median(get(copyOverLink, 'throughput', 'curl', 'mbPerS')))} MB/s, ${mib(get(copyOverLink, 'file', 'bytes'))} file; target ${String(get(copyOverLink, 'targetRatio') ?? NA)}`,
    });
  }
  const install = results['install-size'];
  if (isNum(get(install, 'totalBytes'))) {
    out.push({
      key: 'installSize',
      label: get(install, 'fresh') === true ? 'Install size, fresh npm ci' : "Install size (this checkout's node_modules, not a fresh npm ci)",
      value: mib(get(install, 'totalBytes')),
      detail: `production ${mib(get(install, 'bytesByCategory', 'production'))}, optional prebuilt engines ${mib(get(install, 'bytesByCategory', 'optional'))}, dev ${mib(get(install, 'bytesByCategory', 'dev'))}`,
    });
  }
  const cp = results['control-plane'];
  if (isSummary(get(cp, 'failover', 'acceptedMs'))) {
    out.push({ key: 'failover', label: 'Failover: master killed → a survivor accepts writes', value: `${fmt(median(get(cp, 'failover', 'acceptedMs')))} ms`, detail: `target ${String(get(cp, 'targets', 'failoverMs') ?? NA)} ms` });
  }
  if (isSummary(get(cp, 'idleRss', 'nodeRssMiB'))) {
    out.push({ key: 'idleRss', label: 'Idle node memory (RSS)', value: `${fmt(median(get(cp, 'idleRss', 'nodeRssMiB')))} MiB`, detail: `runner ${fmt(median(get(cp, 'idleRss', 'runnerRssMiB')))} MiB more; target ${String(get(cp, 'targets', 'nodeRssMiB') ?? NA)} MiB` });
  }
  return out;
}

export function headlineTable(list: Headline[]): string {
  if (list.length === 0) return 'No headline figures in this run.';
  return ['| Figure | Result | Measured against |', '| --- | ---: | --- |', ...list.map((h) => `| ${escapeCell(h.label)} | ${escapeCell(h.value)} | ${escapeCell(h.detail)} |`)].join('\n');
}

// ---------------------------------------------------------------------------------------------------

function dateText(value: Date | string): string {
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toISOString();
}

/** What --quick changes, said once at the top so no figure is mistaken for a full run's. */
export const QUICK_NOTE =
  'Quick run (`npm run bench -- --quick`): 1 engine thread instead of one per physical core (on a small machine shared with other work, ' +
  'engine threads that wait on each other stall many times over when one is descheduled), fewer repetitions, a 100M-parameter decode model instead of 200M, ' +
  '32 tokens per concurrent request instead of 64 and two bursts per level instead of three, ' +
  'a ~200 MB transfer file instead of ~1 GB, the checkout\'s node_modules instead of a fresh `npm ci`, one repetition of each control-plane figure and a 3,000-event catch-up tail instead of 10,000.';

export function renderReport(results: Record<string, unknown>, meta: ReportMeta): string {
  const started = dateText(meta?.startedAt);
  const machine = meta?.machine;
  const versions = meta?.versions;
  const gib = isNum(machine?.memoryBytes) ? `${fmt(machine.memoryBytes / 1024 ** 3)} GiB` : NA;
  const engines = versions?.enginesBuildCommit;
  const lines = [
    `# Shoal benchmark report — ${started.slice(0, 10)}`,
    '',
    `- Started: ${started}; duration: ${isNum(meta?.durationS) ? `${fmt(meta.durationS)} s` : NA}; mode: ${meta?.quick ? 'quick' : 'full'}`,
    `- Machine: ${machine?.cpuModel || NA}, ${isNum(machine?.cores) ? machine.cores : NA} logical cores, ${gib} memory, GPU: ${machine?.gpu || 'none'}`,
    `- Versions: Shoal ${versions?.shoal || NA}, Node ${versions?.node || NA}, node-llama-cpp ${versions?.nodeLlamaCpp || NA}, llama.cpp ${versions?.llamaCppCommit || NA}` +
      (engines !== undefined ? ` (hand-launched engines built from ${engines ?? 'nothing: not built'})` : ''),
  ];
  if (isRecord(meta?.secondsByBenchmark)) {
    lines.push(`- Time per benchmark: ${Object.entries(meta.secondsByBenchmark).map(([name, seconds]) => `${name} ${fmt(seconds)} s`).join(', ')}`);
  }
  if (meta?.loadAverage) {
    lines.push(`- Load average (1 min): ${fmt(meta.loadAverage.start)} at the start, ${fmt(meta.loadAverage.end)} at the end. Other work on the machine makes the figures noisy; the spread columns show how much.`);
  }
  lines.push('', 'Medians with spread (min–max, p25–p75) over the repetitions; speed figures compared against the baseline measured in the same run, alternating A/B.');
  if (meta?.quick) lines.push('', `> ${QUICK_NOTE}`);
  lines.push('', '## Headlines', '', headlineTable(headlines(results ?? {})));
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
      lines.push(render(result, results));
    } catch (err) {
      lines.push(`Result: ${NA} (${escapeCell((err as Error).message)})`);
    }
    for (const plot of (meta?.plots ?? []).filter((p) => p.benchmark === name)) lines.push('', `![${plot.alt}](${plot.file})`);
  }
  return `${lines.join('\n')}\n`;
}

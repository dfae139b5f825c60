import { isShoalError } from '../common/errors.js';
import type { ClusterSettings } from '../master/state/settings.js';
import type { Span, Trace, TraceSummary } from '../wire/diagnostics.js';
import { parseCommand } from './args.js';
import { connectToNode } from './client.js';
import { onOff } from './config.js';
import { nearest } from './suggest.js';

const TRACE_HELP = `Usage: shoal trace on|off [--data-dir <dir>]
       shoal trace list [--limit N] [--json] [--data-dir <dir>]
       shoal trace show <trace-id> [--json] [--data-dir <dir>]

Per-request traces (off by default). 'on' makes every member trace the requests that arrive from
then on: each traced request records its spans on every node it touches (http, route, data-plane,
queue, prefill, decode, respond), and the node that took it keeps the trace for 3 days
(SHOAL_TRACE_RETENTION_DAYS). 'off' stops it; kept traces stay until they age out.
'list' shows this node's traces, newest first; 'show' one of them as a waterfall.`;

const VERBS = ['on', 'off', 'list', 'show'];

const ms = (value: number): string => `${value.toFixed(1)} ms`;

export function formatSummaries(traces: readonly TraceSummary[]): string {
  if (traces.length === 0) return "no traces kept on this node (switch tracing on with 'shoal trace on')";
  return traces
    .map((t) => `${t.traceId}  ${new Date(t.startedAtMs).toISOString()}  ${String(t.status ?? '-').padStart(3)}  ${ms(t.durationMs).padStart(10)}  ${t.route}  ${t.modelId ?? ''}  nodes ${t.nodes.length}  spans ${t.spanCount}`)
    .join('\n');
}

/** One line per span, in start order, indented under its parent: start offset, duration, node, name, attributes. */
export function formatTrace(trace: Trace): string {
  const depth = new Map<string, number>();
  const byId = new Map(trace.spans.map((s) => [s.spanId, s]));
  const depthOf = (span: Span): number => {
    const known = depth.get(span.spanId);
    if (known !== undefined) return known;
    const parent = span.parentId === null ? undefined : byId.get(span.parentId);
    const d = parent === undefined || parent === span ? 0 : depthOf(parent) + 1;
    depth.set(span.spanId, d);
    return d;
  };
  const lines = [`trace ${trace.traceId}: ${trace.route} ${trace.modelId ?? ''} -> ${trace.status ?? 'unfinished'} in ${ms(trace.durationMs)}, on ${trace.nodes.join(', ')}`];
  for (const [nodeId, offset] of Object.entries(trace.offsets)) lines.push(`  clock of ${nodeId}: ${offset >= 0 ? '+' : ''}${ms(offset)} against ${trace.apiNodeId} (estimated, removed from its spans)`);
  for (const span of trace.spans) {
    const attributes = Object.entries(span.attributes).map(([k, v]) => `${k}=${String(v)}`).join(' ');
    lines.push(`${`+${ms(span.startMs - trace.startedAtMs)}`.padStart(12)} ${ms(span.endMs - span.startMs).padStart(10)}  ${span.nodeId.slice(0, 12).padEnd(12)}  ${'  '.repeat(depthOf(span))}${span.name}  ${attributes}`);
  }
  return lines.join('\n');
}

export async function traceCommand(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv, { options: { 'data-dir': { type: 'string' }, json: { type: 'boolean' }, limit: { type: 'string' } }, allowPositionals: true }, TRACE_HELP);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const [verb, id, ...extra] = positionals;
  const usage = (message?: string): number => {
    console.error(message === undefined ? TRACE_HELP : `${message}\n\n${TRACE_HELP}`);
    return 2;
  };
  if (verb === undefined) return usage();
  if (!VERBS.includes(verb)) {
    const guess = nearest(verb, VERBS);
    return usage(`unknown trace command '${verb}'${guess ? `; did you mean '${guess}'?` : ''}`);
  }
  if (extra.length > 0 || (verb === 'show') !== (id !== undefined)) return usage();
  let limit = 50;
  if (values.limit !== undefined) {
    limit = Number(values.limit);
    if (!Number.isInteger(limit) || limit < 1) return usage(`--limit must be a positive integer, got '${values.limit}'`);
  }
  const client = await connectToNode(values['data-dir']);
  if (verb === 'on' || verb === 'off') {
    const { settings } = await client.call<{ settings: ClusterSettings }>('PUT', '/settings', { tracing: onOff('tracing', verb) });
    console.log(settings.tracing ? 'tracing is on (on every member): new requests are traced' : 'tracing is off (on every member)');
    return 0;
  }
  if (verb === 'list') {
    const { traces } = await client.call<{ traces: TraceSummary[] }>('GET', `/traces?limit=${limit}`);
    console.log(values.json ? JSON.stringify(traces, null, 2) : formatSummaries(traces));
    return 0;
  }
  try {
    const { trace } = await client.call<{ trace: Trace }>('GET', `/traces/${encodeURIComponent(id!)}`);
    console.log(values.json ? JSON.stringify(trace, null, 2) : formatTrace(trace));
    return 0;
  } catch (error) {
    if (!isShoalError(error) || error.code !== 'NOT_FOUND') throw error;
    console.error(error.message);
    return 1;
  }
}

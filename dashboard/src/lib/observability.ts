// The Observability page's pure parts: timeline filters, clock offsets in words, the trace waterfall's
// geometry and the performance envelopes' curves. No DOM, so the unit tier checks them.

import { niceTicks, type Point } from './chart.js';
import type { Attributes, EnvelopePoint, PerformanceEnvelope, RunnerEntry, Span, TimelineEntry, Trace } from './types.js';

/** Entries one timeline read asks for (the page shows them all; narrower filters show fewer). */
export const TIMELINE_READ_ENTRIES = 500;
/** Traces the list asks for. */
export const TRACE_LIST_ENTRIES = 50;

/** The windows the timeline can look back over; null: everything the recorders still hold. */
export const TIMELINE_WINDOWS: { label: string; ms: number | null }[] = [
  { label: 'last 5 minutes', ms: 5 * 60_000 },
  { label: 'last hour', ms: 60 * 60_000 },
  { label: 'last day', ms: 24 * 60 * 60_000 },
  { label: 'everything kept', ms: null },
];

/** `GET /diagnostics/cluster/timeline` for a window ending now (the viewer's clock is the browser's, near enough for a window). */
export function timelinePath(windowMs: number | null, nowMs: number, limit = TIMELINE_READ_ENTRIES): string {
  const query = new URLSearchParams({ limit: String(limit) });
  if (windowMs !== null) query.set('sinceMs', String(Math.floor(nowMs - windowMs)));
  return `diagnostics/cluster/timeline?${query.toString()}`;
}

/** `GET /traces` (answers `{ traces }`, newest first). */
export function tracesPath(limit = TRACE_LIST_ENTRIES): string {
  return `traces?limit=${limit}`;
}

/** `GET /traces/:id` (answers `{ trace }`). */
export function tracePath(traceId: string): string {
  return `traces/${encodeURIComponent(traceId)}`;
}

export interface TimelineFilter {
  /** null: every node. */
  nodeId: string | null;
  /** null: every kind. */
  kind: string | null;
}

/** The entries the filter keeps, newest first (a refresh adds at the top, where the eye is). */
export function filterTimeline(entries: readonly TimelineEntry[], filter: TimelineFilter): TimelineEntry[] {
  return entries
    .map((entry, index) => ({ entry, index }))
    .filter(({ entry }) => (filter.nodeId === null || entry.nodeId === filter.nodeId) && (filter.kind === null || entry.kind === filter.kind))
    .sort((a, b) => b.entry.atMs - a.entry.atMs || b.index - a.index)
    .map(({ entry }) => entry);
}

/** The kinds present, sorted, for the kind filter. */
export function timelineKinds(entries: readonly TimelineEntry[]): string[] {
  return [...new Set(entries.map((e) => e.kind))].sort();
}

/** Signed milliseconds for people: "+12 ms", "−1.5 s", "±0 ms"; null (not estimated) as "unknown". */
export function formatOffset(offsetMs: number | null): string {
  if (offsetMs === null || !Number.isFinite(offsetMs)) return 'unknown';
  const size = Math.abs(offsetMs);
  if (size < 0.5) return '±0 ms';
  const sign = offsetMs > 0 ? '+' : '\u2212';
  if (size < 1000) return `${sign}${Math.round(size)} ms`;
  if (size < 60_000) return `${sign}${(size / 1000).toFixed(1)} s`;
  return `${sign}${Math.round(size / 60_000)} min`;
}

/** HH:MM:SS.mmm in the viewer's time zone: timeline moments are often milliseconds apart. */
export function formatClockMs(ms: number): string {
  const d = new Date(ms);
  const hms = [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
  return `${hms}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/** Flat attributes as sorted key/value rows (null shown as "null", so an absent reading is visible). */
export function attributeRows(attributes: Attributes): [string, string][] {
  return Object.keys(attributes)
    .sort()
    .map((key) => {
      const value = attributes[key];
      return [key, value === null || value === undefined ? 'null' : String(value)];
    });
}

/** One flight-recorder entry on one line: phase, request, tokens, memory, detail. */
export function recorderText(entry: RunnerEntry, formatBytes: (bytes: number) => string): string {
  const parts: string[] = [entry.phase];
  if (entry.requestId !== null) parts.push(`req ${entry.requestId.length > 12 ? `…${entry.requestId.slice(-8)}` : entry.requestId}`);
  if (entry.promptTokens !== null || entry.completionTokens !== null) parts.push(`${entry.promptTokens ?? '–'} in / ${entry.completionTokens ?? '–'} out tokens`);
  if (entry.rssBytes !== null) parts.push(`rss ${formatBytes(entry.rssBytes)}`);
  if (entry.detail !== null && entry.detail !== '') parts.push(entry.detail);
  return parts.join(' · ');
}

// ---- trace waterfall ----

export interface WaterfallBar {
  span: Span;
  /** How many of its ancestors are in the trace (0 for a root): the label's indent. */
  depth: number;
  /** Start and width as fractions of the trace's span of time, 0..1. */
  left: number;
  width: number;
  /** Start relative to the trace's start, and duration, in milliseconds. */
  offsetMs: number;
  durationMs: number;
}

export interface WaterfallLane {
  nodeId: string;
  bars: WaterfallBar[];
}

export interface Waterfall {
  startMs: number;
  totalMs: number;
  /** The API node's lane first, then the others by their first span. */
  lanes: WaterfallLane[];
  /** Round times from the start, with where they fall (0..1). */
  ticks: { ms: number; fraction: number }[];
}

/** Narrowest bar, as a fraction of the row: a span of a few microseconds stays visible and clickable. */
export const MIN_BAR_FRACTION = 0.004;

function depthOf(span: Span, byId: ReadonlyMap<string, Span>): number {
  let depth = 0;
  const seen = new Set([span.spanId]);
  let parent = span.parentId === null ? undefined : byId.get(span.parentId);
  while (parent && !seen.has(parent.spanId)) {
    depth += 1;
    seen.add(parent.spanId);
    parent = parent.parentId === null ? undefined : byId.get(parent.parentId);
  }
  return depth;
}

/**
 * Where each span's bar goes: spans are grouped per node and placed by startMs/endMs relative to the
 * trace's start (every stored time is on the API node's clock already, offsets applied). A span that
 * has not ended (endMs before startMs) gets the narrowest bar.
 */
export function waterfall(trace: Pick<Trace, 'spans' | 'apiNodeId' | 'startedAtMs' | 'durationMs'>): Waterfall {
  const spans = trace.spans;
  const startMs = Math.min(trace.startedAtMs, ...spans.map((s) => s.startMs));
  const endMs = Math.max(trace.startedAtMs + trace.durationMs, ...spans.map((s) => Math.max(s.startMs, s.endMs)));
  const totalMs = Math.max(0, endMs - startMs);
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const fraction = (ms: number): number => (totalMs === 0 ? 0 : Math.max(0, Math.min(1, (ms - startMs) / totalMs)));
  const lanes = new Map<string, WaterfallBar[]>();
  for (const span of spans) {
    const durationMs = Math.max(0, span.endMs - span.startMs);
    const left = fraction(span.startMs);
    const width = Math.min(1 - left, Math.max(MIN_BAR_FRACTION, fraction(span.startMs + durationMs) - left));
    const bar: WaterfallBar = { span, depth: depthOf(span, byId), left, width: Math.max(0, width), offsetMs: span.startMs - startMs, durationMs };
    const lane = lanes.get(span.nodeId) ?? [];
    lane.push(bar);
    lanes.set(span.nodeId, lane);
  }
  const ordered = [...lanes.entries()].map(([nodeId, bars]) => ({
    nodeId,
    bars: bars.sort((a, b) => a.span.startMs - b.span.startMs || a.depth - b.depth || a.span.name.localeCompare(b.span.name)),
  }));
  const first = (lane: WaterfallLane): number => lane.bars[0]?.span.startMs ?? Infinity;
  ordered.sort((a, b) => Number(b.nodeId === trace.apiNodeId) - Number(a.nodeId === trace.apiNodeId) || first(a) - first(b) || a.nodeId.localeCompare(b.nodeId));
  const ticks = totalMs === 0 ? [{ ms: 0, fraction: 0 }] : niceTicks(0, totalMs, 4).filter((t) => t <= totalMs).map((ms) => ({ ms, fraction: ms / totalMs }));
  return { startMs, totalMs, lanes: ordered, ticks };
}

// ---- performance envelopes ----

export interface EnvelopeCurves {
  /** Aggregate tokens/s and mean per-request tokens/s, by in-flight count (ascending). */
  aggregate: Point[];
  mean: Point[];
  /** The x range: from 0 to half a step past the highest in-flight count seen (at least 1), so its points are not cut by the edge. */
  x0: number;
  x1: number;
  /** Whole in-flight counts for the x axis. */
  xTicks: number[];
  /** The point at the knee, when the envelope names one and has it. */
  knee: EnvelopePoint | null;
}

export function envelopeCurves(envelope: PerformanceEnvelope): EnvelopeCurves {
  const points = [...envelope.points].sort((a, b) => a.inFlight - b.inFlight);
  const x1 = Math.max(1, ...points.map((p) => p.inFlight)) + 0.5;
  const xTicks = niceTicks(0, x1, 4).filter((t) => Number.isInteger(t) && t <= x1);
  return {
    aggregate: points.map((p) => ({ x: p.inFlight, y: p.aggregateTokensPerS })),
    mean: points.map((p) => ({ x: p.inFlight, y: p.meanTokensPerS })),
    x0: 0,
    x1,
    xTicks: xTicks.length > 0 ? xTicks : [0, x1],
    knee: envelope.kneeInFlight === null ? null : (points.find((p) => p.inFlight === envelope.kneeInFlight) ?? null),
  };
}

/** A stable key and a heading for one envelope: model, engine and serving node. */
export function envelopeKey(envelope: PerformanceEnvelope): string {
  return `${envelope.modelId}|${envelope.backend}|${envelope.nodeId}`;
}

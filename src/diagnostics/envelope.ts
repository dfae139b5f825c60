// Performance envelopes (issue #18): how fast one model runs on one engine of one serving node as a
// function of how many requests that instance held at once. Pure: the shell (envelope-meter.ts) times
// the requests and passes each finished one in; this store keeps a bounded window of them and derives
// the points and the concurrency knee on demand. It observes only; nothing routes by it.

import { percentiles } from '../metrics/percentiles.js';
import type { EnvelopePoint, PerformanceEnvelope, PerformanceView } from '../wire/diagnostics.js';

/** Newest samples kept per envelope (model, backend, serving node); older ones are dropped first. */
export const ENVELOPE_SAMPLES_MAX = 512;
/** Envelopes kept per serving node; the one updated longest ago is dropped first. */
export const ENVELOPES_PER_NODE_MAX = 32;
/** Envelopes kept in all (serving nodes that left keep theirs until pushed out); oldest update dropped first. */
export const ENVELOPES_MAX = 256;
/** Highest in-flight level told apart; busier samples count at this level. */
export const ENVELOPE_IN_FLIGHT_MAX = 256;
/** Samples with a decode speed a level needs before the knee estimate looks at it. */
export const KNEE_MIN_SAMPLES = 3;
/** A level rises above another when its aggregate throughput is at least this factor of the other's. */
export const KNEE_MIN_GAIN = 1.05;

/** One finished generation, as the API node saw it. */
export interface EnvelopeSample {
  /** Requests the serving instance held when this one was dispatched, this one included (>= 1). */
  inFlight: number;
  /** Decode tokens per second of this request; null when it made too few tokens to tell. */
  tokensPerS: number | null;
  /** Dispatch to first token. */
  ttftMs: number;
  /** Dispatch to the end. */
  latencyMs: number;
}

export interface EnvelopeKey {
  modelId: string;
  backend: string;
  nodeId: string;
}

interface Envelope extends EnvelopeKey {
  /** Ring of the newest samples; `next` is where the next one goes once it is full. */
  samples: EnvelopeSample[];
  next: number;
  /** Order of the last update, for dropping the stalest envelope. */
  touched: number;
}

const keyOf = (key: EnvelopeKey): string => JSON.stringify([key.nodeId, key.modelId, key.backend]);

export class EnvelopeStore {
  private readonly envelopes = new Map<string, Envelope>();
  private clock = 0;

  constructor(private readonly limits = { samplesMax: ENVELOPE_SAMPLES_MAX, perNodeMax: ENVELOPES_PER_NODE_MAX, envelopesMax: ENVELOPES_MAX }) {}

  record(key: EnvelopeKey, sample: EnvelopeSample): void {
    const id = keyOf(key);
    let envelope = this.envelopes.get(id);
    if (envelope === undefined) {
      envelope = { modelId: key.modelId, backend: key.backend, nodeId: key.nodeId, samples: [], next: 0, touched: 0 };
      this.makeRoomFor(key.nodeId);
      this.envelopes.set(id, envelope);
    }
    envelope.touched = ++this.clock;
    const clamped = { ...sample, inFlight: Math.min(ENVELOPE_IN_FLIGHT_MAX, Math.max(1, Math.round(sample.inFlight))) };
    if (envelope.samples.length < this.limits.samplesMax) {
      envelope.samples.push(clamped);
    } else {
      envelope.samples[envelope.next] = clamped;
      envelope.next = (envelope.next + 1) % this.limits.samplesMax;
    }
  }

  view(): PerformanceView {
    const envelopes = [...this.envelopes.values()].map(toEnvelope);
    envelopes.sort((a, b) => a.nodeId.localeCompare(b.nodeId) || a.modelId.localeCompare(b.modelId) || a.backend.localeCompare(b.backend));
    return { envelopes };
  }

  /** Drops the stalest envelope of the node when it has its most, and the stalest of all when the store is full. */
  private makeRoomFor(nodeId: string): void {
    const ofNode = [...this.envelopes.entries()].filter(([, e]) => e.nodeId === nodeId);
    if (ofNode.length >= this.limits.perNodeMax) this.dropStalest(ofNode);
    if (this.envelopes.size >= this.limits.envelopesMax) this.dropStalest([...this.envelopes.entries()]);
  }

  private dropStalest(candidates: [string, Envelope][]): void {
    let stalest: [string, Envelope] | undefined;
    for (const entry of candidates) if (stalest === undefined || entry[1].touched < stalest[1].touched) stalest = entry;
    if (stalest !== undefined) this.envelopes.delete(stalest[0]);
  }
}

function toEnvelope(envelope: Envelope): PerformanceEnvelope {
  const points = envelopePoints(envelope.samples);
  return { modelId: envelope.modelId, backend: envelope.backend, nodeId: envelope.nodeId, points: points.map((p) => p.point), kneeInFlight: kneeOf(points) };
}

interface RatedPoint {
  point: EnvelopePoint;
  /** Samples of the level that had a decode speed (the mean is over these). */
  rated: number;
}

/** One point per in-flight level seen, ascending. */
export function envelopePoints(samples: readonly EnvelopeSample[]): RatedPoint[] {
  const byLevel = new Map<number, EnvelopeSample[]>();
  for (const sample of samples) {
    const level = byLevel.get(sample.inFlight);
    if (level === undefined) byLevel.set(sample.inFlight, [sample]);
    else level.push(sample);
  }
  return [...byLevel.entries()]
    .sort(([a], [b]) => a - b)
    .map(([inFlight, level]) => {
      const speeds = level.flatMap((s) => (s.tokensPerS === null ? [] : [s.tokensPerS]));
      const meanTokensPerS = speeds.length === 0 ? 0 : speeds.reduce((sum, v) => sum + v, 0) / speeds.length;
      const [p50TtftMs] = percentiles(level.map((s) => s.ttftMs), [50]);
      const [p50LatencyMs] = percentiles(level.map((s) => s.latencyMs), [50]);
      return {
        point: { inFlight, requests: level.length, meanTokensPerS, aggregateTokensPerS: meanTokensPerS * inFlight, p50TtftMs: p50TtftMs ?? null, p50LatencyMs: p50LatencyMs ?? null },
        rated: speeds.length,
      };
    });
}

/**
 * The concurrency knee: among the levels with at least KNEE_MIN_SAMPLES rated samples, the smallest
 * level L that has such a level above it and where no such level above it reaches KNEE_MIN_GAIN times
 * L's aggregate throughput. Past L, more concurrency stops buying throughput (each request only gets
 * slower). Looking at every level above, not just the next, keeps one noisy level from faking a knee.
 * Null while fewer than two levels qualify or while throughput still rises at the highest one.
 */
export function kneeOf(points: readonly RatedPoint[]): number | null {
  const qualified = points.filter((p) => p.rated >= KNEE_MIN_SAMPLES).map((p) => p.point);
  for (let i = 0; i < qualified.length - 1; i++) {
    const here = qualified[i]!;
    const rises = qualified.slice(i + 1).some((above) => above.aggregateTokensPerS >= KNEE_MIN_GAIN * here.aggregateTokensPerS);
    if (!rises) return here.inFlight;
  }
  return null;
}

// Flight recorders (issue #18): bounded rings of what a runner and a node did, always on, kept in
// memory outside the event log (they are this node's account, not the cluster's decisions). Pure:
// the clock is passed in, so the simulation and unit tests record at the times they choose.

import { Ring } from '../metrics/ring.js';
import { ATTRIBUTE_KEY_MAX_CHARS, NODE_RECORDER_ENTRIES, RECORDER_TEXT_MAX_CHARS, RUNNER_RECORDER_ENTRIES, type Attributes, type MomentKind, type NodeMoment, type RunnerEntry } from '../wire/diagnostics.js';

const cut = (text: string): string => (text.length <= RECORDER_TEXT_MAX_CHARS ? text : `${text.slice(0, RECORDER_TEXT_MAX_CHARS - 1)}…`);

/**
 * Data as the wire schema bounds it (keys of 64 characters, texts of RECORDER_TEXT_MAX_CHARS): a
 * long crash reason or a split over many nodes must not make this node's whole answer invalid.
 */
function boundedData(data: Attributes): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(data)) out[key.slice(0, ATTRIBUTE_KEY_MAX_CHARS)] = typeof value === 'string' ? cut(value) : value;
  return out;
}

/** A ring of recorder entries, oldest dropped first; `dropped` counts what fell out. */
class BoundedLog<T> {
  private readonly ring: Ring<T>;
  private droppedCount = 0;

  constructor(capacity: number) {
    this.ring = new Ring<T>(capacity);
  }

  protected add(entry: T): void {
    if (this.ring.push(entry) !== undefined) this.droppedCount += 1;
  }

  /** Oldest first. */
  entries(): T[] {
    return [...this.ring];
  }

  get dropped(): number {
    return this.droppedCount;
  }
}

/** One runner's phase transitions (every engine: the worker records them around the runner's contract). */
export class RunnerRecorder extends BoundedLog<RunnerEntry> {
  constructor(
    private readonly nowMs: () => number,
    capacity = RUNNER_RECORDER_ENTRIES,
  ) {
    super(capacity);
  }

  record(entry: Omit<RunnerEntry, 'atMs' | 'requestId' | 'promptTokens' | 'completionTokens' | 'rssBytes' | 'detail'> & Partial<Omit<RunnerEntry, 'atMs'>>): RunnerEntry {
    const full: RunnerEntry = {
      atMs: this.nowMs(),
      phase: entry.phase,
      requestId: entry.requestId ?? null,
      promptTokens: entry.promptTokens ?? null,
      completionTokens: entry.completionTokens ?? null,
      rssBytes: entry.rssBytes ?? null,
      detail: entry.detail === undefined || entry.detail === null ? null : cut(entry.detail),
    };
    this.add(full);
    return full;
  }
}

/** The node's own significant moments: elections, joins, prunes, placements, crashes, failed downloads. */
export class NodeRecorder extends BoundedLog<NodeMoment> {
  private readonly listeners = new Set<(moment: NodeMoment) => void>();

  constructor(
    private readonly nowMs: () => number,
    capacity = NODE_RECORDER_ENTRIES,
  ) {
    super(capacity);
  }

  record(kind: MomentKind, text: string, data: Attributes = {}): NodeMoment {
    const moment: NodeMoment = { atMs: this.nowMs(), kind, text: cut(text), data: boundedData(data) };
    this.add(moment);
    for (const listener of this.listeners) listener(moment);
    return moment;
  }

  /** Called with each moment as it is recorded (the log mirrors them); returns the unsubscribe. */
  onMoment(listener: (moment: NodeMoment) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** Where a part records a node moment; parts take this rather than the recorder, so tests pass a spy. */
export type RecordMoment = (kind: MomentKind, text: string, data?: Attributes) => void;

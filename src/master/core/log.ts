import assert from 'node:assert/strict';
import { applyRecord } from '../state/apply.js';
import type { Origin } from '../state/commands.js';
import type { Event } from '../state/events.js';
import { GENESIS_HASH, stateHash } from '../state/hash.js';
import type { CommandId } from '../../common/ids.js';
import { COMMAND_MEMORY_ENTRIES, makeRecord, verifyChain, type CommandEntry, type LogRecord, type Snapshot, type TermRange } from '../state/record.js';
import { emptyState, type ClusterState } from '../state/state.js';
import { extendTerms, termAt, truncateTerms, type LogShape } from './term-ranges.js';

/** A persisted log that does not hold together (the shell cut torn tails already; this is corruption). */
export class LogCorruptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LogCorruptError';
  }
}

function entryOf(record: LogRecord): CommandEntry | null {
  if (record.origin === null) return null;
  const rejection = record.event.type === 'CommandRejected' ? { code: record.event.code, message: record.event.message } : null;
  return { commandId: record.origin.commandId, idx: record.idx, rejection, origin: record.origin };
}

/**
 * One node's copy of the replicated log in memory: a base snapshot, the records after it, and what they
 * derive (state, term runs, the memory of decided commands). Mutable, owned by one NodeCore; every method
 * keeps the derived parts equal to a replay of base + records.
 */
export class ReplicatedLog {
  private base: Snapshot | null;
  private recs: LogRecord[];
  private current: ClusterState;
  private runs: TermRange[];
  private commands: Map<CommandId, CommandEntry>;

  constructor(snapshot: Snapshot | null, records: readonly LogRecord[]) {
    this.base = snapshot;
    const baseIdx = snapshot?.idx ?? 0;
    // The shell may still hold records a checkpoint covers; only what follows the snapshot is ours.
    const tail = records.filter((record) => record.idx > baseIdx);
    const check = verifyChain(baseIdx, snapshot?.hash ?? GENESIS_HASH, tail, snapshot?.term ?? 0);
    if (!check.ok) throw new LogCorruptError(`the persisted log is corrupt at idx ${check.idx}: ${check.reason}`);
    if (snapshot !== null && stateHash(snapshot.state) !== snapshot.stateHash) {
      throw new LogCorruptError(`the persisted snapshot at idx ${snapshot.idx} does not match its state hash`);
    }
    this.recs = [...tail];
    this.current = snapshot?.state ?? emptyState();
    this.runs = snapshot === null ? [] : [...snapshot.terms];
    this.commands = new Map();
    for (const entry of snapshot?.commands ?? []) this.remember(entry);
    for (const record of this.recs) this.derive(record);
  }

  get baseIdx(): number {
    return this.base?.idx ?? 0;
  }
  get lastIdx(): number {
    return this.recs.length > 0 ? this.recs[this.recs.length - 1]!.idx : this.baseIdx;
  }
  get lastHash(): string {
    return this.recs.length > 0 ? this.recs[this.recs.length - 1]!.hash : (this.base?.hash ?? GENESIS_HASH);
  }
  get lastTerm(): number {
    return this.recs.length > 0 ? this.recs[this.recs.length - 1]!.term : (this.base?.term ?? 0);
  }
  get state(): ClusterState {
    return this.current;
  }
  get terms(): readonly TermRange[] {
    return this.runs;
  }
  get records(): readonly LogRecord[] {
    return this.recs;
  }
  get snapshot(): Snapshot | null {
    return this.base;
  }
  shape(): LogShape {
    return { terms: this.runs, lastIdx: this.lastIdx };
  }

  /** The hash of the record at `idx` while this log still knows it (0 is the genesis). */
  hashAt(idx: number): string | undefined {
    if (idx === 0) return GENESIS_HASH;
    if (idx === this.baseIdx) return this.base?.hash;
    return this.recordAt(idx)?.hash;
  }
  recordAt(idx: number): LogRecord | undefined {
    const record = this.recs[idx - this.baseIdx - 1];
    return record !== undefined && record.idx === idx ? record : undefined;
  }
  termAt(idx: number): number | undefined {
    return termAt(this.shape(), idx);
  }
  command(commandId: CommandId): CommandEntry | undefined {
    return this.commands.get(commandId);
  }

  /** Appends a record the caller has chain-checked against lastHash. */
  append(record: LogRecord): void {
    assert.equal(record.idx, this.lastIdx + 1, 'log append out of order');
    this.recs.push(record);
    this.derive(record);
  }

  /** Makes, appends and returns the next record (the master's write path). */
  appendNew(term: number, event: Event, origin: Origin | null): LogRecord {
    assert.ok(term >= this.lastTerm, `term ${term} would go back from ${this.lastTerm}`);
    const record = makeRecord(this.lastHash, term, this.lastIdx + 1, event, origin);
    this.append(record);
    return record;
  }

  /** Appends records after checking they continue this log; returns how many were taken (stops at the first bad one). */
  appendChecked(records: readonly LogRecord[]): { taken: LogRecord[]; error: string | null } {
    const taken: LogRecord[] = [];
    for (const record of records) {
      const check = verifyChain(this.lastIdx, this.lastHash, [record], this.lastTerm);
      if (!check.ok) return { taken, error: check.reason };
      this.append(record);
      taken.push(record);
    }
    return { taken, error: null };
  }

  /** Cuts every record after `afterIdx` (which must not be below the base) and returns them. */
  truncateAfter(afterIdx: number): LogRecord[] {
    assert.ok(afterIdx >= this.baseIdx, `cannot truncate to ${afterIdx} below the snapshot at ${this.baseIdx}`);
    const keep = afterIdx - this.baseIdx;
    const removed = this.recs.slice(keep);
    if (removed.length === 0) return removed;
    this.recs = this.recs.slice(0, keep);
    this.rebuild();
    return removed;
  }

  /** Replaces everything with `snapshot` (a transfer from another node). */
  install(snapshot: Snapshot): void {
    this.base = snapshot;
    this.recs = [];
    this.rebuild();
  }

  /**
   * A checkpoint at `idx` (base ≤ idx ≤ last): becomes the new base and the records up to it are dropped.
   * It keeps the origins of the commands it remembers, so a later heal that discards compacted records can
   * still re-propose them.
   */
  checkpoint(idx: number): Snapshot {
    assert.ok(idx > this.baseIdx && idx <= this.lastIdx, `checkpoint ${idx} outside (${this.baseIdx}, ${this.lastIdx}]`);
    let state = this.base?.state ?? emptyState();
    const covered = this.recs.slice(0, idx - this.baseIdx);
    for (const record of covered) state = applyRecord(state, record);
    const last = covered[covered.length - 1]!;
    const snapshot: Snapshot = {
      idx,
      term: last.term,
      hash: last.hash,
      state,
      stateHash: stateHash(state),
      terms: truncateTerms(this.runs, idx),
      commands: [...this.commands.values()].filter((entry) => entry.idx <= idx),
    };
    this.base = snapshot;
    this.recs = this.recs.slice(covered.length);
    return snapshot;
  }

  /** The whole log as one snapshot at its last record, for a joiner or a node too far behind. */
  transfer(): Snapshot {
    assert.ok(this.lastIdx >= 1, 'an empty log has nothing to transfer');
    return {
      idx: this.lastIdx,
      term: this.lastTerm,
      hash: this.lastHash,
      state: this.current,
      stateHash: stateHash(this.current),
      terms: [...this.runs],
      // With origins: the receiver may be the last holder of some of these commands after a later heal.
      commands: [...this.commands.values()],
    };
  }

  /** Records after `afterIdx`, at most `maxRecords` and about `maxBytes` of JSON; `more` when some were left. */
  recordsAfter(afterIdx: number, maxRecords: number, maxBytes: number): { records: LogRecord[]; more: boolean } {
    assert.ok(afterIdx >= this.baseIdx, 'records below the snapshot are gone');
    const out: LogRecord[] = [];
    let bytes = 0;
    for (let i = afterIdx - this.baseIdx; i < this.recs.length && out.length < maxRecords; i++) {
      const record = this.recs[i]!;
      const size = Buffer.byteLength(JSON.stringify(record));
      if (out.length > 0 && bytes + size > maxBytes) break;
      bytes += size;
      out.push(record);
    }
    const lastSent = out.length > 0 ? out[out.length - 1]!.idx : afterIdx;
    return { records: out, more: lastSent < this.lastIdx };
  }

  /** The commands whose records come after `afterIdx` (including compacted ones this node still remembers). */
  originsAfter(afterIdx: number): Origin[] {
    const out = new Map<CommandId, Origin>();
    for (const entry of this.commands.values()) if (entry.idx > afterIdx && entry.origin !== undefined) out.set(entry.commandId, entry.origin);
    for (const record of this.recs) if (record.idx > afterIdx && record.origin !== null) out.set(record.origin.commandId, record.origin);
    return [...out.values()];
  }

  private derive(record: LogRecord): void {
    this.current = applyRecord(this.current, record);
    extendTerms(this.runs, record.term, record.idx);
    const entry = entryOf(record);
    if (entry !== null) this.remember(entry);
  }

  private remember(entry: CommandEntry): void {
    this.commands.delete(entry.commandId);
    this.commands.set(entry.commandId, entry);
    if (this.commands.size > COMMAND_MEMORY_ENTRIES) {
      const oldest = this.commands.keys().next();
      if (oldest.done !== true) this.commands.delete(oldest.value);
    }
  }

  private rebuild(): void {
    const base = this.base;
    this.current = base?.state ?? emptyState();
    this.runs = base === null ? [] : [...base.terms];
    this.commands = new Map();
    for (const entry of base?.commands ?? []) this.remember(entry);
    for (const record of this.recs) this.derive(record);
  }
}

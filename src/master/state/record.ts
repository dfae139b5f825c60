import { z } from 'zod';
import { Origin } from './commands.js';
import { Event, REJECTION_MESSAGE_MAX_CHARS, ResultCode } from './events.js';
import { GENESIS_HASH, recordHash, RECORD_HASH_HEX_CHARS } from './hash.js';
import { CommandId } from '../../common/ids.js';
import { ClusterState } from './state.js';

export const RecordHash = z.string().regex(new RegExp(`^[0-9a-f]{${RECORD_HASH_HEX_CHARS}}$`));

/**
 * One entry of the replicated log. `origin` is the command it was decided from (null for the master's own
 * events: TermStarted, NodeTimedOut, NodeReturned); exactly one record per decided command carries it.
 */
export const LogRecord = z.strictObject({
  term: z.number().int().min(1),
  idx: z.number().int().min(1),
  hash: RecordHash,
  event: Event,
  origin: Origin.nullable(),
});
export type LogRecord = z.infer<typeof LogRecord>;

/** A run of consecutive records of one term: the log's shape in a few numbers (term, idx) identify a record. */
export const TermRange = z.strictObject({ term: z.number().int().min(1), firstIdx: z.number().int().min(1) });
export type TermRange = z.infer<typeof TermRange>;

/** The master's memory of a decided command: enough to answer a retry without deciding it again. */
export const CommandEntry = z.strictObject({
  commandId: CommandId,
  idx: z.number().int().min(1),
  rejection: z.strictObject({ code: ResultCode, message: z.string().max(REJECTION_MESSAGE_MAX_CHARS) }).nullable(),
  /** Kept in a node's own checkpoints (to re-propose compacted records that a heal discards), not on the wire. */
  origin: Origin.optional(),
});
export type CommandEntry = z.infer<typeof CommandEntry>;

/** How many decided commands the log remembers (dedupe window for retries and re-proposals). */
export const COMMAND_MEMORY_ENTRIES = 4096;
/** More term ranges than this in one history is not a cluster anyone runs; it bounds the snapshot. */
export const MAX_TERM_RANGES = 65_536;

/** The state after record `idx` (whose hash is `hash`), with what is needed to keep the log going from it. */
export const Snapshot = z.strictObject({
  idx: z.number().int().min(1),
  term: z.number().int().min(1),
  hash: RecordHash,
  state: ClusterState,
  stateHash: z.string().regex(/^[0-9a-f]{64}$/),
  terms: z.array(TermRange).min(1).max(MAX_TERM_RANGES),
  commands: z.array(CommandEntry).max(COMMAND_MEMORY_ENTRIES),
});
export type Snapshot = z.infer<typeof Snapshot>;

export function makeRecord(prevHash: string, term: number, idx: number, event: Event, origin: Origin | null): LogRecord {
  return { term, idx, hash: recordHash(prevHash, { term, idx, event, origin }), event, origin };
}

export type ChainCheck = { ok: true; lastHash: string } | { ok: false; idx: number; reason: string };

/**
 * Checks that `records` continue a log whose last record is (`prevIdx`, `prevHash`): consecutive idx,
 * non-decreasing terms and every hash recomputed. Any flipped byte in any record fails it.
 */
export function verifyChain(prevIdx: number, prevHash: string, records: readonly LogRecord[], prevTerm = 0): ChainCheck {
  let hash = prevIdx === 0 ? GENESIS_HASH : prevHash;
  let term = prevTerm;
  let idx = prevIdx;
  for (const record of records) {
    if (record.idx !== idx + 1) return { ok: false, idx: record.idx, reason: `expected idx ${idx + 1}, found ${record.idx}` };
    if (record.term < term) return { ok: false, idx: record.idx, reason: `term ${record.term} after term ${term}` };
    const expected = recordHash(hash, record);
    if (expected !== record.hash) return { ok: false, idx: record.idx, reason: 'hash does not match its content and predecessor' };
    hash = record.hash;
    term = record.term;
    idx = record.idx;
  }
  return { ok: true, lastHash: hash };
}

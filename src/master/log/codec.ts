import { decode, Encoder } from '@msgpack/msgpack';
import { errorMessage } from '../../common/errors.js';

/**
 * Record framing for the event log (and the snapshot and term files):
 *
 *   [u32 LE payload length][u32 LE CRC-32C of payload][payload = msgpack(record)]
 *
 * The codec treats records as opaque msgpack-serializable values; the store checks their `idx`.
 */

/** Bytes before each payload: length and checksum. */
export const FRAME_HEADER_BYTES = 8;
/** Largest payload a frame may carry; bigger records are refused when appended. */
export const MAX_RECORD_BYTES = 4 * 1024 * 1024;

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), slice-by-8 tables.
const CRC_TABLES: Uint32Array[] = (() => {
  const tables = Array.from({ length: 8 }, () => new Uint32Array(256));
  const t0 = tables[0]!;
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t0[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t0[n]!;
    for (let k = 1; k < 8; k++) {
      c = t0[c & 0xff]! ^ (c >>> 8);
      tables[k]![n] = c >>> 0;
    }
  }
  return tables;
})();

/** CRC-32C of `bytes[start, end)`. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = CRC_TABLES as [Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array];
  let crc = 0xffffffff;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    const lo = crc ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24));
    crc =
      t7[lo & 0xff]! ^
      t6[(lo >>> 8) & 0xff]! ^
      t5[(lo >>> 16) & 0xff]! ^
      t4[lo >>> 24]! ^
      t3[bytes[i + 4]!]! ^
      t2[bytes[i + 5]!]! ^
      t1[bytes[i + 6]!]! ^
      t0[bytes[i + 7]!]!;
  }
  for (; i < end; i++) crc = t0[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

const encoder = new Encoder();

/** The msgpack payload of a record (no frame). */
export function encodePayload(record: unknown): Uint8Array {
  return encoder.encode(record);
}

/** One framed record. Throws nothing on size: callers check `payloadBytes(frame)` against their limit. */
export function encodeRecord(record: unknown): Buffer {
  const payload = encoder.encodeSharedRef(record); // copied into the frame before the encoder is reused
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32c(payload), 4);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

export type TailState = 'clean' | 'torn' | 'corrupt';

export interface DecodeResult<T> {
  /** The records of every valid frame before the first bad one, in order. */
  records: T[];
  /** Byte offset of each record's frame (parallel to `records`). */
  offsets: number[];
  /** Length of the valid prefix: the end of the last valid frame. */
  validBytes: number;
  /**
   * `clean`: the buffer ends exactly after a valid frame. `torn`: what follows the valid prefix is an
   * incomplete or damaged last frame with nothing valid after it, safe to truncate at `validBytes`.
   * `corrupt`: a bad frame is followed by at least one valid frame, i.e. damage in the middle of the log.
   */
  tail: TailState;
  /** Where the first bad frame starts (= `validBytes`) when the tail is not clean. */
  corruptAt?: number;
  /** Why the first bad frame is bad, when the tail is not clean. */
  reason?: string;
}

type FrameCheck = { ok: true; value: unknown; end: number } | { ok: false; reason: string; incomplete: boolean };

function checkFrame(buf: Uint8Array, view: DataView, pos: number, maxPayloadBytes: number): FrameCheck {
  const remaining = buf.length - pos;
  if (remaining < FRAME_HEADER_BYTES) return { ok: false, reason: `incomplete frame header (${remaining} of ${FRAME_HEADER_BYTES} bytes)`, incomplete: true };
  const length = view.getUint32(pos, true);
  if (length === 0 || length > maxPayloadBytes) return { ok: false, reason: `implausible payload length ${length}`, incomplete: false };
  const end = pos + FRAME_HEADER_BYTES + length;
  if (end > buf.length) return { ok: false, reason: `incomplete frame (${remaining} of ${FRAME_HEADER_BYTES + length} bytes)`, incomplete: true };
  const expected = view.getUint32(pos + 4, true);
  if (crc32c(buf, pos + FRAME_HEADER_BYTES, end) !== expected) return { ok: false, reason: 'checksum mismatch', incomplete: false };
  try {
    return { ok: true, value: decode(buf.subarray(pos + FRAME_HEADER_BYTES, end)), end };
  } catch (error) {
    return { ok: false, reason: `undecodable payload (${errorMessage(error)})`, incomplete: false };
  }
}

/**
 * Walks `buf` frame by frame. At the first bad frame it looks for any valid frame at any later byte
 * offset: if one exists the damage is mid-log (`corrupt`), otherwise the bad bytes are a torn tail.
 */
export function decodeRecords<T = unknown>(buf: Uint8Array, options: { maxPayloadBytes?: number } = {}): DecodeResult<T> {
  const maxPayloadBytes = options.maxPayloadBytes ?? MAX_RECORD_BYTES;
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const records: T[] = [];
  const offsets: number[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const frame = checkFrame(buf, view, pos, maxPayloadBytes);
    if (frame.ok) {
      records.push(frame.value as T);
      offsets.push(pos);
      pos = frame.end;
      continue;
    }
    for (let probe = pos + 1; probe + FRAME_HEADER_BYTES < buf.length; probe++) {
      if (checkFrame(buf, view, probe, maxPayloadBytes).ok) {
        return { records, offsets, validBytes: pos, tail: 'corrupt', corruptAt: pos, reason: `${frame.reason}; a valid frame follows at byte ${probe}` };
      }
    }
    return { records, offsets, validBytes: pos, tail: 'torn', corruptAt: pos, reason: frame.reason };
  }
  return { records, offsets, validBytes: pos, tail: 'clean' };
}

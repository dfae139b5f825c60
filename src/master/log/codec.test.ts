import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crc32c, decodeRecords, encodeRecord, FRAME_HEADER_BYTES } from './codec.js';

/** Bit-at-a-time CRC-32C, the definition the table-driven one must match. */
function crc32cReference(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? 0x82f63b78 ^ (crc >>> 1) : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const record = (idx: number) => ({ term: 1, idx, hash: 'ab'.repeat(16), event: { type: 'NicknameSet', nickname: `n${idx}` }, origin: null });

test('crc32c matches the standard check value and the bitwise definition', () => {
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  assert.equal(crc32c(new Uint8Array(0)), 0);
  const bytes = Buffer.alloc(1000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  for (const length of [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 999, 1000]) {
    assert.equal(crc32c(bytes.subarray(0, length)), crc32cReference(bytes.subarray(0, length)), `length ${length}`);
    assert.equal(crc32c(bytes, 3, 3 + Math.min(length, 997)), crc32cReference(bytes.subarray(3, 3 + Math.min(length, 997))), `offset 3, length ${length}`);
  }
});

test('frames round trip and a clean buffer reports a clean tail', () => {
  const frames = [1, 2, 3].map((idx) => encodeRecord(record(idx)));
  assert.equal(frames[0]!.readUInt32LE(0), frames[0]!.length - FRAME_HEADER_BYTES);
  const decoded = decodeRecords(Buffer.concat(frames));
  assert.deepEqual(decoded.records, [record(1), record(2), record(3)]);
  assert.deepEqual(decoded.offsets, [0, frames[0]!.length, frames[0]!.length + frames[1]!.length]);
  assert.equal(decoded.validBytes, frames.reduce((n, f) => n + f.length, 0));
  assert.equal(decoded.tail, 'clean');
  assert.equal(decoded.corruptAt, undefined);
  assert.deepEqual(decodeRecords(Buffer.alloc(0)), { records: [], offsets: [], validBytes: 0, tail: 'clean' });
});

test('an incomplete last frame of any length is a torn tail', () => {
  const good = Buffer.concat([encodeRecord(record(1)), encodeRecord(record(2))]);
  const last = encodeRecord(record(3));
  for (let cut = 1; cut < last.length; cut++) {
    const decoded = decodeRecords(Buffer.concat([good, last.subarray(0, cut)]));
    assert.equal(decoded.tail, 'torn', `cut at ${cut}`);
    assert.equal(decoded.validBytes, good.length);
    assert.equal(decoded.corruptAt, good.length);
    assert.equal(decoded.records.length, 2);
  }
});

test('a damaged last frame with nothing valid after it is torn; zero-filled tails too', () => {
  const good = encodeRecord(record(1));
  const last = Buffer.from(encodeRecord(record(2)));
  last[last.length - 3]! ^= 0x10;
  const flipped = decodeRecords(Buffer.concat([good, last]));
  assert.equal(flipped.tail, 'torn');
  assert.equal(flipped.reason, 'checksum mismatch');
  assert.equal(flipped.validBytes, good.length);
  const zeros = decodeRecords(Buffer.concat([good, Buffer.alloc(4096)]));
  assert.equal(zeros.tail, 'torn');
  assert.equal(zeros.validBytes, good.length);
});

test('a damaged frame followed by a valid one is mid-log corruption', () => {
  const frames = [1, 2, 3, 4].map((idx) => Buffer.from(encodeRecord(record(idx))));
  const at = frames[0]!.length;
  frames[1]![FRAME_HEADER_BYTES + 5]! ^= 0x01;
  const decoded = decodeRecords(Buffer.concat(frames));
  assert.equal(decoded.tail, 'corrupt');
  assert.equal(decoded.corruptAt, at);
  assert.equal(decoded.validBytes, at);
  assert.equal(decoded.records.length, 1);
  // A damaged length field (here: huge) must not read as a torn tail either.
  const lengthHit = [1, 2, 3].map((idx) => Buffer.from(encodeRecord(record(idx))));
  lengthHit[1]![3] = 0x7f;
  assert.equal(decodeRecords(Buffer.concat(lengthHit)).tail, 'corrupt');
});

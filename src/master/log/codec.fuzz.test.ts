import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { isShoalError } from '../../common/errors.js';
import { anyJson, fuzzParams } from '../../../test/support/fuzz.js';
import { decodeRecords, encodeRecord } from './codec.js';
import { recoverLog } from './recovery.js';
import { segmentFile } from './segments.js';

/**
 * The log codec and the segment reader read whatever is on disk: random bytes, bit flips and cuts
 * either decode to a prefix of what was written, are a torn tail to cut, or are a typed LOG_CORRUPT.
 */

/**
 * msgpack's decoder refuses an own `__proto__` key, so such a record could be appended but not read
 * back; nothing reaches the log with one (HTTP bodies and peers' msgpack refuse it first), so the
 * records here have none.
 */
const noProtoKey = (value: unknown): boolean => !JSON.stringify(value).includes('"__proto__":');
const records = fc.array(fc.record({ term: fc.nat({ max: 5 }), body: anyJson.filter(noProtoKey) }), { minLength: 1, maxLength: 8 }).map((rs) => rs.map((r, i) => ({ idx: i + 1, term: r.term, body: r.body })));

function logOf(rs: readonly unknown[]): Buffer {
  return Buffer.concat(rs.map((r) => encodeRecord(r)));
}

/** Damage to a log: bit flips, a cut, or bytes overwritten, at random offsets. */
const damage = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }), bit: fc.nat({ max: 7 }) }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.array(fc.nat(), { minLength: 1, maxLength: 1 }), bit: fc.constant(0) }),
  fc.record({ kind: fc.constant('splat' as const), at: fc.array(fc.nat(), { minLength: 1, maxLength: 1 }), bit: fc.nat({ max: 255 }) }),
);

function damaged(log: Buffer, d: { kind: 'flip' | 'cut' | 'splat'; at: number[]; bit: number }): Buffer {
  const out = Buffer.from(log);
  if (d.kind === 'cut') return out.subarray(0, d.at[0]! % out.length);
  for (const at of d.at) {
    const pos = at % out.length;
    if (d.kind === 'flip') out[pos]! ^= 1 << d.bit;
    else out.fill(d.bit, pos, Math.min(out.length, pos + 16));
  }
  return out;
}

/** Offsets where each record's frame starts, and the log's end. */
function boundaries(rs: readonly unknown[]): number[] {
  const out = [0];
  for (const r of rs) out.push(out.at(-1)! + encodeRecord(r).length);
  return out;
}

test('random bytes decode to a valid prefix and a torn or corrupt tail, never an exception', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
      const decoded = decodeRecords(bytes);
      assert.ok(decoded.validBytes <= bytes.length);
      assert.equal(decoded.records.length, decoded.offsets.length);
      if (decoded.tail === 'clean') assert.equal(decoded.validBytes, bytes.length);
      else assert.equal(decoded.corruptAt, decoded.validBytes);
    }),
    fuzzParams(1000),
  );
});

test('a damaged log decodes to an intact prefix of what was written', () => {
  fc.assert(
    fc.property(records, damage, (rs, d) => {
      const log = logOf(rs);
      const bad = damaged(log, d);
      const decoded = decodeRecords(bad);
      const cuts = boundaries(rs);
      // CRC-32C catches every flip and splat of a frame: what decodes is exactly the untouched frames before the first damaged one.
      const firstChanged = bad.findIndex((byte, i) => byte !== log[i]);
      const firstBad = firstChanged === -1 ? bad.length : firstChanged;
      const intact = cuts.filter((end) => end <= Math.min(firstBad, bad.length)).length - 1;
      assert.deepEqual(decoded.records, rs.slice(0, intact));
      assert.equal(decoded.validBytes, cuts[intact]);
      if (d.kind === 'cut') assert.ok(decoded.tail === 'torn' || decoded.tail === 'clean', decoded.tail);
    }),
    fuzzParams(500),
  );
});

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const quiet = { warn: () => {}, info: () => {}, error: () => {} };

test('a log directory of damaged segments opens with its torn tail cut, or fails with LOG_CORRUPT', async () => {
  const base = await mkdtemp(join(tmpdir(), 'shoal-log-fuzz-'));
  dirs.push(base);
  let n = 0;
  await fc.assert(
    fc.asyncProperty(records, records, damage, fc.constantFrom('first', 'first-gzip', 'gzip-bytes', 'last'), async (first, second, d, where) => {
      const dir = join(base, String(n++));
      const later = second.map((r, i) => ({ ...r, idx: first.length + 1 + i }));
      const gzipFirst = where !== 'first';
      let a: Buffer = where === 'first' || where === 'first-gzip' ? damaged(logOf(first), d) : logOf(first);
      if (gzipFirst) a = gzipSync(a);
      if (where === 'gzip-bytes') a = damaged(a, d);
      const b = where === 'last' ? damaged(logOf(later), d) : logOf(later);
      await recoverLog(dir, quiet); // makes the directory and an empty first segment
      for (const name of await readdir(dir)) await rm(join(dir, name));
      await writeFile(join(dir, segmentFile({ firstIdx: 1, compressed: gzipFirst })), a);
      await writeFile(join(dir, segmentFile({ firstIdx: first.length + 1, compressed: false })), b);
      let recovered;
      try {
        recovered = await recoverLog(dir, quiet);
      } catch (error) {
        assert.ok(isShoalError(error) && error.code === 'LOG_CORRUPT', `not LOG_CORRUPT: ${String(error)}`);
        return;
      }
      await recovered.active.fh.close();
      // It opened: the first segment was whole, and the last kept a prefix of what was written to it.
      assert.ok(recovered.recovery.records >= first.length);
      assert.ok(recovered.recovery.records <= first.length + later.length);
      assert.ok((recovered.last as { idx: number } | null)?.idx === recovered.recovery.records);
      if (recovered.recovery.truncated !== null) assert.ok(recovered.recovery.truncated.offset % 1 === 0 && recovered.recovery.truncated.offset >= 0);
    }),
    fuzzParams(60),
  );
});

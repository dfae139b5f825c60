import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { anyJson, fuzzParams } from '../../test/support/fuzz.js';
import { RunnerTask, TaskEvent } from '../wire/task.js';
import { RouterError } from './errors.js';
import { decodeValue, encodeValue, FRAME_HEADER_BYTES, FrameDecoder, frameHeader } from './framing.js';

/**
 * The data-plane frame decoder takes bytes from any member: random, truncated, oversized or split at
 * any point, it returns whole frames or throws a typed `frame_too_large`, and never buffers past its
 * limit's header check.
 */

const MAX = 4096;

/** `bytes` cut into pieces at random offsets (the way a transport delivers them). */
const chunked = (bytes: Uint8Array) =>
  fc.array(fc.nat({ max: bytes.byteLength }), { maxLength: 8 }).map((cuts) => {
    const points = [...new Set([0, ...cuts, bytes.byteLength])].sort((a, b) => a - b);
    return points.slice(1).map((end, i) => bytes.subarray(points[i], end));
  });

function framed(payloads: Uint8Array[]): Uint8Array {
  return Buffer.concat(payloads.flatMap((p) => [frameHeader(p.byteLength), p]));
}

test('frames split anywhere come back whole and in order', () => {
  const arb = fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 6 }).chain((payloads) => fc.tuple(fc.constant(payloads), chunked(framed(payloads))));
  fc.assert(
    fc.property(arb, ([payloads, chunks]) => {
      const decoder = new FrameDecoder(MAX);
      const out = chunks.flatMap((c) => decoder.push(c));
      assert.deepEqual(out.map((f) => Buffer.from(f)), payloads.map((p) => Buffer.from(p)));
      assert.equal(decoder.pendingBytes, 0);
    }),
    fuzzParams(300),
  );
});

test('random bytes give frames, a typed frame_too_large, or a partial frame held; nothing else', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 2000 }).chain((bytes) => fc.tuple(fc.constant(bytes), chunked(bytes))), ([bytes, chunks]) => {
      const decoder = new FrameDecoder(MAX);
      let returned = 0;
      try {
        for (const chunk of chunks) for (const frame of decoder.push(chunk)) returned += FRAME_HEADER_BYTES + frame.byteLength;
      } catch (error) {
        assert.ok(error instanceof RouterError, `not a RouterError: ${String(error)}`);
        assert.equal(error.reason, 'frame_too_large');
        return;
      }
      assert.equal(returned + decoder.pendingBytes, bytes.byteLength, 'every byte is either in a frame or still pending');
    }),
    fuzzParams(500),
  );
});

test('a header over the limit is refused when it arrives, before its body', () => {
  fc.assert(
    fc.property(fc.integer({ min: MAX + 1, max: 0xffffffff }), fc.nat({ max: 3 }), (length, split) => {
      const decoder = new FrameDecoder(MAX);
      const header = frameHeader(length);
      assert.deepEqual(decoder.push(header.subarray(0, split)), []);
      assert.throws(() => decoder.push(header.subarray(split)), (error: unknown) => error instanceof RouterError && error.reason === 'frame_too_large');
    }),
    fuzzParams(200),
  );
});

test('decoded frames that fail to decode or to match a schema fail as values, not crashes', () => {
  // What parseFrame does with each frame: msgpack, then the protocol's schema.
  const frame = fc.oneof(
    fc.uint8Array({ maxLength: 200 }),
    anyJson.map((value) => encodeValue(value)),
    anyJson.map((value) => {
      const bytes = encodeValue(value);
      return bytes.subarray(0, Math.max(0, bytes.byteLength - 1));
    }),
  );
  fc.assert(
    fc.property(frame, (bytes) => {
      let value: unknown;
      try {
        value = decodeValue(bytes);
      } catch (error) {
        // msgpack's own errors: parseFrame wraps any of them as a protocol_error.
        assert.ok(error instanceof Error, String(error));
        return;
      }
      for (const schema of [RunnerTask, TaskEvent]) {
        const parsed = schema.safeParse(value);
        if (parsed.success) assert.deepEqual(schema.parse(decodeValue(encodeValue(parsed.data))), parsed.data);
      }
    }),
    fuzzParams(500),
  );
});

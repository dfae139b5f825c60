import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { anyJson, fuzzParams, mutated } from '../../test/support/fuzz.js';
import { decodeValue, encodeValue } from '../router/framing.js';
import { ResourcesMessage, RunnersMessage } from '../wire/telemetry.js';
import { jsonBytes, MESSAGE_SCHEMA, PLANE_OF_MESSAGE, type Plane } from '../master/core/messages.js';

/**
 * Every plane's messages arrive from other members as msgpack: whatever the bytes say, the plane's
 * schema accepts a value or refuses it, and what it accepts survives a round trip and can be measured.
 */

const TYPES = Object.keys(PLANE_OF_MESSAGE) as Array<keyof typeof PLANE_OF_MESSAGE>;
/** The field names the schemas use, so generated objects get past the discriminator and the key checks. */
const KEYS = ['clusterId', 'term', 'masterId', 'records', 'to', 'origin', 'reproposal', 'commandId', 'result', 'lastTerm', 'lastIdx', 'lastHash', 'terms', 'nodeId', 'at', 'idx', 'from', 'limit', 'gpus', 'runners', 'artifacts', 'downloads'];
const plausible = fc.oneof(
  anyJson,
  fc.nat(),
  fc.integer(),
  fc.double(),
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 32, maxLength: 64 }),
  fc.constantFrom('12D3KooWGRUVh8Kd3y7L3KxZu4w1JQJk9YqLq6F7W9pWfmq6k5qZ', '', 'x'.repeat(70_000)),
  fc.array(anyJson, { maxLength: 5 }),
);
const messageLike = fc.record({
  type: fc.constantFrom(...TYPES),
  fields: fc.dictionary(fc.constantFrom(...KEYS), plausible, { maxKeys: 10 }),
}).map(({ type, fields }) => ({ ...fields, type }));

const CLUSTER = '00112233445566778899aabbccddeeff';
const NODE = '12D3KooWGRUVh8Kd3y7L3KxZu4w1JQJk9YqLq6F7W9pWfmq6k5qZ';
/** Valid messages, mutated so that some stay valid and the rest fail a field deep inside. */
const SEEDS = [
  { type: 'election', clusterId: CLUSTER, term: 3, lastTerm: 2, lastIdx: 40 },
  { type: 'alive', clusterId: CLUSTER, term: 3, to: NODE },
  { type: 'status-request', clusterId: CLUSTER, term: 3 },
];
const input = fc.oneof(anyJson, messageLike, ...SEEDS.map((seed) => mutated(seed)), fc.constantFrom(...SEEDS));

test("each plane's schema accepts or refuses any value, and what it accepts round-trips", () => {
  for (const seed of SEEDS) assert.ok(MESSAGE_SCHEMA.control.safeParse(seed).success, seed.type);
  fc.assert(
    fc.property(input, (value) => {
      for (const plane of ['control', 'telemetry', 'sync'] as Plane[]) {
        const parsed = MESSAGE_SCHEMA[plane].safeParse(value);
        if (!parsed.success) continue;
        assert.equal(PLANE_OF_MESSAGE[parsed.data.type], plane);
        assert.ok(jsonBytes(parsed.data) > 0);
        // Compared as JSON: -0 is accepted as 0 and written as 0, which is the same message.
        assert.equal(JSON.stringify(MESSAGE_SCHEMA[plane].parse(decodeValue(encodeValue(parsed.data)))), JSON.stringify(parsed.data));
      }
      for (const schema of [ResourcesMessage, RunnersMessage]) schema.safeParse(value);
    }),
    fuzzParams(1000),
  );
});

test('random msgpack bytes decode to a value or a decode error, never a hang', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => {
      let value: unknown;
      try {
        value = decodeValue(bytes);
      } catch (error) {
        assert.ok(error instanceof Error, String(error));
        return;
      }
      for (const plane of ['control', 'telemetry', 'sync'] as Plane[]) MESSAGE_SCHEMA[plane].safeParse(value);
    }),
    fuzzParams(1000),
  );
});

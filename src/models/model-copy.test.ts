import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encode } from '@msgpack/msgpack';
import { MAX_TELEMETRY_MESSAGE_BYTES, TelemetryMessage, jsonBytes } from '../master/core/messages.js';
import { ArtifactsMessage, MAX_REPORTED_ARTIFACTS, type ArtifactReport } from '../wire/telemetry.js';
import { artifactsOf, CopyFrame, CopyRequest, DeleteAnswer, MODEL_COPY_MAX_FILES, MODEL_COPY_MAX_MESSAGE_BYTES, ModelFrame, pickHolders, ReadRequest, sameCopy, type HeardArtifacts } from './model-copy.js';

const REV_A = 'a'.repeat(40);
const REV_B = 'b'.repeat(40);
const NODE = (n: number): string => `12D3KooW${String(n).padStart(44, 'x').replace(/0/g, 'z')}`;

test('the largest artifacts report the schema allows stays under the telemetry byte limit', () => {
  const models = Array.from({ length: MAX_REPORTED_ARTIFACTS }, (_, i) => ({
    modelId: `${String(i).padStart(2, 'z')}/${'m'.repeat(194)}:Q${i % 10}` as ArtifactReport['modelId'],
    revision: 'f'.repeat(40),
    bytes: Number.MAX_SAFE_INTEGER,
  }));
  assert.ok(models.every((m) => m.modelId.length === 200));
  const message = { type: 'artifacts', clusterId: 'c'.repeat(32), nodeId: NODE(1), seq: Number.MAX_SAFE_INTEGER, models };
  const parsed = TelemetryMessage.parse(message);
  assert.equal(parsed.type, 'artifacts');
  const json = jsonBytes(message);
  assert.ok(json < MAX_TELEMETRY_MESSAGE_BYTES, `${json} bytes of JSON`);
  assert.ok(encode(message).byteLength <= json, 'msgpack is never larger');
  assert.throws(() => ArtifactsMessage.parse({ ...message, models: [...models, models[0]] }), 'one more entry is refused');
});

test('artifactsOf reports the most recently used copies first, at most the cap, wire-valid ones only', () => {
  const many = Array.from({ length: MAX_REPORTED_ARTIFACTS + 3 }, (_, i) => ({ modelId: `o/m${i}:Q4_K_M`, revision: REV_A, bytes: 100 + i, lastUsedMs: i }));
  const report = artifactsOf([...many, { modelId: 'bad id with spaces', revision: REV_A, bytes: 1, lastUsedMs: 1e9 }, { modelId: 'o/short-rev', revision: 'abc', bytes: 1, lastUsedMs: 1e9 }]);
  assert.equal(report.length, MAX_REPORTED_ARTIFACTS);
  assert.deepEqual(report[0], { modelId: `o/m${MAX_REPORTED_ARTIFACTS + 2}:Q4_K_M`, revision: REV_A, bytes: 100 + MAX_REPORTED_ARTIFACTS + 2 });
  assert.ok(report.every((r, i) => i === 0 || (report[i - 1] as ArtifactReport).bytes > r.bytes), 'newest first');
  assert.deepEqual(artifactsOf([]), []);
});

test('pickHolders: connected active members with a fresh report listing the model, freshest first', () => {
  const heard = new Map<string, HeardArtifacts>([
    [NODE(1), { models: [{ modelId: 'o/m:Q4' as ArtifactReport['modelId'], revision: REV_A, bytes: 10 }], atMs: 1000 }],
    [NODE(2), { models: [{ modelId: 'o/m:Q4' as ArtifactReport['modelId'], revision: REV_A, bytes: 10 }], atMs: 5000 }],
    [NODE(3), { models: [{ modelId: 'o/m:Q4' as ArtifactReport['modelId'], revision: REV_B, bytes: 11 }], atMs: 5000 }],
    [NODE(4), { models: [{ modelId: 'o/m:Q4' as ArtifactReport['modelId'], revision: REV_A, bytes: 10 }], atMs: 5000 }],
    [NODE(5), { models: [{ modelId: 'o/other' as ArtifactReport['modelId'], revision: REV_A, bytes: 10 }], atMs: 5000 }],
    [NODE(6), { models: [{ modelId: 'o/m:Q4' as ArtifactReport['modelId'], revision: REV_A, bytes: 10 }], atMs: 5000 }],
  ]);
  const ctx = { self: NODE(6), nowMs: 6000, staleMs: 5000, usable: (id: string) => id !== NODE(4) };
  assert.deepEqual(
    pickHolders(heard, { modelId: 'o/m:Q4', revision: REV_A }, ctx).map((h) => [h.nodeId, h.revision, h.ageMs]),
    [
      [NODE(2), REV_A, 1000],
      [NODE(1), REV_A, 5000],
    ],
  );
  assert.deepEqual(pickHolders(heard, { modelId: 'o/m:Q4', revision: null }, { ...ctx, staleMs: 2000 }).map((h) => h.nodeId), [NODE(2), NODE(3)], 'any revision; the stale report left out');
  assert.deepEqual(pickHolders(heard, { modelId: 'o/none', revision: null }, ctx), []);
});

test('sameCopy names what differs', () => {
  const record = { repo: 'o/r', revision: REV_A, primaryPath: 'm-Q4.gguf', files: [{ path: 'm-Q4.gguf' }] };
  assert.equal(sameCopy(record, { repo: 'o/r', revision: REV_A, file: 'm-Q4.gguf' }), null);
  assert.equal(sameCopy(record, { repo: 'o/r', revision: REV_A, file: null }), null);
  assert.match(sameCopy(record, { repo: 'o/r', revision: REV_B, file: 'm-Q4.gguf' }) ?? '', /holds o\/r@aaaaaaaaaaaa, not o\/r@bbbbbbbbbbbb/);
  assert.match(sameCopy(record, { repo: 'o/r', revision: REV_A, file: 'm-Q8.gguf' }) ?? '', /loads m-Q4\.gguf, not m-Q8\.gguf/);
  // A vision card wants the projector with the model: a copy of the model alone is not it.
  assert.match(sameCopy(record, { repo: 'o/r', revision: REV_A, file: 'm-Q4.gguf', projector: 'mmproj-f16.gguf' }) ?? '', /has no projector mmproj-f16\.gguf/);
  assert.equal(sameCopy({ ...record, files: [...record.files, { path: 'mmproj-f16.gguf' }] }, { repo: 'o/r', revision: REV_A, file: 'm-Q4.gguf', projector: 'mmproj-f16.gguf' }), null);
});

test('copy requests and frames are strict', () => {
  assert.equal(CopyRequest.parse({ type: 'read', repo: 'o/r', revision: REV_A, path: 'a/b.gguf', offset: 5 }).type, 'read');
  assert.throws(() => CopyRequest.parse({ type: 'read', repo: 'o/r', revision: REV_A, path: 'a.gguf', offset: -1 }));
  assert.throws(() => CopyRequest.parse({ type: 'read', repo: 'o/r', revision: 'main', path: 'a.gguf', offset: 0 }), 'a commit, not a branch');
  assert.throws(() => CopyRequest.parse({ type: 'read', repo: 'o/r', revision: REV_A, path: 'a.gguf', offset: 0, extra: 1 }));
  assert.throws(() => CopyRequest.parse({ type: 'describe', modelId: '/etc/passwd' }));
  assert.throws(() => CopyRequest.parse({ type: 'describe', modelId: 'a b' }));
  assert.ok(CopyFrame.parse(new Uint8Array(3)) instanceof Uint8Array);
  assert.throws(() => CopyFrame.parse({ type: 'file', size: 1, sha256: 'nothex', gitOid: null }));
  assert.equal(DeleteAnswer.parse({ outcome: 'refused', freedBytes: 0, removedFiles: false, cardFile: null, error: { code: 'BAD_REQUEST', reason: 'MODEL_IN_USE', message: 'loaded' } }).outcome, 'refused');
});

test('a describe answer with the most files allowed fits in one frame', () => {
  const files = Array.from({ length: MODEL_COPY_MAX_FILES }, (_, i) => ({ path: `${'d'.repeat(900)}/shard-${String(i).padStart(5, '0')}-of-00128.gguf`, size: Number.MAX_SAFE_INTEGER, sha256: 'e'.repeat(64), gitOid: 'f'.repeat(40) }));
  const frame = ModelFrame.parse({ type: 'model', model: { modelId: 'o/m:Q4', repo: 'o/r', revision: REV_A, group: files[0]!.path, primaryPath: files[0]!.path, files, bytes: 1 } });
  assert.ok(encode(frame).byteLength <= MODEL_COPY_MAX_MESSAGE_BYTES, `${encode(frame).byteLength} bytes`);
  assert.throws(() => ModelFrame.parse({ ...frame, model: { ...frame.model, files: [...files, files[0]] } }));
});

test('a read may ask for a direct socket at an IP; offers, declines and answers are copy frames', () => {
  const read = { type: 'read', repo: 'o/r', revision: REV_A, path: 'a.gguf', offset: 0 };
  assert.equal(ReadRequest.parse({ ...read, direct: '127.0.0.1' }).direct, '127.0.0.1');
  assert.equal(ReadRequest.parse({ ...read, direct: 'fe80::1' }).direct, 'fe80::1');
  assert.equal(ReadRequest.parse(read).direct, undefined, 'a copier that does not ask');
  for (const direct of ['node-a.local', '127.0.0.1:9000', '']) assert.throws(() => ReadRequest.parse({ ...read, direct }), direct);
  assert.deepEqual(CopyRequest.parse({ type: 'direct-answer', connected: true }), { type: 'direct-answer', connected: true });
  assert.throws(() => CopyRequest.parse({ type: 'direct-answer', connected: 'yes' }));

  const offer = { type: 'direct-offer', port: 40_000, identity: 'ab'.repeat(16), key: new Uint8Array(32) };
  const parsed = CopyFrame.parse(offer);
  assert.ok(!(parsed instanceof Uint8Array) && parsed.type === 'direct-offer');
  assert.ok(encode(offer).byteLength < MODEL_COPY_MAX_MESSAGE_BYTES);
  assert.throws(() => CopyFrame.parse({ ...offer, key: new Uint8Array(16) }), 'a 32-byte key only');
  assert.throws(() => CopyFrame.parse({ ...offer, port: 0 }));
  assert.deepEqual(CopyFrame.parse({ type: 'direct-decline' }), { type: 'direct-decline' });
  assert.throws(() => CopyFrame.parse({ type: 'direct-answer', connected: true }), 'an answer goes the other way');
});

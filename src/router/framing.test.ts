import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { z } from 'zod';
import { RouterError } from './errors.js';
import { FrameDecoder, createChannelPair, decodeValue, encodeValue, frameHeader } from './framing.js';
import { fingerprintOfPeer, fingerprintOfPublicKey } from './hello.js';
import { TelemetryQueue } from './topics.js';

function framed(value: unknown): Uint8Array {
  const payload = encodeValue(value);
  const out = new Uint8Array(4 + payload.byteLength);
  out.set(frameHeader(payload.byteLength), 0);
  out.set(payload, 4);
  return out;
}

test('frames split across arbitrary chunk boundaries come out whole and in order', () => {
  const values = [{ a: 1 }, 'two', [3, 3, 3], { big: 'x'.repeat(5000) }, null];
  const bytes = Buffer.concat(values.map(framed));
  for (const chunkSize of [1, 3, 4, 7, 1000, bytes.byteLength]) {
    const decoder = new FrameDecoder(1024 * 1024);
    const out: unknown[] = [];
    for (let at = 0; at < bytes.byteLength; at += chunkSize) {
      for (const frame of decoder.push(bytes.subarray(at, at + chunkSize))) out.push(decodeValue(frame));
    }
    assert.deepEqual(out, values, `chunk size ${chunkSize}`);
    assert.equal(decoder.pendingBytes, 0);
  }
});

test('a frame over the limit is refused on its header, before the body arrives', () => {
  const decoder = new FrameDecoder(100);
  assert.throws(
    () => decoder.push(frameHeader(101)),
    (error: unknown) => error instanceof RouterError && error.reason === 'frame_too_large' && error.code === 'PAYLOAD_TOO_LARGE',
  );
});

test('undefined fields are left out rather than sent as nil', () => {
  assert.deepEqual(decodeValue(encodeValue({ a: 1, b: undefined })), { a: 1 });
});

test('in-process channel pair: frames both ways, end of stream, schema refusal', async () => {
  const schemaB = z.strictObject({ n: z.number() });
  const [a, b] = createChannelPair<unknown, { n: number }>('self', '/t/1', { schemaB });
  await a.send({ n: 1 });
  await a.send({ n: 2 });
  await a.close();
  const seen: number[] = [];
  for await (const frame of b) seen.push(frame.n);
  assert.deepEqual(seen, [1, 2]);
  await b.send('reply');
  assert.equal(await a.next(), 'reply');

  const [c, d] = createChannelPair<unknown, { n: number }>('self', '/t/1', { schemaB });
  await c.send({ n: 'nope' });
  await assert.rejects(d.next(), (error: unknown) => error instanceof RouterError && error.reason === 'protocol_error');
});

test('fingerprint: 16 Crockford base32 characters in four groups, stable for a key', async () => {
  const key = await generateKeyPair('Ed25519');
  const peer = peerIdFromPrivateKey(key);
  const fp = fingerprintOfPeer(peer);
  assert.match(fp ?? '', /^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$/);
  assert.equal(fp, fingerprintOfPeer(peer.toString()));
  assert.equal(fp, fingerprintOfPublicKey(key.publicKey.raw));
  // Known vector: all-zero key. sha256(32 zero bytes) starts 66687aadf862bd776c8f; those 10 bytes in Crockford base32 (computed independently).
  assert.equal(fingerprintOfPublicKey(new Uint8Array(32)), 'CSM7-NBFR-CAYQ-EV4F');
});

test('telemetry queue: last write wins per key, bounded, drained one per macrotask', async () => {
  const sent: string[] = [];
  const queue = new TelemetryQueue(3, (_topic, bytes) => {
    sent.push(String(decodeValue(bytes)));
    return Promise.resolve();
  });
  queue.enqueue('k1', 't', encodeValue('k1-a'));
  queue.enqueue('k1', 't', encodeValue('k1-b'));
  queue.enqueue('k2', 't', encodeValue('k2'));
  queue.enqueue('k3', 't', encodeValue('k3'));
  queue.enqueue('k4', 't', encodeValue('k4')); // evicts k1, the oldest
  assert.deepEqual(sent, [], 'nothing is sent synchronously');
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(sent.length <= 1, 'at most one per macrotask');
  for (let i = 0; i < 20 && queue.stats().queued > 0; i++) await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(sent, ['k2', 'k3', 'k4']);
  assert.deepEqual(queue.stats(), { queued: 0, sent: 3, replaced: 1, dropped_overflow: 1, failed: 0 });
});

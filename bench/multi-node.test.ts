import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiFor, burstTokPerS, decodeRate, mirrorDriverArgs, readChunk, splitSse, ttftOverhead, type Sample } from './multi-node.js';

const sample = (ttftMs: number, tokens = 10, endedAt = 0): Sample => ({ ttftMs, decodeTokPerS: 1, tokens, totalMs: ttftMs + 100, endedAt });

describe('multi-node benchmark: pure parts', () => {
  it('splits server-sent events, joining data lines and keeping an unfinished event for the next read', () => {
    const { events, rest } = splitSse('data: {"a":1}\n\n: comment\n\ndata: {"b":\r\ndata: 2}\r\n\r\ndata: {"c"');
    assert.deepEqual(events, ['{"a":1}', '{"b":\n2}']);
    assert.equal(rest, 'data: {"c"');
    assert.deepEqual(splitSse(`${rest}:3}\n\n`).events, ['{"c":3}']);
  });

  it("reads Shoal's OpenAI chunks: text, the usage count, the end marker", () => {
    assert.deepEqual(readChunk('{"choices":[{"text":"hi"}]}', 'openai'), { content: true, tokens: null, done: false });
    assert.deepEqual(readChunk('{"choices":[{"text":""}],"usage":{"completion_tokens":48}}', 'openai'), { content: false, tokens: 48, done: false });
    assert.deepEqual(readChunk('[DONE]', 'openai'), { content: false, tokens: null, done: true });
  });

  it("reads llama-server's /completion chunks: content, and the count only on the final one", () => {
    assert.deepEqual(readChunk('{"content":"x","stop":false,"tokens_predicted":3}', 'llama'), { content: true, tokens: null, done: false });
    assert.deepEqual(readChunk('{"content":"","stop":true,"tokens_predicted":48}', 'llama'), { content: false, tokens: 48, done: true });
  });

  it('an error event throws with what the server said', () => {
    assert.throws(() => readChunk('{"error":{"code":"MODEL_FAILED","message":"gone"}}', 'openai'), /MODEL_FAILED/);
  });

  it('decode rate counts the tokens after the first over the time after the first', () => {
    assert.equal(decodeRate(11, 1000, 1500), 20);
    assert.ok(Number.isNaN(decodeRate(1, 1000, 1500)));
    assert.ok(Number.isNaN(decodeRate(5, 1000, 1000)));
  });

  it("mirrors the driver's arguments with only the port and the RPC servers replaced", () => {
    const driver = ['-m', '/m.gguf', '--port', '1111', '-t', '1', '-ngl', '999', '--rpc', '127.0.0.1:2,127.0.0.1:3', '--tensor-split', '7,4'];
    assert.deepEqual(mirrorDriverArgs(driver, { port: 9, rpcServers: ['127.0.0.1:5', '127.0.0.1:6'] }), [
      '-m', '/m.gguf', '--port', '9', '-t', '1', '-ngl', '999', '--rpc', '127.0.0.1:5,127.0.0.1:6', '--tensor-split', '7,4',
    ]);
    assert.deepEqual(driver[3], '1111', 'the input is left as it was');
    assert.throws(() => mirrorDriverArgs(['-m', 'x', '--port', '1'], { port: 2, rpcServers: [] }), /--rpc/);
  });

  it('TTFT overhead per hop: difference of medians and the paired per-repetition differences', () => {
    const local = [sample(50), sample(60), sample(70)];
    const remote = [sample(80), sample(70), sample(110)];
    const one = ttftOverhead(remote, local, 1);
    assert.equal(one.perHopMs, 20);
    assert.deepEqual(one.pairedPerHopMs.samples, [30, 10, 40]);
    assert.equal(one.pairedPerHopMs.median, 30);
    assert.equal(ttftOverhead(remote, local, 2).perHopMs, 10);
  });

  it('aggregate burst rate is all tokens over burst start to the last stream end', () => {
    assert.equal(burstTokPerS([sample(1, 10, 1500), sample(1, 30, 2000)], 1000), 40);
    assert.ok(Number.isNaN(burstTokPerS([], 0)));
  });

  it('spreads clients evenly over the APIs and rotates the split each repetition', () => {
    assert.deepEqual([0, 1, 2, 3].map((c) => apiFor(c, 0, 2)), [0, 1, 0, 1]);
    assert.deepEqual([0].map((c) => apiFor(c, 1, 2)), [1]);
  });
});

// A request that queues behind another on a one-slot node: streaming clients see their place as SSE
// comments (`: queued position=N`) and the X-Shoal-Queue-Position header, and the official SDKs,
// which skip SSE comments, stream the answer as usual; Ollama's NDJSON stays pure JSON lines.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { findEngine } from '../../src/doctor/engines.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

const MODEL = 'shoal/tiny';
const HEADER = 'x-shoal-queue-position';

let node: TestNode;
const llamaServer = await findEngine('llama-server');

/** Reads a streamed body as text until `until` holds for what arrived so far, or it ends. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, until: (text: string) => boolean, sofar = ''): Promise<string> {
  const decoder = new TextDecoder();
  let text = sofar;
  while (!until(text)) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

function chatStream(maxTokens: number | null, signal?: AbortSignal): Promise<Response> {
  return fetch(`${node.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Tell a story' }], stream: true, ...(maxTokens === null ? {} : { max_tokens: maxTokens }) }),
    ...(signal ? { signal } : {}),
  });
}

for (const engine of ['llama_cpp', 'llama_server'] as const) {
  const skip = engine === 'llama_server' && llamaServer === null ? 'llama-server is not built: run `shoal doctor --fix`' : false;
  describe(`queue positions on a real one-slot node (${engine})`, { skip }, () => {
    before(async () => {
      node = await startTestNode({ args: ['--parallel', '1', '--engine', engine] });
    });

    after(async () => {
      await node?.stop();
    });

    test('streams queued behind a running one hear their place, then stream their answers; the SDKs do not notice', async () => {
      // The first request holds the only slot, generating until it is cancelled.
      const first = new AbortController();
      const running = await chatStream(null, first.signal);
      assert.equal(running.status, 200);
      assert.equal(running.headers.get(HEADER), '0', 'admitted at once');
      const runningReader = running.body!.getReader();
      await readUntil(runningReader, (text) => text.includes('data: '));

      const raw = await chatStream(4);
      assert.equal(raw.status, 200);
      assert.equal(raw.headers.get(HEADER), '1', 'the headers went out while it queued, with its place');
      const rawReader = raw.body!.getReader();
      let rawText = await readUntil(rawReader, (text) => text.includes(': queued position=1\n\n'));
      assert.match(rawText, /^: queued position=1\n\n/);

      const openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
      const sdk = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, stream: true }).withResponse();
      assert.equal(sdk.response.headers.get(HEADER), '2');

      const anthropic = new Anthropic({ baseURL: node.url, apiKey: 'not-needed', maxRetries: 0 });
      const claude = await anthropic.messages.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, stream: true }).withResponse();
      assert.equal(claude.response.headers.get(HEADER), '3');

      // Ollama's NDJSON gets no queue lines: its clients parse every line as JSON.
      const ollama = await fetch(`${node.url}/api/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: 'Hi', stream: true, options: { num_predict: 4 } }),
      });

      first.abort();
      await runningReader.cancel().catch(() => undefined);

      rawText = await readUntil(rawReader, () => false, rawText);
      const data = rawText.split('\n\n').filter((frame) => frame.startsWith('data: '));
      assert.equal(data.at(-1), 'data: [DONE]');
      assert.ok(data.length >= 3, `the queued stream answered after its comment: ${rawText}`);

      let chunks = 0;
      let finish: string | null = null;
      for await (const chunk of sdk.data) {
        chunks += 1;
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      assert.ok(chunks > 0);
      assert.equal(finish, 'length');

      const types: string[] = [];
      for await (const event of claude.data) types.push(event.type);
      assert.equal(types[0], 'message_start');
      assert.equal(types.at(-1), 'message_stop');

      assert.equal(ollama.status, 200);
      const lines = (await ollama.text()).split('\n').filter((line) => line !== '');
      const objects = lines.map((line) => JSON.parse(line) as { done?: boolean });
      assert.equal(objects.at(-1)?.done, true);
    });

    test('a non-streamed answer carries the place it waited at; one served at once says 0', async () => {
      const answered = await fetch(`${node.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }),
      });
      assert.equal(answered.status, 200);
      assert.equal(answered.headers.get(HEADER), '0');
      await answered.json();

      const first = new AbortController();
      const running = await chatStream(null, first.signal);
      const runningReader = running.body!.getReader();
      await readUntil(runningReader, (text) => text.includes('data: '));
      const queued = fetch(`${node.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }),
      });
      // The queued request must be waiting before the slot frees: /state counts it.
      await waitForQueued(1);
      first.abort();
      await runningReader.cancel().catch(() => undefined);
      const response = await queued;
      assert.equal(response.status, 200);
      assert.equal(response.headers.get(HEADER), '1');
      await response.json();
    });

    test('a stream queued with a prompt too long for the context', async () => {
      const first = new AbortController();
      const running = await chatStream(null, first.signal);
      const runningReader = running.body!.getReader();
      await readUntil(runningReader, (text) => text.includes('data: '));
      const tooLong = fetch(`${node.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'story '.repeat(20_000) }], max_tokens: 4, stream: true }),
      });
      if (engine === 'llama_server') {
        // llama-server sizes a prompt before it queues: still a plain 400.
        const refused = await tooLong;
        first.abort();
        await runningReader.cancel().catch(() => undefined);
        assert.equal(refused.status, 400);
        assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'context_length_exceeded');
        return;
      }
      // node-llama-cpp checks it once admitted: the stream had started, so the error is its last event.
      const response = await tooLong;
      assert.equal(response.status, 200);
      assert.equal(response.headers.get(HEADER), '1');
      first.abort();
      await runningReader.cancel().catch(() => undefined);
      const frames = (await response.text()).split('\n\n').filter((frame) => frame !== '');
      assert.equal(frames[0], ': queued position=1');
      const last = frames.at(-1)!;
      assert.ok(last.startsWith('data: '), last);
      assert.equal((JSON.parse(last.slice('data: '.length)) as { error?: { code?: string } }).error?.code, 'context_length_exceeded');
    });
  });
}

async function waitForQueued(count: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const text = await (await fetch(`${node.url}/metrics`)).text();
    const match = /^shoal_requests_waiting(?:\{[^}]*\})? (\d+)/m.exec(text);
    if (match && Number(match[1]) >= count) return;
    assert.ok(Date.now() < deadline, `no request was counted waiting within 30 s:\n${text.slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

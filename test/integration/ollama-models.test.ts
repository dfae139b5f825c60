// Ollama's model management through its official client on a real node whose hub is a local one:
// `/api/pull` with the progress objects Ollama clients read, `/api/ps` with what placement reserved,
// chat with the options clients send, `/api/delete`, and the errors of unknown models.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ollama, type ProgressResponse } from 'ollama';
import type { ModelListView } from '../../src/models/views.js';
import { eventually } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

const REPO = 'shoal-test/Tiny-GGUF';
const Q4 = 'Tiny-Q4_K_M.gguf';
const Q4_ID = `${REPO}:Q4_K_M`;
const Q8 = 'Tiny-Q8_0.gguf';

/** What LangChain, Continue and Open WebUI send besides the sampling Shoal honours. */
const CLIENT_OPTIONS = {
  num_ctx: 8192,
  typical_p: 1,
  mirostat: 0,
  mirostat_tau: 5,
  mirostat_eta: 0.1,
  penalize_newline: true,
  num_keep: 4,
  num_batch: 512,
  num_gpu: -1,
  main_gpu: 0,
  use_mmap: true,
  num_thread: 2,
};

interface ResponseError extends Error {
  status_code: number;
  error: string;
}

async function expectStatus(promise: Promise<unknown>, status: number, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    const e = error as ResponseError;
    assert.equal(e.status_code, status, `expected ${status}, got ${String(error)}`);
    assert.match(e.error, message);
    return true;
  });
}

async function control<T>(node: TestNode, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${node.url}${path}`, {
    method,
    headers: { 'x-shoal-client': 'test', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as T };
}

describe('Ollama model management on a real node and a local hub', () => {
  let dir: string;
  let hub: HubServer;
  let node: TestNode;
  let ollama: Ollama;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-ollama-models-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 21, vocabSize: 1024 });
    const q8 = await ggufFixture(join(dir, 'q8.gguf'), { seed: 22, vocabSize: 1024 });
    hub = await HubServer.start([
      {
        repo: REPO,
        files: [
          { path: Q4, filePath: q4 },
          { path: Q8, filePath: q8 },
        ],
      },
    ]);
    node = await startTestNode({ env: { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) } });
    ollama = new Ollama({ host: node.url });
  });

  after(async () => {
    await node?.stop();
    await hub?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('pull streams Ollama’s progress objects to success; the model is then on disk', async () => {
    const file = hub.file(REPO, Q4);
    // Slow enough that the progress is seen mid-file.
    hub.throttle(Math.ceil(file.size / 2));
    const events: ProgressResponse[] = [];
    try {
      for await (const event of await ollama.pull({ model: `hf.co/${REPO}:Q4_K_M`, stream: true })) events.push(event);
    } finally {
      hub.throttle(null);
    }
    const statuses = events.map((e) => e.status);
    assert.equal(statuses[0], 'pulling manifest');
    assert.deepEqual(statuses.slice(-3), ['verifying sha256 digest', 'writing manifest', 'success']);
    const progress = events.filter((e) => e.status.startsWith('pulling ') && e.digest);
    assert.ok(progress.length >= 2, `progress lines: ${JSON.stringify(events)}`);
    const digest = progress[0]!.digest;
    assert.match(digest, /^sha256:[0-9a-f]{64}$/);
    for (const [i, line] of progress.entries()) {
      assert.equal(line.digest, digest, 'one file');
      assert.equal(line.status, `pulling ${digest.slice(7, 19)}`);
      assert.equal(line.total, file.size);
      if (i > 0) assert.ok(line.completed >= progress[i - 1]!.completed, 'completed never goes back');
    }
    assert.ok(progress.some((l) => l.completed > 0 && l.completed < l.total), 'a line mid-file');
    assert.equal(progress.at(-1)!.completed, file.size);

    const listed = await control<ModelListView>(node, 'GET', '/models');
    assert.equal(listed.body.models.find((m) => m.id === Q4_ID)?.state, 'on-disk');
    // Pulling it again (by its card id, not streamed) is one success object.
    assert.deepEqual(await ollama.pull({ model: Q4_ID }), { status: 'success' });
    // A built-in model has nothing to download: it is there.
    assert.deepEqual(await ollama.pull({ model: 'shoal/tiny:latest' }), { status: 'success' });
  });

  test('placed, it is in ps with what placement reserved; chat takes the options clients send; delete removes it', async () => {
    const placed = await control<{ instance: { instanceId: string; placements: { backend: string; estimatedBytes: number }[] } }>(node, 'POST', '/place_instance', { model: Q4_ID });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const { instanceId, placements } = placed.body.instance;
    const running = await eventually(`${Q4_ID} in /api/ps`, 60_000, async () => (await ollama.ps()).models.find((m) => m.name === Q4_ID));
    assert.equal(running.model, Q4_ID);
    assert.equal(running.size, placements[0]!.estimatedBytes);
    assert.ok(running.size > hub.file(REPO, Q4).size, 'weights, KV cache and overhead');
    assert.ok(placements[0]!.backend.endsWith('-cpu'));
    assert.equal(running.size_vram, 0, 'on CPU');
    assert.ok(Date.parse(String(running.expires_at)) > Date.now() + 20 * 365 * 24 * 3600 * 1000, 'never expires (Ollama shows "Forever")');
    assert.equal(running.details.format, 'gguf');

    const messages = [{ role: 'user', content: 'Tell me about the sea.' }];
    const plain = await ollama.chat({ model: Q4_ID, messages, options: { temperature: 0, num_predict: 8 } });
    const withOptions = await ollama.chat({ model: Q4_ID, messages, options: { temperature: 0, num_predict: 8, ...CLIENT_OPTIONS } });
    assert.equal(withOptions.eval_count, 8);
    assert.equal(withOptions.message.content, plain.message.content, 'accepted options without effect change nothing');
    const generated = await ollama.generate({ model: Q4_ID, prompt: 'The sea', options: { num_predict: 4, ...CLIENT_OPTIONS } });
    assert.equal(generated.eval_count, 4);

    await expectStatus(ollama.delete({ model: Q4_ID }), 409, /loaded on this node/);
    const ended = await control<unknown>(node, 'DELETE', `/instance/${instanceId}`);
    assert.equal(ended.status, 200);
    await eventually('the instance gone from /api/ps', 30_000, async () => ((await ollama.ps()).models.some((m) => m.name === Q4_ID) ? undefined : true));
    // The runner lets go of the file shortly after the instance ends.
    await eventually(`${Q4_ID} deleted`, 30_000, async () => {
      try {
        return await ollama.delete({ model: Q4_ID });
      } catch (error) {
        if ((error as ResponseError).status_code === 409) return undefined;
        throw error;
      }
    });
    const listed = await control<ModelListView>(node, 'GET', '/models');
    assert.equal(listed.body.models.find((m) => m.id === Q4_ID), undefined, 'files and card are gone');
    await expectStatus(ollama.delete({ model: Q4_ID }), 404, /no model 'shoal-test\/Tiny-GGUF:Q4_K_M'/);
  });

  test('unknown models: pull and delete answer Ollama’s {error} with the right status', async () => {
    await expectStatus(ollama.pull({ model: 'shoal-test/Nothing-GGUF' }), 404, /Nothing-GGUF/);
    await expectStatus(ollama.pull({ model: 'shoal-test/Nothing-GGUF:Q4_K_M', stream: true }), 404, /Nothing-GGUF/);
    await expectStatus(ollama.pull({ model: 'llama3.2' }), 400, /not a Hugging Face repo/);
    await expectStatus(ollama.delete({ model: 'nobody/nothing:latest' }), 404, /no model 'nobody\/nothing'/);
    await expectStatus(ollama.delete({ model: 'shoal/tiny' }), 400, /built-in/);
  });

  test('a download that fails ends the stream with an {error} line, and a non-streamed pull with its status', async () => {
    hub.corrupt(Q8);
    try {
      const events: ProgressResponse[] = [];
      await assert.rejects(
        (async () => {
          for await (const event of await ollama.pull({ model: `${REPO}:Q8_0`, stream: true })) events.push(event);
        })(),
        /sha256/i,
      );
      assert.equal(events[0]?.status, 'pulling manifest');
      assert.ok(!events.some((e) => e.status === 'success'));
      await expectStatus(ollama.pull({ model: `${REPO}:Q8_0` }), 502, /sha256/i);
    } finally {
      hub.corrupt(Q8, false);
    }
  });
});

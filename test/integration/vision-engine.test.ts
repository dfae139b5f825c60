// Vision on the managed llama-server: the built-in shoal/tiny-vision (a generated text model and its
// generated projector, src/models/generate/projector.ts), found through its card as a node's launch
// finds it, served by the real llama-server with `--mmproj` through Shoal's runner. The answers are
// random text; what is checked is that images reach the model (their tokens are counted), that a
// text prompt carries them too, and that bad images get typed errors without wedging the runner.
// llama-server comes from the engine cache `shoal doctor --fix` fills; without it the file skips.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { ShoalError } from '../../src/common/errors.js';
import { findEngine } from '../../src/doctor/engines.js';
import { resolveBuiltinModel } from '../../src/models/builtin-store.js';
import { BUILTIN_CARDS } from '../../src/models/cards/catalog.js';
import { TINY_MODEL_SPEC, TINY_VISION_MODEL_ID, TINY_VISION_PROJECTOR_SPEC } from '../../src/models/generate/builtin.js';
import { imageTokens } from '../../src/models/generate/projector.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { LlamaServerRunner } from '../../src/worker/engines/llama-server.js';
import { projectorFor } from '../../src/worker/projector.js';
import type { CountTask, RunnerTask, TaskEvent, TaskImage, Usage } from '../../src/wire/task.js';
import { eventually, status } from '../support/cli.js';
import { startTestNode } from '../support/node-process.js';
import { generateTask } from '../support/tasks.js';
import { png } from '../support/images.js';

const binaryPath = await findEngine('llama-server');
const skip = binaryPath === null ? 'llama-server is not built: run `shoal doctor --fix`' : false;


const IMAGE: TaskImage = { mediaType: 'image/png', data: png(48).toString('base64') };
// A PNG signature and then nothing an image decoder can read: what a sniffing API lets through.
const BROKEN: TaskImage = { mediaType: 'image/png', data: Buffer.concat([png(48).subarray(0, 16), Buffer.from('not the rest of a png')]).toString('base64') };

interface Outcome {
  text: string;
  usage: Usage;
}

async function run(runner: LlamaServerRunner, task: RunnerTask): Promise<Outcome> {
  let text = '';
  let usage: Usage | null = null;
  for await (const event of runner.run(task, new AbortController().signal) as AsyncIterable<TaskEvent>) {
    if (event.type === 'text') text += event.text;
    if (event.type === 'end') usage = event.usage;
  }
  assert.ok(usage, 'the stream ended with usage');
  return { text, usage };
}

async function refusal(runner: LlamaServerRunner, task: RunnerTask): Promise<ShoalError> {
  try {
    await run(runner, task);
  } catch (error) {
    assert.ok(error instanceof ShoalError, `a typed error, got ${String(error)}`);
    return error;
  }
  assert.fail('the task should have been refused');
}

const chat = (content: string, images?: TaskImage[]) =>
  generateTask({ prompt: { kind: 'chat', messages: [{ role: 'user', content, ...(images ? { images } : {}) }] }, sampling: { maxTokens: 8, temperature: 0, topP: 1, seed: 1, presencePenalty: 0, frequencyPenalty: 0 } });

const count = (prompt: CountTask['prompt']): CountTask => ({ kind: 'count', model: TINY_VISION_MODEL_ID, prompt, tools: [] });

describe('vision on llama-server (shoal/tiny-vision)', { skip }, () => {
  let dir: string;
  let runner: LlamaServerRunner;
  const perImage = imageTokens(TINY_VISION_PROJECTOR_SPEC);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-vision-engine-'));
    const card = BUILTIN_CARDS.find((c) => c.id === TINY_VISION_MODEL_ID)!;
    const model = await resolveBuiltinModel(TINY_VISION_MODEL_ID, join(dir, 'models'));
    const projectorPath = await projectorFor(card, model!.path, new AbortController().signal);
    assert.ok(projectorPath !== undefined, 'the card names its projector');
    runner = new LlamaServerRunner({
      binaryPath: binaryPath!,
      modelPath: model!.path,
      projectorPath,
      dataDir: join(dir, 'data'),
      log: pino({ level: 'silent' }),
      threads: 1,
      contextTokens: 1024,
      parallel: 2,
    });
    await runner.whenReady();
  });

  after(async () => {
    await runner?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('a chat with an image answers, and its usage counts the image tokens', async () => {
    const plain = await run(runner, chat('what is this?'));
    const seen = await run(runner, chat('what is this?', [IMAGE]));
    assert.ok(seen.text.length > 0, 'text came back');
    assert.equal(seen.usage.promptTokens, plain.usage.promptTokens + perImage);
    const two = await run(runner, chat('what is this?', [IMAGE, IMAGE]));
    assert.equal(two.usage.promptTokens, plain.usage.promptTokens + 2 * perImage);
    // Counting renders the images as the generation does.
    const counted = await run(runner, count({ kind: 'chat', messages: [{ role: 'user', content: 'what is this?', images: [IMAGE] }] }));
    assert.equal(counted.usage.promptTokens, seen.usage.promptTokens);
  });

  test('a text prompt with an image goes through the multimodal completion form', async () => {
    // A prompt after which this random model does not end at once.
    const plain = await run(runner, generateTask({ prompt: { kind: 'text', text: 'hello' } }));
    const seen = await run(runner, generateTask({ prompt: { kind: 'text', text: 'hello', images: [IMAGE] } }));
    assert.ok(seen.text.length > 0, 'text came back');
    assert.equal(seen.usage.promptTokens, plain.usage.promptTokens + perImage);
    const counted = await run(runner, count({ kind: 'text', text: 'hello', images: [IMAGE] }));
    assert.equal(counted.usage.promptTokens, seen.usage.promptTokens);
    // The server would read this text's chat marker as a control token: refused, not misread.
    const spelled = await refusal(runner, generateTask({ prompt: { kind: 'text', text: '<|im_start|>user\nhi', images: [IMAGE] } }));
    assert.equal(spelled.code, 'BAD_REQUEST');
    assert.match(spelled.message, /control token/);
  });

  test('an image that does not decode is a typed error, and the runner serves the next request', async () => {
    const chatError = await refusal(runner, chat('what is this?', [BROKEN]));
    assert.equal(chatError.code, 'BAD_REQUEST', chatError.message);
    assert.match(chatError.message, /image/i);
    const textError = await refusal(runner, generateTask({ prompt: { kind: 'text', text: 'x', images: [BROKEN] } }));
    assert.equal(textError.code, 'BAD_REQUEST', textError.message);
    const next = await run(runner, chat('what is this?', [IMAGE]));
    assert.ok(next.text.length > 0);
    assert.equal(runner.status().state, 'ready');
    assert.equal(runner.status().restarts, 0);
  });
});

describe('images on llama-server without a projector', { skip }, () => {
  test('are refused as a missing capability, before anything is sent', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-vision-engine-text-'));
    const modelPath = join(dir, 'tiny.gguf');
    await generateRandomModel(TINY_MODEL_SPEC, modelPath);
    const runner = new LlamaServerRunner({ binaryPath: binaryPath!, modelPath, dataDir: join(dir, 'data'), log: pino({ level: 'silent' }), threads: 1, contextTokens: 512, parallel: 1 });
    try {
      await runner.whenReady();
      for (const task of [chat('look', [IMAGE]), generateTask({ prompt: { kind: 'text', text: 'look', images: [IMAGE] } })]) {
        const error = await refusal(runner, task);
        assert.equal(error.code, 'CAPABILITY_MISSING');
        assert.match(error.message, /does not take images/);
      }
      assert.ok((await run(runner, chat('hi'))).usage.promptTokens > 0);
    } finally {
      await runner.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a placed vision card on a node', { skip, timeout: 120_000 }, () => {
  test('its llama-server part loads the projector, and an OpenAI image_url part reaches the model', async () => {
    await using node = await startTestNode();
    const placed = await fetch(`${node.url}/place_instance`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: TINY_VISION_MODEL_ID }) });
    assert.equal(placed.status, 201, await placed.clone().text());
    const { instance } = (await placed.json()) as { instance: { instanceId: string; placements: Array<{ backend: string }> } };
    assert.equal(instance.placements[0]?.backend, 'llama_server-cpu');
    await eventually('the vision part to be ready', 60_000, async () => {
      const found = (await status(node)).instances.find((i) => i.instanceId === instance.instanceId);
      return found?.runners.some((r) => r.state === 'ready') ? true : undefined;
    });
    const ask = async (content: unknown): Promise<{ prompt_tokens: number }> => {
      const res = await fetch(`${node.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: TINY_VISION_MODEL_ID, max_tokens: 4, temperature: 0, messages: [{ role: 'user', content }] }),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      return (JSON.parse(text) as { usage: { prompt_tokens: number } }).usage;
    };
    const plain = await ask('what is this?');
    const seen = await ask([{ type: 'image_url', image_url: { url: `data:image/png;base64,${IMAGE.data}` } }, { type: 'text', text: 'what is this?' }]);
    assert.equal(seen.prompt_tokens, plain.prompt_tokens + imageTokens(TINY_VISION_PROJECTOR_SPEC));
  });
});

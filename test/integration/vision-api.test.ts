import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI, { APIError } from 'openai';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Images through each API family's official client against a real node whose only model
 * (`shoal/tiny`) has no vision: every family decodes and checks the image, then answers with its
 * own "model does not support this" error. Bad and oversized images are refused before any model.
 */

const MODEL = 'shoal/tiny';
const MiB = 1024 * 1024;

/** A PNG signature and header chunk start, padded to `bytes`: what the API sniffs (the engine, which would decode it, is never reached). */
function png(bytes = 64): Buffer {
  const out = Buffer.alloc(bytes);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]).copy(out);
  return out;
}
const NOT_AN_IMAGE = Buffer.from('%PDF-1.7 this is a document, not a picture');
/** Over MAX_IMAGE_BYTES (8 MiB), and so a body over the 4 MiB of the text-only routes. */
const OVERSIZED = png(9 * MiB);
/** Two of these fit MAX_IMAGE_BYTES each but not MAX_TASK_IMAGE_BYTES (12 MiB) together, in a body under 20 MiB. */
const SEVEN_MIB = png(7 * MiB);

const dataUrl = (bytes: Buffer): string => `data:image/png;base64,${bytes.toString('base64')}`;

describe('image inputs on a node without a vision model', () => {
  let node: TestNode;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;

  before(async () => {
    node = await startTestNode();
    openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'x', maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: node.url, apiKey: 'x', maxRetries: 0 });
    ollama = new Ollama({ host: node.url });
  });
  after(async () => {
    await node?.stop();
  });

  async function openAIError(promise: Promise<unknown>, status: number, code: string | null, param: string, message: RegExp): Promise<void> {
    await assert.rejects(promise, (error: unknown) => {
      assert.ok(error instanceof APIError, `expected an APIError, got ${String(error)}`);
      assert.equal(error.status, status);
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.code, code);
      assert.equal(error.param, param);
      assert.match(error.message, message);
      return true;
    });
  }

  async function anthropicError(promise: Promise<unknown>, status: number, type: string, message: RegExp): Promise<void> {
    await assert.rejects(promise, (error: unknown) => {
      assert.ok(error instanceof Anthropic.APIError, `expected an APIError, got ${String(error)}`);
      assert.equal(error.status, status);
      assert.equal(error.type, type);
      assert.deepEqual(Object.keys(error.error as object), ['type', 'error']);
      assert.match(error.message, message);
      return true;
    });
  }

  async function ollamaError(promise: Promise<unknown>, status: number, message: RegExp): Promise<void> {
    await assert.rejects(promise, (error: unknown) => {
      const e = error as Error & { status_code: number; error: string };
      assert.equal(e.status_code, status, `expected ${status}, got ${String(error)}`);
      assert.match(e.error, message);
      return true;
    });
  }

  const chat = (url: string, more: OpenAI.ChatCompletionContentPart[] = []) =>
    openai.chat.completions.create({
      model: MODEL,
      max_tokens: 4,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url, detail: 'low' } }, ...more] }],
    });
  const respond = (url: string) =>
    openai.responses.create({ model: MODEL, max_output_tokens: 4, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Describe it' }, { type: 'input_image', image_url: url, detail: 'auto' }] }] });
  const image = (bytes: Buffer): Anthropic.ImageBlockParam => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: bytes.toString('base64') } });
  const message = (...images: Anthropic.ImageBlockParam[]) =>
    anthropic.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: [...images, { type: 'text', text: 'What is this?' }] }] });

  test('OpenAI chat and Responses: an image for a model without vision is 400 model_not_supported', async () => {
    const missing = /model 'shoal\/tiny' does not support vision; its capabilities are chat, completion, embeddings, tools: send images to a vision model/;
    await openAIError(chat(dataUrl(png())), 400, 'model_not_supported', 'model', missing);
    await openAIError(respond(dataUrl(png())), 400, 'model_not_supported', 'model', missing);
    // The same request without the image is served.
    const text = await openai.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }] });
    assert.equal(text.choices[0]!.finish_reason, 'length');
  });

  test('OpenAI: remote URLs, non-images and oversized images are refused before any model', async () => {
    await openAIError(chat('https://example.com/cat.png'), 400, null, 'messages[0].content[1].image_url.url', /does not fetch remote images; send the image inline as a data URL/);
    await openAIError(chat(dataUrl(NOT_AN_IMAGE)), 400, null, 'messages[0].content[1].image_url.url', /not an image: .*its first bytes are 25 50 44 46/);
    await openAIError(chat(dataUrl(OVERSIZED)), 413, 'request_too_large', 'messages[0].content[1].image_url.url', /over the 8\.0 MiB limit per image/);
    await openAIError(
      chat(dataUrl(SEVEN_MIB), [{ type: 'image_url', image_url: { url: dataUrl(SEVEN_MIB) } }]),
      413,
      'request_too_large',
      'messages[0].content[2].image_url.url',
      /over the 12\.0 MiB limit per request/,
    );
    await openAIError(respond(dataUrl(NOT_AN_IMAGE)), 400, null, 'input[0].content[1].image_url', /not an image/);
    await openAIError(respond(dataUrl(OVERSIZED)), 413, 'request_too_large', 'input[0].content[1].image_url', /limit per image/);
  });

  test('Anthropic messages and count_tokens: an image for a model without vision is 400 invalid_request_error', async () => {
    await anthropicError(message(image(png())), 400, 'invalid_request_error', /does not support vision/);
    await anthropicError(
      anthropic.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: [image(png()), { type: 'text', text: 'hi' }] }] }),
      400,
      'invalid_request_error',
      /does not support vision/,
    );
    await anthropicError(message(image(NOT_AN_IMAGE)), 400, 'invalid_request_error', /not an image: 'messages\[0\]\.content\[0\]\.source\.data'/);
    await anthropicError(message(image(OVERSIZED)), 413, 'request_too_large', /'messages\[0\]\.content\[0\]\.source\.data' is 9\.0 MiB decoded, over the 8\.0 MiB limit per image/);
    await anthropicError(message(image(SEVEN_MIB), image(SEVEN_MIB)), 413, 'request_too_large', /'messages\[0\]\.content\[1\]\.source\.data'.*12\.0 MiB limit per request/);
    await anthropicError(
      anthropic.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }] }),
      400,
      'invalid_request_error',
      /url image sources are not supported; send the image as source.type 'base64'/,
    );
  });

  test("Ollama chat and generate: images for a model without vision are 400 {error}, and /api/show does not list vision", async () => {
    await ollamaError(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'what is it?', images: [png()] }] }), 400, /does not support vision/);
    await ollamaError(ollama.generate({ model: MODEL, prompt: 'what is it?', images: [png()] }), 400, /does not support vision/);
    await ollamaError(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'x', images: [NOT_AN_IMAGE] }] }), 400, /not an image: 'messages\[0\]\.images\[0\]'/);
    await ollamaError(ollama.generate({ model: MODEL, prompt: 'x', images: [png(), NOT_AN_IMAGE] }), 400, /not an image: 'images\[1\]'/);
    await ollamaError(ollama.generate({ model: MODEL, prompt: 'x', images: [OVERSIZED] }), 413, /'images\[0\]' is 9\.0 MiB decoded, over the 8\.0 MiB limit per image/);
    await ollamaError(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'x', images: [SEVEN_MIB, SEVEN_MIB] }] }), 413, /'messages\[0\]\.images\[1\]'.*limit per request/);
    const show = await ollama.show({ model: MODEL });
    assert.equal(show.capabilities.includes('vision'), false);
  });

  test('the routes that take images accept bodies up to 20 MiB; other routes keep 4 MiB', async () => {
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    // 5 MiB of text: over the default limit, under the image routes' one.
    const text = 'a'.repeat(5 * MiB);
    const embeddings = await post('/v1/embeddings', { model: MODEL, input: text });
    assert.equal(embeddings.status, 413);
    assert.equal((embeddings.json.error as { code: string }).code, 'request_too_large');
    // A body of that size on an image route reaches the handler: the image's own check answers, not the body limit.
    const reached = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: [{ type: 'text', text }, { type: 'image_url', image_url: { url: dataUrl(NOT_AN_IMAGE) } }] }] });
    assert.equal(reached.status, 400);
    assert.equal((reached.json.error as { param: string }).param, 'messages[0].content[1].image_url.url');
    // Over 20 MiB is refused by the body limit, in the family's shape.
    const huge = await post('/v1/messages', { model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'b'.repeat(21 * MiB) }] });
    assert.equal(huge.status, 413);
    assert.equal((huge.json.error as { type: string }).type, 'request_too_large');
    const ollamaHuge = await post('/api/chat', { model: MODEL, messages: [{ role: 'user', content: 'c'.repeat(21 * MiB) }] });
    assert.equal(ollamaHuge.status, 413);
    assert.equal(typeof ollamaHuge.json.error, 'string');
  });
});

// The image side of llama-server's request bodies (llama-server-protocol.ts): chat content parts and
// the multimodal `/completion` prompt.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChatMessage, InferenceTask, TaskImage } from '../../wire/task.js';
import { chatCountBody, chatMessages, chatRequestBody, completionRequestBody, multimodalPrompt } from './llama-server-protocol.js';

const PNG: TaskImage = { mediaType: 'image/png', data: 'iVBORw0KGgo=' };
const JPEG: TaskImage = { mediaType: 'image/jpeg', data: '/9j/4AAQ' };
const WEATHER = { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } };

const part = (image: TaskImage) => ({ type: 'image_url', image_url: { url: `data:${image.mediaType};base64,${image.data}` } });

function task(messages: ChatMessage[], extra: Partial<InferenceTask> = {}): InferenceTask & { prompt: { kind: 'chat' } } {
  return {
    kind: 'generate',
    model: 'm',
    prompt: { kind: 'chat', messages },
    sampling: { maxTokens: 16, temperature: 0, topP: 1, seed: 7, presencePenalty: 0, frequencyPenalty: 0 },
    stop: [],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
    ...extra,
  } as InferenceTask & { prompt: { kind: 'chat' } };
}

test('a user message with images becomes image_url data URLs, in order, then its text', () => {
  const body = chatRequestBody(task([{ role: 'user', content: 'what is this?', images: [PNG, JPEG] }]), { mode: 'off', native: false }, 16);
  assert.deepEqual(body.messages, [{ role: 'user', content: [part(PNG), part(JPEG), { type: 'text', text: 'what is this?' }] }]);
});

test('messages without images keep plain string content, which every template reads', () => {
  const messages = chatMessages(
    [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'look', images: [PNG] },
      { role: 'assistant', content: 'a cat' },
      { role: 'user', content: 'and now?' },
    ],
    [],
    { mode: 'none' },
    false,
  );
  assert.deepEqual(messages, [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: [part(PNG), { type: 'text', text: 'look' }] },
    { role: 'assistant', content: 'a cat' },
    { role: 'user', content: 'and now?' },
  ]);
});

test("Shoal's own tool convention keeps each image with its user turn, past merged tool results", () => {
  const messages = chatMessages(
    [
      { role: 'user', content: 'weather here?', images: [PNG] },
      { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 'get_weather', arguments: '{"city":"Oslo"}' }, { id: 'b', name: 'get_weather', arguments: '{"city":"Rome"}' }] },
      { role: 'tool', toolCallId: 'a', content: 'rain' },
      { role: 'tool', toolCallId: 'b', content: 'sun' },
      { role: 'user', content: 'and this place?', images: [JPEG] },
    ],
    [WEATHER],
    { mode: 'auto' },
    false,
  );
  // The instructions become a system turn; the two tool results share one user turn.
  assert.deepEqual(
    messages.map((m) => m.role),
    ['system', 'user', 'assistant', 'user', 'user'],
  );
  assert.deepEqual(messages[1]!.content, [part(PNG), { type: 'text', text: 'weather here?' }]);
  assert.equal(typeof messages[3]!.content, 'string');
  assert.match(messages[3]!.content as string, /rain[\s\S]*sun/);
  assert.deepEqual(messages[4]!.content, [part(JPEG), { type: 'text', text: 'and this place?' }]);
});

test('the count body renders images as the generation does, so the server counts their tokens', () => {
  const body = chatCountBody({ kind: 'chat', messages: [{ role: 'user', content: 'x', images: [PNG] }] }, [], { mode: 'none' }, false);
  assert.deepEqual(body, { messages: [{ role: 'user', content: [part(PNG), { type: 'text', text: 'x' }] }] });
});

test('a text prompt with images: one media marker per image before the text, the bytes in marker order', () => {
  const marker = '<__media_abc__>';
  const prompt = multimodalPrompt('describe', [PNG, JPEG], marker);
  assert.deepEqual(prompt, { prompt_string: `${marker}${marker}describe`, multimodal_data: [PNG.data, JPEG.data] });
  const body = completionRequestBody({ ...task([]), prompt: { kind: 'text', text: 'describe', images: [PNG, JPEG] } }, { mode: 'off', native: false }, prompt, 8);
  assert.deepEqual(body.prompt, prompt);
  assert.equal(body.n_predict, 8);
  // Token ids stay the text-only form.
  assert.deepEqual(completionRequestBody({ ...task([]), prompt: { kind: 'text', text: 'x' } }, { mode: 'off', native: false }, [1, 2], 8).prompt, [1, 2]);
});

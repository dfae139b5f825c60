import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AnswerClock, chatModelIds, readChatChunk, responseErrorMessage } from './chat.js';

test('stream chunks: content, reasoning, usage, errors and [DONE]', () => {
  assert.equal(readChatChunk('{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}').content, 'Hi');
  assert.equal(readChatChunk('{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}').reasoning, 'hm');
  const last = readChatChunk('{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":12}}');
  assert.equal(last.finishReason, 'length');
  assert.equal(last.completionTokens, 12);
  assert.equal(readChatChunk('{"choices":[],"usage":{"completion_tokens":3}}').completionTokens, 3);
  assert.equal(readChatChunk(' [DONE]').done, true);
  assert.equal(readChatChunk('{"error":{"message":"runner crashed"}}').error, 'runner crashed');
  assert.match(readChatChunk('not json').error ?? '', /not JSON/);
});

test('error bodies of every API family give their message', () => {
  assert.equal(responseErrorMessage(404, { error: { message: 'no such model', type: 'invalid_request_error' } }), 'no such model');
  assert.equal(responseErrorMessage(400, { error: 'bad' }), 'bad');
  assert.equal(responseErrorMessage(502, 'gateway'), 'the node answered HTTP 502');
});

test('time to first token counts from the request; speed counts from the first token', () => {
  const clock = new AnswerClock(1000);
  assert.deepEqual(clock.stats(), { ttftMs: null, tokens: 0, tokensPerS: null });
  clock.token(1250);
  assert.deepEqual(clock.stats(), { ttftMs: 250, tokens: 1, tokensPerS: null });
  for (let i = 1; i <= 10; i += 1) clock.token(1250 + i * 100);
  assert.deepEqual(clock.stats(), { ttftMs: 250, tokens: 11, tokensPerS: 10 });
  clock.usage(21);
  assert.equal(clock.stats().tokensPerS, 20);
});

test('the chat lists the models it can talk to: not the voice, not a model whose card does no chat', () => {
  const cards = [
    { id: 'shoal/tiny', tasks: ['chat', 'completion', 'embeddings'] },
    { id: 'shoal/tiny-whisper', tasks: ['transcription'] },
    { id: 'acme/base', tasks: ['completion'] },
  ];
  assert.deepEqual(chatModelIds(['shoal/tiny', 'shoal/voice', 'shoal/tiny-whisper', 'acme/base', 'peer/only'], cards), ['shoal/tiny', 'acme/base', 'peer/only']);
  assert.deepEqual(chatModelIds(['shoal/tiny', 'shoal/voice'], null), ['shoal/tiny'], 'without the cards only the voice is known not to chat');
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { toChatHistory } from './prompt.js';

const weather = { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } };

test('plain messages map to history items with an open model turn', () => {
  assert.deepEqual(
    toChatHistory([{ role: 'system', content: 's' }, { role: 'user', content: 'u' }], [], { mode: 'auto' }),
    [{ type: 'system', text: 's' }, { type: 'user', text: 'u' }, { type: 'model', response: [] }],
  );
});

test('a trailing assistant message is continued, not closed', () => {
  const history = toChatHistory([{ role: 'user', content: 'u' }, { role: 'assistant', content: 'Sure, ' }], [], { mode: 'auto' });
  assert.deepEqual(history.at(-1), { type: 'model', response: ['Sure, '] });
});

test('tools are described in the system message, which is created when missing', () => {
  const history = toChatHistory([{ role: 'user', content: 'u' }], [weather], { mode: 'auto' });
  assert.equal(history[0]!.type, 'system');
  const text = (history[0] as { text: string }).text;
  assert.match(text, /get_weather/);
  assert.match(text, /<tool_call>/);
  const withSystem = toChatHistory([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'u' }], [weather], { mode: 'required' });
  assert.match((withSystem[0] as { text: string }).text, /^Be brief\.\n\n# Tools/);
  assert.match((withSystem[0] as { text: string }).text, /must call/);
});

test('tool_choice none keeps tools out of the prompt', () => {
  const history = toChatHistory([{ role: 'user', content: 'u' }], [weather], { mode: 'none' });
  assert.equal(history[0]!.type, 'user');
});

test('past calls and their results round-trip into the conversation', () => {
  const history = toChatHistory(
    [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'get_weather', arguments: '{"city":"Oslo"}' }] },
      { role: 'tool', toolCallId: 'c1', content: '{"temp":3}' },
      { role: 'tool', toolCallId: 'c2', content: 'second' },
    ],
    [weather],
    { mode: 'auto' },
  );
  assert.deepEqual(history[2], { type: 'model', response: ['<tool_call>\n{"name":"get_weather","arguments":{"city":"Oslo"}}\n</tool_call>'] });
  assert.deepEqual(history[3], { type: 'user', text: '<tool_response>\n{"temp":3}\n</tool_response>\n<tool_response>\nsecond\n</tool_response>' });
  assert.deepEqual(history[4], { type: 'model', response: [] });
});

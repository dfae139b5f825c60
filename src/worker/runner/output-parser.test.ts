import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OutputParser, type ParsedEvent, type ToolMode } from './output-parser.js';

function parse(pieces: string[], options: { startInReasoning?: boolean; toolMode?: ToolMode } = {}): ParsedEvent[] {
  let n = 0;
  const parser = new OutputParser({
    startInReasoning: options.startInReasoning ?? false,
    toolMode: options.toolMode ?? 'off',
    newCallId: () => `call_${n++}`,
  });
  const events = pieces.flatMap((piece) => parser.push(piece));
  return merge([...events, ...parser.finish()]);
}

/** Joins adjacent events of the same kind, so tests compare content, not chunking. */
function merge(events: ParsedEvent[]): ParsedEvent[] {
  const out: ParsedEvent[] = [];
  for (const e of events) {
    const last = out.at(-1);
    if (last && (e.type === 'text' || e.type === 'reasoning') && last.type === e.type) last.text += e.text;
    else if (last && e.type === 'tool_call_delta' && last.type === 'tool_call_delta' && last.index === e.index) last.arguments += e.arguments;
    else out.push({ ...e });
  }
  return out;
}

/** Every way of cutting `text` into two pieces must parse the same. */
function everySplit(text: string, options: Parameters<typeof parse>[1], expected: ParsedEvent[]): void {
  for (let i = 0; i <= text.length; i++) {
    assert.deepEqual(parse([text.slice(0, i), text.slice(i)], options), expected, `split at ${i}`);
  }
}

test('plain text passes through', () => {
  everySplit('hello world', {}, [{ type: 'text', text: 'hello world' }]);
});

test('a think block at the start becomes reasoning, whatever the split', () => {
  everySplit('<think>plan it</think>\n\nThe answer.', {}, [
    { type: 'reasoning', text: 'plan it' },
    { type: 'text', text: 'The answer.' },
  ]);
});

test('a prompt that opened the think block starts in reasoning', () => {
  everySplit('plan it</think>answer', { startInReasoning: true }, [
    { type: 'reasoning', text: 'plan it' },
    { type: 'text', text: 'answer' },
  ]);
});

test('a think tag after answer text has begun is just text', () => {
  assert.deepEqual(parse(['so <think>x</think>']), [{ type: 'text', text: 'so <think>x</think>' }]);
});

test('an unterminated think block stays reasoning and never leaks', () => {
  assert.deepEqual(parse(['<think>still going</th']), [{ type: 'reasoning', text: 'still going</th' }]);
});

test('a lazy tool call splits into text, the call and its streamed arguments', () => {
  everySplit('Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}', { toolMode: 'lazy' }, [
    { type: 'text', text: 'Let me check.' },
    { type: 'tool_call', index: 0, id: 'call_0', name: 'get_weather' },
    { type: 'tool_call_delta', index: 0, arguments: '{"city": "Oslo", "days": 2}' },
  ]);
});

test('a forced call has no tag; nested objects keep their braces', () => {
  everySplit('{"name":"f","arguments":{"a":{"b":{}}}}', { toolMode: 'forced' }, [
    { type: 'tool_call', index: 0, id: 'call_0', name: 'f' },
    { type: 'tool_call_delta', index: 0, arguments: '{"a":{"b":{}}}' },
  ]);
});

test('a call ends at its closing brace; whatever follows is dropped', () => {
  let n = 0;
  const parser = new OutputParser({ startInReasoning: false, toolMode: 'forced', newCallId: () => `call_${n++}` });
  const events = [...parser.push('{"name":"f","arguments":{"a":1}}  \n'), ...parser.push(' more'), ...parser.finish()];
  assert.equal(parser.callComplete, true);
  assert.deepEqual(merge(events), [
    { type: 'tool_call', index: 0, id: 'call_0', name: 'f' },
    { type: 'tool_call_delta', index: 0, arguments: '{"a":1}' },
  ]);
});

test('tool tags are plain text when tools are off', () => {
  assert.deepEqual(parse(['<tool_call>{"name":"x"}']), [{ type: 'text', text: '<tool_call>{"name":"x"}' }]);
});

test('a lazy call that never forms a header is kept as text', () => {
  assert.deepEqual(parse(['hi <tool_call>oops'], { toolMode: 'lazy' }), [{ type: 'text', text: 'hi <tool_call>oops' }]);
});

test('reasoning then a tool call', () => {
  assert.deepEqual(parse(['<think>need data</think><tool_call>{"name":"q","arguments":{}}'], { toolMode: 'lazy' }), [
    { type: 'reasoning', text: 'need data' },
    { type: 'tool_call', index: 0, id: 'call_0', name: 'q' },
    { type: 'tool_call_delta', index: 0, arguments: '{}' },
  ]);
});

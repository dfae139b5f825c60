import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InstanceId, NodeId } from '../common/ids.js';
import type { ChatMessage, InferenceTask } from '../wire/task.js';
import { PREFIX_BLOCK_CHARS, PrefixRoutes, prefixKeys, type RouteKey } from './prefix-routes.js';

const chat = (messages: ChatMessage[], over: Partial<Pick<InferenceTask, 'model' | 'tools'>> = {}) => ({ model: 'm', tools: [], prompt: { kind: 'chat' as const, messages }, ...over });
const text = (value: string) => ({ model: 'm', tools: [], prompt: { kind: 'text' as const, text: value } });
const route = (instanceId: string): RouteKey => ({ nodeId: 'node-a' as NodeId, instanceId: instanceId as InstanceId });
const always = () => true;

test("a conversation's next turn carries the key of its last turn's whole prompt; other models, tools or histories do not", () => {
  const turn1: ChatMessage[] = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello' }];
  const turn2: ChatMessage[] = [...turn1, { role: 'assistant', content: 'hi' }, { role: 'user', content: 'more' }];
  const last = prefixKeys(chat(turn1)).at(-1)!;
  assert.equal(prefixKeys(chat(turn1)).length, 2);
  assert.ok(prefixKeys(chat(turn2)).includes(last));
  assert.ok(!prefixKeys(chat(turn2, { model: 'other' })).includes(last));
  assert.ok(!prefixKeys(chat(turn2, { tools: [{ name: 'f', parameters: {} }] })).includes(last));
  assert.ok(!prefixKeys(chat([{ role: 'system', content: 'be long' }, ...turn2.slice(1)])).includes(last));
});

test('a text prompt is keyed by whole blocks, so a continuation shares every block of the prompt it extends', () => {
  const first = 'x'.repeat(PREFIX_BLOCK_CHARS * 2 + 10);
  assert.equal(prefixKeys(text(first)).length, 2);
  assert.equal(prefixKeys(text('short')).length, 0);
  const keys = prefixKeys(text(first + 'y'.repeat(PREFIX_BLOCK_CHARS)));
  assert.deepEqual(keys.slice(0, 2), prefixKeys(text(first)));
});

test('the holder is the live instance that served the longest prefix; the map forgets the least recently used first', () => {
  const routes = new PrefixRoutes(2);
  const turn1: ChatMessage[] = [{ role: 'user', content: 'one' }];
  const turn2: ChatMessage[] = [...turn1, { role: 'assistant', content: 'two' }, { role: 'user', content: 'three' }];
  routes.served(prefixKeys(chat(turn1)), route('short'));
  routes.served(prefixKeys(chat(turn2)).slice(0, 2), route('long'));
  const next = prefixKeys(chat([...turn2, { role: 'assistant', content: 'four' }]));
  assert.deepEqual(routes.holder(next, always), route('long'));
  assert.deepEqual(routes.holder(next, (r) => r.instanceId !== 'long'), route('short'));
  assert.equal(routes.holder(next, () => false), null);

  // 'short' was just used, so a third prompt pushes out 'long'.
  routes.served(prefixKeys(chat([{ role: 'user', content: 'other' }])), route('other'));
  assert.equal(routes.size, 2);
  assert.deepEqual(routes.holder(next, always), route('short'));
});

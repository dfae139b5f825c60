import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientSnippets, isLoopbackOrigin, openAiBaseUrl } from './connect.js';

test('the base URL is the page origin with /v1', () => {
  assert.equal(openAiBaseUrl('http://10.0.0.5:52600'), 'http://10.0.0.5:52600/v1');
  assert.equal(openAiBaseUrl('http://10.0.0.5:52600/'), 'http://10.0.0.5:52600/v1');
});

test('loopback origins are told apart from addresses other machines can use', () => {
  assert.equal(isLoopbackOrigin('http://127.0.0.1:52600'), true);
  assert.equal(isLoopbackOrigin('http://localhost:52600'), true);
  assert.equal(isLoopbackOrigin('http://[::1]:52600'), true);
  assert.equal(isLoopbackOrigin('http://192.168.1.20:52600'), false);
});

test('without a key the snippets send none (the OpenAI clients get a placeholder)', () => {
  const snippets = clientSnippets({ origin: 'http://127.0.0.1:52600', apiKeyRequired: false, model: 'shoal/tiny' });
  assert.deepEqual(snippets.map((s) => s.id), ['curl', 'python', 'javascript']);
  for (const s of snippets) {
    assert.match(s.code, /http:\/\/127\.0\.0\.1:52600\/v1/);
    assert.match(s.code, /shoal\/tiny/);
    assert.doesNotMatch(s.code, /SHOAL_API_KEY/);
  }
  assert.doesNotMatch(snippets[0]!.code, /Authorization/);
  assert.match(snippets[1]!.code, /api_key="none"/);
  // The curl body is JSON a shell passes through unchanged.
  const body = /-d '(.*)'$/.exec(snippets[0]!.code)?.[1];
  assert.deepEqual(JSON.parse(body ?? ''), { model: 'shoal/tiny', messages: [{ role: 'user', content: 'Hello!' }] });
});

test('with a key every snippet reads it from the environment', () => {
  const snippets = clientSnippets({ origin: 'http://10.0.0.5:52600', apiKeyRequired: true, model: 'acme/x:Q4_K_M' });
  assert.match(snippets[0]!.code, /-H "Authorization: Bearer \$SHOAL_API_KEY"/);
  assert.match(snippets[1]!.code, /api_key=os\.environ\["SHOAL_API_KEY"\]/);
  assert.match(snippets[2]!.code, /apiKey: process\.env\.SHOAL_API_KEY/);
});

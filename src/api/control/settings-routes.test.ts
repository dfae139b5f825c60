import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiKeyDigest } from '../auth.js';
import { defaultSettings } from '../../master/state/settings.js';
import { patchFromBody, SettingsBody } from './settings-routes.js';

test('keys given in the clear become digests: apiKeys replaces, addApiKeys and removeApiKeys change one by one', () => {
  const current = { ...defaultSettings(), apiKeyDigests: [apiKeyDigest('old-key-1')] };
  assert.deepEqual(patchFromBody({ apiKeys: ['new-key-1'] }, current), { apiKeyDigests: [apiKeyDigest('new-key-1')] });
  assert.deepEqual(new Set(patchFromBody({ addApiKeys: ['new-key-2'] }, current).apiKeyDigests), new Set([apiKeyDigest('old-key-1'), apiKeyDigest('new-key-2')]));
  assert.deepEqual(patchFromBody({ removeApiKeys: ['old-key-1'] }, current), { apiKeyDigests: [] });
  assert.deepEqual(patchFromBody({ defaultParallel: null }, current), { defaultParallel: null }, 'only the fields given');
});

test('origins are normalized; a path, a short key or an unknown field is refused', () => {
  assert.deepEqual(patchFromBody({ corsOrigins: ['HTTPS://App.Example/'] }, defaultSettings()), { corsOrigins: ['https://app.example'] });
  assert.throws(() => patchFromBody({ corsOrigins: ['https://app.example/x'] }, defaultSettings()), /not an origin/);
  assert.equal(SettingsBody.safeParse({ apiKeys: ['short'] }).success, false);
  assert.equal(SettingsBody.safeParse({ apiKeyDigests: [] }).success, false, 'digests are not taken from a client');
});

test('the tracing switch passes through as given, and only when given', () => {
  assert.deepEqual(patchFromBody(SettingsBody.parse({ tracing: true }), defaultSettings()), { tracing: true });
  assert.deepEqual(patchFromBody(SettingsBody.parse({ tracing: false }), { ...defaultSettings(), tracing: true }), { tracing: false });
  assert.deepEqual(patchFromBody(SettingsBody.parse({ defaultParallel: 2 }), { ...defaultSettings(), tracing: true }), { defaultParallel: 2 });
  assert.equal(SettingsBody.safeParse({ tracing: 'on' }).success, false);
});

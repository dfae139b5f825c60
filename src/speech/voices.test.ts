import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { OPENAI_VOICES, resolveVoice, wordsPerMinute, type VoiceCatalog } from './voices.js';

const lang = (name: string, priority: number) => ({ name, priority });
const catalog: VoiceCatalog = {
  voices: [
    { identifier: 'gmw/en-US', languages: [lang('en-us', 2), lang('en', 3)] },
    { identifier: 'gmw/en', languages: [lang('en-gb', 2), lang('en', 2)] },
    { identifier: 'gmw/en-GB-scotland', languages: [lang('en-gb-scotland', 5), lang('en', 4)] },
    { identifier: 'gmw/en-GB-x-rp', languages: [lang('en-gb-x-rp', 5), lang('en-gb', 4), lang('en', 5)] },
    { identifier: 'gmw/de', languages: [lang('de', 5)] },
  ],
  variants: ['f1', 'f2', 'f3', 'f4', 'f5', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'Alex'],
};

test('every OpenAI voice name resolves to an eSpeak NG voice, and no two share one', () => {
  const resolved = Object.keys(OPENAI_VOICES).map((name) => resolveVoice(name, catalog));
  assert.ok(resolved.every((v) => v !== null), JSON.stringify(resolved));
  assert.equal(new Set(resolved).size, resolved.length);
  assert.equal(resolveVoice('alloy', catalog), 'gmw/en-US');
  assert.equal(resolveVoice('NOVA', catalog), 'gmw/en-US+f3');
  assert.equal(resolveVoice('sage', catalog), 'gmw/en+f1');
});

test('eSpeak NG voices are accepted by language or identifier, with a known variant, in any case', () => {
  assert.equal(resolveVoice('de', catalog), 'gmw/de');
  assert.equal(resolveVoice('EN-US', catalog), 'gmw/en-US');
  assert.equal(resolveVoice('gmw/en-us', catalog), 'gmw/en-US');
  assert.equal(resolveVoice('en-gb+F2', catalog), 'gmw/en+f2');
  assert.equal(resolveVoice('de+alex', catalog), 'gmw/de+Alex');
  assert.equal(resolveVoice('en', catalog), 'gmw/en', 'a language picks the voice eSpeak NG prefers for it');
});

test('unknown voices, unknown variants and malformed names resolve to nothing', () => {
  for (const name of ['klingon', 'en-us+bogus', 'en-us+f3+m1', '+f3', 'en-us+', '', '__proto__', 'constructor', 'toString']) assert.equal(resolveVoice(name, catalog), null, name);
});

test('speed maps to words per minute around eSpeak NG\'s 175, clamped to its 80..450', () => {
  assert.equal(wordsPerMinute(1), 175);
  assert.equal(wordsPerMinute(2), 350);
  assert.equal(wordsPerMinute(0.5), 88);
  assert.equal(wordsPerMinute(0.25), 80);
  assert.equal(wordsPerMinute(4), 450);
});

test('any string resolves to a voice or to null, never throws', () => {
  fc.assert(fc.property(fc.string(), (name) => {
    const voice = resolveVoice(name, catalog);
    return voice === null || typeof voice === 'string';
  }));
});

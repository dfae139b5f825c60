import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BYTE_TOKEN_BASE,
  buildVocab,
  FIRST_NORMAL_TOKEN,
  MIN_VOCAB_SIZE,
  SPACE_MARKER,
  SpecialToken,
  TokenType,
  VocabError,
  wordIds,
} from './vocab.js';

test('special and byte tokens sit at fixed ids', () => {
  const vocab = buildVocab(1024);
  assert.deepEqual(vocab.tokens.slice(0, 5), ['<unk>', '<s>', '</s>', '<|im_start|>', '<|im_end|>']);
  assert.deepEqual(vocab.types.slice(0, 5), [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL, TokenType.CONTROL, TokenType.CONTROL]);
  assert.equal(SpecialToken.IM_END, 4);
  assert.equal(vocab.tokens[BYTE_TOKEN_BASE], '<0x00>');
  assert.equal(vocab.tokens[BYTE_TOKEN_BASE + 0x0a], '<0x0A>', 'llama.cpp looks up the newline byte token by this exact text');
  assert.equal(vocab.tokens[BYTE_TOKEN_BASE + 255], '<0xFF>');
  for (let id = BYTE_TOKEN_BASE; id < FIRST_NORMAL_TOKEN; id++) {
    assert.equal(vocab.types[id], TokenType.BYTE);
    assert.equal(vocab.scores[id], 0);
  }
  for (let id = FIRST_NORMAL_TOKEN; id < vocab.tokens.length; id++) assert.equal(vocab.types[id], TokenType.NORMAL);
});

test('vocab has exactly the requested size with unique pieces, at several sizes', () => {
  for (const size of [MIN_VOCAB_SIZE, 600, 1024, 5000, 32000]) {
    const vocab = buildVocab(size);
    assert.equal(vocab.tokens.length, size);
    assert.equal(vocab.scores.length, size);
    assert.equal(vocab.types.length, size);
    assert.equal(new Set(vocab.tokens).size, size, `no duplicates at size ${size}`);
  }
});

test('every printable ASCII char, the space marker and marker+letter are present', () => {
  const pieces = new Set(buildVocab(MIN_VOCAB_SIZE).tokens);
  for (let code = 0x21; code <= 0x7e; code++) assert.ok(pieces.has(String.fromCharCode(code)));
  assert.ok(pieces.has(SPACE_MARKER));
  assert.ok(pieces.has(`${SPACE_MARKER}a`) && pieces.has(`${SPACE_MARKER}Z`));
});

test('every multi-character piece has all its prefixes, so SPM merges can reach it', () => {
  for (const size of [700, 32000]) {
    const vocab = buildVocab(size);
    const pieces = new Set(vocab.tokens);
    for (let id = FIRST_NORMAL_TOKEN; id < size; id++) {
      const chars = [...vocab.tokens[id]!];
      for (let length = 1; length < chars.length; length++) {
        const prefix = chars.slice(0, length).join('');
        assert.ok(pieces.has(prefix), `prefix ${prefix} of ${vocab.tokens[id]} at size ${size}`);
      }
    }
  }
});

test('longer pieces score higher, and common words come with and without the space marker', () => {
  const vocab = buildVocab(4000);
  const score = (piece: string): number => vocab.scores[vocab.tokens.indexOf(piece)]!;
  assert.ok(score(`${SPACE_MARKER}the`) > score(`${SPACE_MARKER}t`));
  assert.ok(score('the') > score('th'));
  assert.ok(vocab.scores.every((s) => s <= 0));
  const words = wordIds(vocab);
  assert.ok(words.spaced.has(vocab.tokens.indexOf(`${SPACE_MARKER}the`)));
  assert.ok(words.bare.has(vocab.tokens.indexOf('the')));
  assert.ok(!words.spaced.has(vocab.tokens.indexOf(`${SPACE_MARKER}th`)));
  assert.ok(!words.bare.has(vocab.tokens.indexOf('th')));
});

test('large vocabs are filled with synthetic syllable pieces', () => {
  const vocab = buildVocab(32000);
  const last = vocab.tokens.at(-1)!;
  assert.match(last, /^▁?[a-z]+$/);
});

test('the same size always yields the same vocab', () => {
  assert.deepEqual(buildVocab(3000), buildVocab(3000));
});

test('sizes below the fixed base or non-integers are rejected', () => {
  assert.throws(() => buildVocab(MIN_VOCAB_SIZE - 1), (err: unknown) => err instanceof VocabError && err.code === 'VOCAB_INVALID');
  assert.throws(() => buildVocab(1000.5), VocabError);
});

test('user-defined tags take the last ids and leave the rest of the vocab unchanged', () => {
  const tags = ['<think>', '</think>'];
  const plain = buildVocab(1024);
  const tagged = buildVocab(1024, tags);
  assert.equal(tagged.tokens.length, 1024);
  assert.deepEqual(tagged.tokens.slice(-2), tags);
  assert.deepEqual(tagged.types.slice(-2), [TokenType.USER_DEFINED, TokenType.USER_DEFINED]);
  assert.equal(TokenType.USER_DEFINED, 4, 'llama.cpp reads type 4 as USER_DEFINED');
  assert.deepEqual(tagged.tokens.slice(0, -2), plain.tokens.slice(0, -2));
  assert.deepEqual(tagged.types.slice(0, -2), plain.types.slice(0, -2));
  assert.deepEqual(buildVocab(1024, tags), tagged);
});

test('user-defined tags need room and must be new pieces', () => {
  assert.throws(() => buildVocab(MIN_VOCAB_SIZE, ['<think>']), VocabError);
  assert.doesNotThrow(() => buildVocab(MIN_VOCAB_SIZE + 1, ['<think>']));
  assert.throws(() => buildVocab(1024, ['<think>', '<think>']), /duplicate/);
  assert.throws(() => buildVocab(1024, ['the']), /duplicate/);
  assert.throws(() => buildVocab(1024, ['']), VocabError);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chooseDefaultQuant, chooseProjector, findGroup, groupGgufFiles, isModelFile, parseGgufName, parseWhisperName, quantLabel, searchTermForFilename, type HubFile } from './gguf-files.js';
import { parseHubReference } from './client.js';
import { hubEndpoint } from './endpoint.js';

const file = (path: string, size = 100): HubFile => ({ path, size, sha256: 'a'.repeat(64), gitOid: null });

test('quant labels are read from the usual file name styles', () => {
  assert.equal(quantLabel('Llama-3.2-1B-Instruct-Q4_K_M'), 'Q4_K_M');
  assert.equal(quantLabel('qwen2.5-0.5b-instruct-q4_k_m'), 'Q4_K_M');
  assert.equal(quantLabel('Meta-Llama-3-8B-Instruct.Q8_0'), 'Q8_0');
  assert.equal(quantLabel('gemma-2b-it-IQ3_XXS'), 'IQ3_XXS');
  assert.equal(quantLabel('Qwen3-8B-UD-Q4_K_XL'), 'UD-Q4_K_XL');
  assert.equal(quantLabel('phi-2-f16'), 'F16');
  assert.equal(quantLabel('model-bf16'), 'BF16');
  assert.equal(quantLabel('Qwen2.5-7B'), null);
  assert.equal(quantLabel('model-Q4_0_4_4'), 'Q4_0_4_4');
});

test('split GGUF names parse into a group name and shard numbers', () => {
  const p = parseGgufName('Q4_K_M/Big-Model-Q4_K_M-00002-of-00003.gguf');
  assert.deepEqual(p, { path: 'Q4_K_M/Big-Model-Q4_K_M-00002-of-00003.gguf', stem: 'Big-Model-Q4_K_M', groupName: 'Q4_K_M/Big-Model-Q4_K_M.gguf', shard: { index: 2, count: 3 }, quant: 'Q4_K_M', projector: false });
  assert.equal(parseGgufName('README.md'), null);
  assert.equal(parseGgufName('model.gguf.part1of2'), null);
  assert.equal(parseGgufName('mmproj-model-f16.gguf')?.projector, true);
  // The quant can come from the folder alone.
  assert.equal(parseGgufName('Q5_K_M/model-00001-of-00002.gguf')?.quant, 'Q5_K_M');
});

test('shards group into one model; a group with a shard missing is incomplete', () => {
  const groups = groupGgufFiles([
    file('m-Q8_0-00002-of-00002.gguf', 20),
    file('m-Q8_0-00001-of-00002.gguf', 30),
    file('m-Q4_K_M-00001-of-00003.gguf'),
    file('m-Q4_K_M-00003-of-00003.gguf'),
    file('notes.txt'),
  ]);
  assert.deepEqual(groups.map((g) => [g.name, g.complete, g.files.length, g.tag]), [
    ['m-Q4_K_M.gguf', false, 2, 'Q4_K_M'],
    ['m-Q8_0.gguf', true, 2, 'Q8_0'],
  ]);
  const q8 = groups[1];
  assert.equal(q8?.primaryPath, 'm-Q8_0-00001-of-00002.gguf');
  assert.equal(q8?.totalBytes, 50);
  // The incomplete Q4_K_M is passed over for the complete Q8_0.
  assert.equal(chooseDefaultQuant(groups)?.name, 'm-Q8_0.gguf');
});

test('the default quant is Q4_K_M, then Q4_0, Q5_K_M, Q8_0, then the smallest 4-8 bit, then the smallest 16/32 bit', () => {
  const pick = (paths: [string, number][]): string | undefined => chooseDefaultQuant(paths.map(([p, s]) => file(p, s)))?.primaryPath;
  const all: [string, number][] = [['m-Q8_0.gguf', 8], ['m-Q5_K_M.gguf', 5], ['m-Q4_0.gguf', 4], ['m-Q4_K_M.gguf', 4], ['m-F16.gguf', 16], ['mmproj-m-f16.gguf', 1]];
  assert.equal(pick(all), 'm-Q4_K_M.gguf');
  assert.equal(pick(all.filter(([p]) => !p.includes('Q4_K_M'))), 'm-Q4_0.gguf');
  assert.equal(pick(all.filter(([p]) => !/Q4_/.test(p))), 'm-Q5_K_M.gguf');
  assert.equal(pick([['m-Q8_0.gguf', 8], ['m-F16.gguf', 16]]), 'm-Q8_0.gguf');
  assert.equal(pick([['m-Q6_K.gguf', 6], ['m-IQ4_XS.gguf', 4], ['m-Q2_K.gguf', 2]]), 'm-IQ4_XS.gguf');
  assert.equal(pick([['m-F32.gguf', 32], ['m-BF16.gguf', 16], ['m-Q2_K.gguf', 2]]), 'm-BF16.gguf');
  assert.equal(pick([['m-Q2_K.gguf', 2], ['weird.gguf', 3]]), 'm-Q2_K.gguf');
  // A projector alone is not a model.
  assert.equal(pick([['mmproj-m-f16.gguf', 1]]), undefined);
  assert.equal(chooseDefaultQuant([]), null);
});

test('a duplicate quant label makes tags from the file names', () => {
  const groups = groupGgufFiles([file('base-Q4_K_M.gguf'), file('instruct-Q4_K_M.gguf'), file('instruct-Q8_0.gguf')]);
  assert.deepEqual(groups.map((g) => g.tag), ['base-Q4_K_M', 'instruct-Q4_K_M', 'Q8_0']);
  assert.equal(findGroup(groups, 'q8_0')?.name, 'instruct-Q8_0.gguf');
  assert.equal(findGroup(groups, 'instruct-Q4_K_M.gguf')?.name, 'instruct-Q4_K_M.gguf');
  assert.equal(findGroup(groups, 'Q3_K_S'), null);
});

test('a pasted file name is searched by its stem without quant and shard suffix', () => {
  assert.equal(searchTermForFilename('Llama-3.2-1B-Instruct-Q4_K_M.gguf'), 'Llama-3.2-1B-Instruct');
  assert.equal(searchTermForFilename('Meta-Llama-3.1-8B-Instruct.Q8_0.gguf'), 'Meta-Llama-3.1-8B-Instruct');
  assert.equal(searchTermForFilename('Qwen3-235B-A22B-UD-Q4_K_XL-00001-of-00003.gguf'), 'Qwen3-235B-A22B');
  assert.equal(searchTermForFilename('model-i1-Q4_K_M.gguf'), 'model');
  assert.equal(searchTermForFilename('plain-name.gguf'), 'plain-name');
});

test('repo references in the forms people paste', () => {
  assert.deepEqual(parseHubReference('bartowski/Llama-3.2-1B-Instruct-GGUF'), { repo: 'bartowski/Llama-3.2-1B-Instruct-GGUF' });
  assert.deepEqual(parseHubReference('hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q8_0'), { repo: 'bartowski/Llama-3.2-1B-Instruct-GGUF', quant: 'Q8_0' });
  assert.deepEqual(parseHubReference('https://huggingface.co/o/r/blob/main/d/m-Q4_K_M.gguf?download=true'), { repo: 'o/r', revision: 'main', file: 'd/m-Q4_K_M.gguf' });
  assert.deepEqual(parseHubReference('o/r/m-Q4_K_M.gguf'), { repo: 'o/r', file: 'm-Q4_K_M.gguf' });
  assert.equal(parseHubReference('llama 3'), null);
  assert.equal(parseHubReference('m-Q4_K_M.gguf'), null);
  assert.equal(parseHubReference('../etc'), null);
});

test('the endpoint is SHOAL_HF_ENDPOINT, then HF_ENDPOINT, then huggingface.co', () => {
  assert.equal(hubEndpoint({}), 'https://huggingface.co');
  assert.equal(hubEndpoint({ HF_ENDPOINT: 'https://hf-mirror.com/' }), 'https://hf-mirror.com');
  assert.equal(hubEndpoint({ HF_ENDPOINT: 'https://hf-mirror.com', SHOAL_HF_ENDPOINT: 'http://127.0.0.1:9/' }), 'http://127.0.0.1:9');
  assert.equal(hubEndpoint({ SHOAL_HF_ENDPOINT: '', HF_ENDPOINT: 'http://x.test' }), 'http://x.test');
  assert.throws(() => hubEndpoint({ SHOAL_HF_ENDPOINT: 'ftp://x' }), /http or https/);
});

test('the projector of a vision repo: the one named, else F16, BF16, Q8_0, F32, else the smallest; none for a text repo', () => {
  const groups = (paths: [string, number][]) => groupGgufFiles(paths.map(([p, s]) => file(p, s)));
  const pick = (paths: [string, number][], selector?: string): string | undefined => chooseProjector(groups(paths), selector)?.primaryPath;
  const vision: [string, number][] = [['m-Q4_K_M.gguf', 4], ['mmproj-m-F32.gguf', 32], ['mmproj-m-Q8_0.gguf', 8], ['mmproj-m-BF16.gguf', 16], ['mmproj-m-F16.gguf', 16]];
  assert.equal(pick(vision), 'mmproj-m-F16.gguf');
  assert.equal(pick(vision.filter(([p]) => !p.includes('F16'))), 'mmproj-m-Q8_0.gguf');
  assert.equal(pick(vision, 'mmproj-m-F32.gguf'), 'mmproj-m-F32.gguf');
  assert.equal(pick(vision, 'bf16'), 'mmproj-m-BF16.gguf');
  assert.equal(pick([['m-Q4_K_M.gguf', 4], ['mmproj-b.gguf', 9], ['mmproj-a.gguf', 3]]), 'mmproj-a.gguf');
  // The model file is never taken for its projector, nor anything in a text-only repo.
  assert.equal(pick(vision, 'm-Q4_K_M.gguf'), undefined);
  assert.equal(pick([['m-Q4_K_M.gguf', 4]]), undefined);
});

test('whisper.cpp ggml files are speech models of one file each, tagged by their name; its Core ML encoders are not models', () => {
  assert.equal(parseWhisperName('ggml-base.en.bin'), 'base.en');
  assert.equal(parseWhisperName('models/ggml-large-v3-q5_0.bin'), 'large-v3-q5_0');
  assert.equal(parseWhisperName('ggml-base-encoder.mlmodelc.zip'), null);
  assert.equal(parseWhisperName('pytorch_model.bin'), null, 'a bin that is no ggml model');
  assert.equal(isModelFile('pytorch_model.bin'), false);
  assert.equal(isModelFile('model-Q4_K_M.gguf'), true);
  const groups = groupGgufFiles([file('ggml-tiny.bin', 75), file('ggml-base.en.bin', 142), file('ggml-large-v3-q5_0.bin', 1080), file('ggml-base-encoder.mlmodelc.zip'), file('README.md')]);
  assert.deepEqual(groups.map((g) => [g.tag, g.speech, g.quant, g.files.length]), [
    ['base.en', true, null, 1],
    ['large-v3-q5_0', true, 'Q5_0', 1],
    ['tiny', true, null, 1],
  ]);
  assert.equal(findGroup(groups, 'ggml-tiny.bin')?.tag, 'tiny');
  assert.equal(findGroup(groups, 'large-v3-q5_0')?.tag, 'large-v3-q5_0');
});

test('a repo of whisper models defaults to base, then base.en, then the smallest; a repo with GGUFs defaults to a GGUF', () => {
  assert.equal(chooseDefaultQuant([file('ggml-tiny.bin', 75), file('ggml-base.en.bin', 142), file('ggml-base.bin', 142)])?.tag, 'base');
  assert.equal(chooseDefaultQuant([file('ggml-tiny.bin', 75), file('ggml-base.en.bin', 142)])?.tag, 'base.en');
  assert.equal(chooseDefaultQuant([file('ggml-large-v3.bin', 3000), file('ggml-medium.bin', 1500)])?.tag, 'medium');
  assert.equal(chooseDefaultQuant([file('ggml-base.bin', 10), file('model-Q4_K_M.gguf', 1000)])?.tag, 'Q4_K_M');
});

test('a pasted whisper file path names the file', () => {
  assert.deepEqual(parseHubReference('ggerganov/whisper.cpp/ggml-base.en.bin'), { repo: 'ggerganov/whisper.cpp', file: 'ggml-base.en.bin' });
  assert.deepEqual(parseHubReference('https://huggingface.co/ggerganov/whisper.cpp/blob/main/ggml-tiny.bin'), { repo: 'ggerganov/whisper.cpp', revision: 'main', file: 'ggml-tiny.bin' });
});

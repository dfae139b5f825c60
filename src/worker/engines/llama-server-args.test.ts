import assert from 'node:assert/strict';
import { test } from 'node:test';
import { llamaServerArgs, parseServerHelp, type LlamaServerFeatures, type ServerArgsInput } from './llama-server-args.js';
import { rpcServerArgs } from './rpc-donor.js';

// Lines as the pinned llama-server prints them.
const NEW_HELP = `
-t,    --threads N                      number of CPU threads to use during generation (default: -1)
-c,    --ctx-size N                     size of the prompt context (default: 0, 0 = loaded from model)
-fit,  --fit [on|off]                   whether to adjust unset arguments to fit in device memory ('on' or
--kv-unified-per-slot N                 context limit per parallel slot (default: unset, behavior unchanged).
-cram, --cache-ram N                    set the maximum cache size in MiB (default: 8192, -1 - no limit, 0 -
-kvu,  --kv-unified, -no-kvu, --no-kv-unified
--ui,  --webui, --no-ui, --no-webui     whether to enable the Web UI (default: enabled)
--slots, --no-slots                     expose slots monitoring endpoint (default: enabled)
--jinja, --no-jinja                     whether to use jinja template engine for chat (default: enabled)
-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', default: 'auto')
-ctk,  --cache-type-k TYPE              KV cache data type for K
`;

// An older build: none of the optional flags, the web UI flag spelled the old way only.
const OLD_HELP = `
-c,    --ctx-size N                     size of the prompt context
--no-webui                              Disable the Web UI (default: enabled)
--kv-unified-per-slot-something N       not the flag we look for
-fa,   --flash-attn                     enable Flash Attention (default: disabled)
`;

const ALL: LlamaServerFeatures = { kvUnified: true, kvUnifiedPerSlot: true, noWebUiFlag: '--no-webui', cacheRam: true, fit: true, noSlots: true, jinja: true, flashAttnModes: true };
const NONE: LlamaServerFeatures = { kvUnified: false, kvUnifiedPerSlot: false, noWebUiFlag: null, cacheRam: false, fit: false, noSlots: false, jinja: false, flashAttnModes: false };

test('features are read from --help, flag by flag', () => {
  assert.deepEqual(parseServerHelp(NEW_HELP), ALL);
  assert.deepEqual(parseServerHelp(OLD_HELP), { ...NONE, noWebUiFlag: '--no-webui' });
  assert.deepEqual(parseServerHelp(''), NONE);
});

const INPUT: ServerArgsInput = {
  modelPath: '/models/m.gguf',
  port: 4321,
  threads: 2,
  contextTokens: 1024,
  parallel: 4,
  kvTokens: 2048,
  httpThreads: 10,
  gpuLayers: 0,
  rpcServers: [],
  tensorSplit: null,
  embeddings: false,
  kvCacheType: 'f16',
  flashAttention: 'auto',
};

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

test('the command line: loopback, explicit threads, slots sharing one KV budget capped per slot', () => {
  const args = llamaServerArgs(INPUT, ALL);
  assert.equal(flag(args, '--host'), '127.0.0.1');
  assert.equal(flag(args, '--port'), '4321');
  assert.equal(flag(args, '-t'), '2');
  assert.equal(flag(args, '-tb'), '2');
  assert.equal(flag(args, '--parallel'), '4');
  assert.equal(flag(args, '--threads-http'), '10');
  assert.equal(flag(args, '-c'), '2048');
  assert.ok(args.includes('--kv-unified'));
  assert.equal(flag(args, '--kv-unified-per-slot'), '1024');
  assert.equal(flag(args, '-ngl'), '0');
  assert.equal(flag(args, '--cache-ram'), '0');
  assert.equal(flag(args, '--fit'), 'off');
  for (const f of ['--no-webui', '--no-slots', '--jinja']) assert.ok(args.includes(f), f);
  for (const f of ['--rpc', '--tensor-split', '--embeddings']) assert.ok(!args.includes(f), f);
  // The API key is never on the command line, which every local user can read.
  assert.ok(!args.some((a) => /api-key/.test(a)));
});

test('the KV cache type and flash attention reach the command line as placement counted them', () => {
  const args = llamaServerArgs({ ...INPUT, kvCacheType: 'q8_0', flashAttention: 'on' }, ALL);
  assert.equal(flag(args, '-ctk'), 'q8_0');
  assert.equal(flag(args, '-ctv'), 'q8_0');
  assert.equal(flag(args, '-fa'), 'on');
  assert.equal(flag(llamaServerArgs(INPUT, ALL), '-fa'), 'auto');
  assert.equal(flag(llamaServerArgs({ ...INPUT, flashAttention: 'off' }, ALL), '-fa'), 'off');
  // An older build's bare switch: on is `-fa`, auto and off are its default (off).
  assert.ok(llamaServerArgs({ ...INPUT, flashAttention: 'on' }, NONE).includes('-fa'));
  assert.ok(!llamaServerArgs({ ...INPUT, flashAttention: 'auto' }, NONE).includes('-fa'));
  assert.equal(flag(llamaServerArgs(INPUT, NONE), '-ctk'), 'f16');
});

test('flags the build lacks are left out', () => {
  const args = llamaServerArgs(INPUT, NONE);
  for (const f of ['--kv-unified', '--kv-unified-per-slot', '--no-webui', '--no-ui', '--cache-ram', '--fit', '--no-slots', '--jinja']) assert.ok(!args.includes(f), f);
});

test('RPC donors are listed, split as asked', () => {
  const args = llamaServerArgs({ ...INPUT, rpcServers: ['127.0.0.1:5000', '127.0.0.1:5001'], tensorSplit: '1,1', gpuLayers: 999 }, ALL);
  assert.equal(flag(args, '--rpc'), '127.0.0.1:5000,127.0.0.1:5001');
  assert.equal(flag(args, '--tensor-split'), '1,1');
  assert.equal(flag(args, '-ngl'), '999');
});

test('embeddings: a batch holds a whole input', () => {
  const args = llamaServerArgs({ ...INPUT, embeddings: true }, ALL);
  assert.ok(args.includes('--embeddings'));
  assert.equal(flag(args, '-b'), '1024');
  assert.equal(flag(args, '-ub'), '1024');
});

test('the rpc donor listens on loopback only', () => {
  assert.deepEqual(rpcServerArgs({ port: 5000, threads: 3, fileCache: false }), ['-H', '127.0.0.1', '-p', '5000', '-t', '3']);
  assert.deepEqual(rpcServerArgs({ port: 5000, threads: 1, devices: ['CUDA0', 'CUDA1'], fileCache: true }), ['-H', '127.0.0.1', '-p', '5000', '-t', '1', '-d', 'CUDA0,CUDA1', '-c']);
});

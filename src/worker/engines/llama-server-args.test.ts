import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gpuComputeOf, llamaCppDeviceName, llamaServerArgs, partOffload, parseServerHelp, speculativeEnabled, type DraftFlags, type LlamaServerFeatures, type ServerArgsInput } from './llama-server-args.js';
import { ShoalError } from '../../common/errors.js';
import { donorDevices, rpcServerArgs } from './rpc-donor.js';

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
--spec-draft-threads, -td, --threads-draft N
--spec-draft-threads-batch, -tbd, --threads-batch-draft N
--spec-draft-n-max N                    number of tokens to draft for speculative decoding (default: 3)
--spec-draft-n-min N                    minimum number of draft tokens to use for speculative decoding
--spec-draft-device, -devd, --device-draft <dev1,dev2,..>
--spec-draft-ngl, -ngld, --gpu-layers-draft, --n-gpu-layers-draft N
--spec-draft-model, -md, --model-draft FNAME
--spec-type none,draft-simple,draft-eagle3,draft-mtp,draft-dflash,draft-dspark,ngram-simple,ngram-map-k,ngram-map-k4v,ngram-mod,ngram-cache
--draft, --draft-n, --draft-max N       the argument has been removed. use --spec-draft-n-max or
--draft-min, --draft-n-min N            the argument has been removed. use --spec-draft-n-min or
-mm,   --mmproj FILE                    path to a multimodal projector file. see tools/mtmd/README.md
--mmproj-auto, --no-mmproj, --no-mmproj-auto
--mmproj-offload, --no-mmproj-offload   whether to enable GPU offloading for multimodal projector (default:
-mmdev, --mmproj-device DEVICE          device to use for multimodal projector (none = don't offload, default:
`;

// An older build: none of the optional flags, the web UI flag spelled the old way only.
const OLD_HELP = `
-c,    --ctx-size N                     size of the prompt context
--no-webui                              Disable the Web UI (default: enabled)
--kv-unified-per-slot-something N       not the flag we look for
-fa,   --flash-attn                     enable Flash Attention (default: disabled)
`;

const NEW_DRAFT: DraftFlags = {
  model: '--spec-draft-model',
  type: '--spec-type',
  maxTokens: '--spec-draft-n-max',
  minTokens: '--spec-draft-n-min',
  gpuLayers: '--spec-draft-ngl',
  devices: '--spec-draft-device',
  threads: '--spec-draft-threads',
  threadsBatch: '--spec-draft-threads-batch',
};

const ALL: LlamaServerFeatures = { kvUnified: true, kvUnifiedPerSlot: true, noWebUiFlag: '--no-webui', cacheRam: true, fit: true, noSlots: true, jinja: true, flashAttnModes: true, draft: NEW_DRAFT, mmproj: true, mmprojDevice: true };
const NONE: LlamaServerFeatures = { kvUnified: false, kvUnifiedPerSlot: false, noWebUiFlag: null, cacheRam: false, fit: false, noSlots: false, jinja: false, flashAttnModes: false, draft: null, mmproj: false, mmprojDevice: false };

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
  devices: [],
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
  for (const f of ['--rpc', '--tensor-split', '--embeddings', '--device']) assert.ok(!args.includes(f), f);
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

// Placed parts as src/master/state/instances.ts records them (issue #15).
const TWO_GPUS = [
  { index: 0, layerCount: 14, tensorSplit: 14, estimatedBytes: 6e9 },
  { index: 1, layerCount: 13, tensorSplit: 14, estimatedBytes: 6e9 },
];

test('GPU device names are the pinned ggml ones, read from the backend tag', () => {
  assert.equal(gpuComputeOf('llama_server-cuda'), 'cuda');
  assert.equal(gpuComputeOf('rpc-vulkan'), 'vulkan');
  assert.equal(gpuComputeOf('llama_server-metal'), 'metal');
  assert.equal(gpuComputeOf('llama_server-cpu'), null);
  assert.equal(gpuComputeOf('llama_cpp-cpu'), null);
  assert.equal(llamaCppDeviceName('cuda', 1), 'CUDA1');
  assert.equal(llamaCppDeviceName('vulkan', 0), 'Vulkan0');
  assert.equal(llamaCppDeviceName('metal', 0), 'MTL0');
});

test('a part on a CPU backend keeps its command line; a GPU part offloads to its planned devices', () => {
  assert.equal(partOffload({ backend: 'llama_server-cpu' }), null);
  assert.equal(partOffload({ backend: 'llama_server-cpu', gpuLayers: 10, devices: TWO_GPUS }), null);
  // One planned GPU, the plan's layer count; no split over one device.
  assert.deepEqual(partOffload({ backend: 'llama_server-cuda', gpuLayers: 20, devices: [TWO_GPUS[1]!] }), {
    gpuLayers: 20,
    devices: ['CUDA1'],
    tensorSplit: null,
  });
  // Two GPUs: both named, split by their weights.
  assert.deepEqual(partOffload({ backend: 'llama_server-cuda', gpuLayers: 28, devices: TWO_GPUS }), { gpuLayers: 28, devices: ['CUDA0', 'CUDA1'], tensorSplit: '14,14' });
  // The plan says neither count nor devices: all layers, the binary's choice of device.
  assert.deepEqual(partOffload({ backend: 'llama_server-vulkan' }), { gpuLayers: 999, devices: [], tensorSplit: null });
});

test('a GPU part\'s offload reaches the llama-server command line', () => {
  const offload = partOffload({ backend: 'llama_server-cuda', gpuLayers: 28, devices: TWO_GPUS });
  assert.ok(offload);
  const args = llamaServerArgs({ ...INPUT, gpuLayers: offload.gpuLayers, devices: offload.devices, tensorSplit: offload.tensorSplit }, ALL);
  assert.equal(flag(args, '-ngl'), '28');
  assert.equal(flag(args, '--device'), 'CUDA0,CUDA1');
  assert.equal(flag(args, '--tensor-split'), '14,14');
  assert.ok(!args.includes('--rpc'));
});

test('an rpc donor serves its planned GPUs; a CPU part on a GPU build stays on the CPU', () => {
  assert.deepEqual(donorDevices({ backend: 'rpc-cuda', devices: TWO_GPUS }, 'cuda'), ['CUDA0', 'CUDA1']);
  assert.deepEqual(donorDevices({ backend: 'rpc-metal' }, 'metal'), []);
  assert.deepEqual(donorDevices({ backend: 'rpc-cpu' }, 'cuda'), ['CPU']);
  assert.deepEqual(donorDevices({ backend: 'rpc-cpu' }, 'cpu'), []);
  // The driver's local donor follows the driver's placement.
  assert.deepEqual(donorDevices({ backend: 'llama_server-vulkan', devices: [TWO_GPUS[1]!] }, 'vulkan'), ['Vulkan1']);
  assert.deepEqual(rpcServerArgs({ port: 5000, threads: 2, devices: donorDevices({ backend: 'rpc-cuda', devices: TWO_GPUS }, 'cuda'), fileCache: false }), [
    '-H', '127.0.0.1', '-p', '5000', '-t', '2', '-d', 'CUDA0,CUDA1',
  ]);
});

test('draft flags: the newer --spec-draft-* spelling wins over the removed one; an old build keeps its own', () => {
  assert.deepEqual(parseServerHelp(NEW_HELP).draft, NEW_DRAFT);
  const old = parseServerHelp(`-md,   --model-draft FNAME\n--draft-max, --draft, --draft-n N\n--draft-min, --draft-n-min N\n-ngld, --gpu-layers-draft N\n`);
  assert.deepEqual(old.draft, { model: '--model-draft', type: null, maxTokens: '--draft-max', minTokens: '--draft-min', gpuLayers: '--gpu-layers-draft', devices: null, threads: null, threadsBatch: null });
});

test('a draft model goes on the command line with its knobs, threads and the target\'s devices', () => {
  const cpu = llamaServerArgs({ ...INPUT, draft: { modelPath: '/models/d.gguf', maxTokens: 16, minTokens: 2 } }, ALL);
  assert.equal(flag(cpu, '--spec-draft-model'), '/models/d.gguf');
  // The pinned build loads a draft but only drafts with it when the type says so.
  assert.equal(flag(cpu, '--spec-type'), 'draft-simple');
  assert.equal(flag(cpu, '--spec-draft-n-max'), '16');
  assert.equal(flag(cpu, '--spec-draft-n-min'), '2');
  assert.equal(flag(cpu, '--spec-draft-ngl'), '0');
  assert.equal(flag(cpu, '--spec-draft-threads'), '2');
  assert.equal(flag(cpu, '--spec-draft-threads-batch'), '2');
  assert.ok(!cpu.includes('--spec-draft-device'));
  const gpu = llamaServerArgs({ ...INPUT, gpuLayers: 20, devices: ['CUDA1'], draft: { modelPath: '/models/d.gguf' } }, ALL);
  assert.equal(flag(gpu, '--spec-draft-ngl'), '999');
  assert.equal(flag(gpu, '--spec-draft-device'), 'CUDA1');
  for (const f of ['--spec-draft-n-max', '--spec-draft-n-min']) assert.ok(!gpu.includes(f), f);
  // No draft: none of its flags.
  assert.ok(!llamaServerArgs(INPUT, ALL).some((a) => a.startsWith('--spec-')));
});

test('a draft on a build without draft flags is refused with what to do', () => {
  const refused = (features: LlamaServerFeatures, draft: NonNullable<ServerArgsInput['draft']>, message: RegExp): void => {
    assert.throws(
      () => llamaServerArgs({ ...INPUT, draft }, features),
      (error: unknown) => error instanceof ShoalError && error.code === 'CAPABILITY_MISSING' && message.test(error.message),
    );
  };
  refused(NONE, { modelPath: '/d.gguf' }, /no draft-model flag.*shoal doctor --fix.*runtime\.speculative/);
  refused({ ...ALL, draft: { ...NEW_DRAFT, minTokens: null } }, { modelPath: '/d.gguf', minTokens: 1 }, /draft_min/);
});

test('SHOAL_SPECULATIVE=0 turns drafts off; unset or anything else leaves them on', () => {
  assert.equal(speculativeEnabled({}), true);
  assert.equal(speculativeEnabled({ SHOAL_SPECULATIVE: '1' }), true);
  for (const off of ['0', 'false', 'OFF', ' no ']) assert.equal(speculativeEnabled({ SHOAL_SPECULATIVE: off }), false, off);
});

test('a projector loads with --mmproj, beside the model share it belongs to', () => {
  // No projector: none of its flags.
  assert.ok(!llamaServerArgs(INPUT, ALL).some((a) => a.includes('mmproj')));
  // On the CPU: kept off the GPU llama-server would otherwise pick, as placement counted no device memory for it.
  const cpu = llamaServerArgs({ ...INPUT, projectorPath: '/models/p.gguf' }, ALL);
  assert.equal(flag(cpu, '--mmproj'), '/models/p.gguf');
  assert.ok(cpu.includes('--no-mmproj-offload'));
  assert.ok(!cpu.includes('--mmproj-device'));
  // On the part's GPUs: the first one.
  const gpu = llamaServerArgs({ ...INPUT, gpuLayers: 999, devices: ['CUDA1', 'CUDA2'], projectorPath: '/models/p.gguf' }, ALL);
  assert.equal(flag(gpu, '--mmproj-device'), 'CUDA1');
  assert.ok(!gpu.includes('--no-mmproj-offload'));
  // A GPU part naming no devices: the binary's choice; a build without --mmproj-device: the same.
  assert.ok(!llamaServerArgs({ ...INPUT, gpuLayers: 999, projectorPath: '/p.gguf' }, ALL).some((a) => a === '--mmproj-device' || a === '--no-mmproj-offload'));
  assert.ok(!llamaServerArgs({ ...INPUT, gpuLayers: 999, devices: ['CUDA0'], projectorPath: '/p.gguf' }, { ...ALL, mmprojDevice: false }).includes('--mmproj-device'));
  // A pooled driver: its other devices are RPC donors, so the projector stays on its own CPU.
  const pooled = llamaServerArgs({ ...INPUT, rpcServers: ['127.0.0.1:5000'], tensorSplit: '1', gpuLayers: 999, projectorPath: '/p.gguf' }, ALL);
  assert.ok(pooled.includes('--no-mmproj-offload'));
});

test('a projector on a build without --mmproj is refused with what to do', () => {
  assert.throws(
    () => llamaServerArgs({ ...INPUT, projectorPath: '/p.gguf' }, NONE),
    (error: unknown) => error instanceof ShoalError && error.code === 'CAPABILITY_MISSING' && /--mmproj.*shoal doctor --fix/.test(error.message),
  );
});

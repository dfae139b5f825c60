import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deriveBackends, parseBackendList, parseBackendTag, sortBackendTags, type BackendFacts } from './backends.js';

const NOT_BUILT = { built: false, runs: false, compute: null };
const BUILT_CPU = { built: true, runs: true, compute: 'cpu' as const };

function facts(overrides: Partial<BackendFacts> = {}): BackendFacts {
  return {
    llamaCpp: { loaded: true, error: null, supportedGpuTypes: [], activeGpu: null },
    engines: { 'llama-server': NOT_BUILT, 'ggml-rpc-server': NOT_BUILT },
    gpuRequest: 'auto',
    override: null,
    nvidiaDevicePresent: false,
    ...overrides,
  };
}

test('a CPU-only machine with node-llama-cpp advertises llama_cpp-cpu alone', () => {
  const result = deriveBackends(facts());
  assert.deepEqual(result.tags, ['llama_cpp-cpu']);
  assert.deepEqual(result.detected, ['llama_cpp-cpu']);
  assert.equal(result.source, 'detected');
  assert.deepEqual(result.conflicts, []);
});

test('built and running engines add llama_server and rpc tags for their compute', () => {
  const result = deriveBackends(facts({ engines: { 'llama-server': BUILT_CPU, 'ggml-rpc-server': BUILT_CPU } }));
  assert.deepEqual(result.tags, ['llama_cpp-cpu', 'llama_server-cpu', 'rpc-cpu']);
});

test('an engine that is built but does not run is not advertised', () => {
  const result = deriveBackends(facts({ engines: { 'llama-server': { built: true, runs: false, compute: 'cpu' }, 'ggml-rpc-server': BUILT_CPU } }));
  assert.deepEqual(result.tags, ['llama_cpp-cpu', 'rpc-cpu']);
});

test('a CUDA machine advertises CUDA before CPU, for every engine built for it', () => {
  const result = deriveBackends(
    facts({
      llamaCpp: { loaded: true, supportedGpuTypes: ['cuda', 'vulkan'], activeGpu: 'cuda' },
      engines: { 'llama-server': { built: true, runs: true, compute: 'cuda' }, 'ggml-rpc-server': { built: true, runs: true, compute: 'cuda' } },
    }),
  );
  assert.deepEqual(result.tags, ['llama_cpp-cuda', 'llama_cpp-vulkan', 'llama_cpp-cpu', 'llama_server-cuda', 'rpc-cuda']);
  assert.deepEqual(result.conflicts, []);
});

test('the active GPU counts even when the supported list misses it (Metal)', () => {
  const result = deriveBackends(facts({ llamaCpp: { loaded: true, supportedGpuTypes: [], activeGpu: 'metal' } }));
  assert.deepEqual(result.tags, ['llama_cpp-metal', 'llama_cpp-cpu']);
});

test('--gpu false drops GPU tags; --gpu vulkan keeps only Vulkan', () => {
  const gpuBox = { loaded: true, supportedGpuTypes: ['cuda', 'vulkan'] as const, activeGpu: 'cuda' as const };
  assert.deepEqual(deriveBackends(facts({ llamaCpp: { ...gpuBox, supportedGpuTypes: [...gpuBox.supportedGpuTypes] }, gpuRequest: false })).tags, ['llama_cpp-cpu']);
  const vulkan = deriveBackends(facts({ llamaCpp: { ...gpuBox, supportedGpuTypes: [...gpuBox.supportedGpuTypes], activeGpu: 'vulkan' }, gpuRequest: 'vulkan' }));
  assert.deepEqual(vulkan.tags, ['llama_cpp-vulkan', 'llama_cpp-cpu']);
  assert.deepEqual(vulkan.conflicts, []);
});

test('a forced --gpu cuda without CUDA is an error with a remediation', () => {
  const result = deriveBackends(facts({ gpuRequest: 'cuda' }));
  assert.deepEqual(result.tags, ['llama_cpp-cpu']);
  assert.equal(result.conflicts.length, 1);
  const conflict = result.conflicts[0];
  assert.equal(conflict?.id, 'backends.gpu');
  assert.equal(conflict?.level, 'error');
  assert.match(conflict?.summary ?? '', /--gpu cuda .* CUDA is not usable .*available: none/);
  assert.match(conflict?.remediation ?? '', /NVIDIA driver.*--gpu auto/);
});

test('a forced --gpu vulkan says how to install Vulkan', () => {
  const result = deriveBackends(facts({ gpuRequest: 'vulkan', llamaCpp: { loaded: true, supportedGpuTypes: ['cuda'], activeGpu: null } }));
  const conflict = result.conflicts.find((c) => c.id === 'backends.gpu');
  assert.match(conflict?.summary ?? '', /available: CUDA/);
  assert.match(conflict?.remediation ?? '', /apt-get install -y mesa-vulkan-drivers libvulkan1/);
});

test('an NVIDIA device that CUDA cannot use is a warning', () => {
  const result = deriveBackends(facts({ nvidiaDevicePresent: true }));
  assert.deepEqual(
    result.conflicts.map((c) => [c.id, c.level]),
    [['backends.nvidia', 'warn']],
  );
  assert.deepEqual(deriveBackends(facts({ nvidiaDevicePresent: true, gpuRequest: false })).conflicts, []);
});

test('node-llama-cpp failing to load is an error and leaves nothing from it', () => {
  const result = deriveBackends(facts({ llamaCpp: { loaded: false, error: 'NoBinaryFoundError', supportedGpuTypes: [], activeGpu: null } }));
  assert.deepEqual(result.tags, []);
  assert.equal(result.conflicts[0]?.level, 'error');
  assert.equal(result.conflicts[0]?.detail, 'NoBinaryFoundError');
});

test('a configured list replaces detection and flags what was not detected or is not a tag', () => {
  const result = deriveBackends(facts({ override: ['rpc-cpu', 'llama_cpp-cpu', 'llama_cpp-cuda', 'gpu-fast'] }));
  assert.equal(result.source, 'config');
  assert.deepEqual(result.tags, ['llama_cpp-cuda', 'llama_cpp-cpu', 'rpc-cpu']);
  assert.deepEqual(result.detected, ['llama_cpp-cpu']);
  const byId = new Map(result.conflicts.map((c) => [c.id, c]));
  assert.equal(byId.get('backends.config.rpc-cpu')?.level, 'warn');
  assert.match(byId.get('backends.config.rpc-cpu')?.remediation ?? '', /shoal doctor --fix/);
  assert.equal(byId.get('backends.config.llama_cpp-cuda')?.level, 'warn');
  assert.match(byId.get('backends.config.llama_cpp-cuda')?.remediation ?? '', /NVIDIA/);
  assert.equal(byId.get('backends.config.gpu-fast')?.level, 'error');
  assert.equal(byId.has('backends.config.llama_cpp-cpu'), false);
});

test('a configured list can narrow detection without complaint', () => {
  const result = deriveBackends(facts({ engines: { 'llama-server': BUILT_CPU, 'ggml-rpc-server': BUILT_CPU }, override: ['rpc-cpu'] }));
  assert.deepEqual(result.tags, ['rpc-cpu']);
  assert.deepEqual(result.conflicts, []);
});

test('tag parsing, list parsing and ordering', () => {
  assert.equal(parseBackendTag('llama_server-cuda'), 'llama_server-cuda');
  assert.equal(parseBackendTag(' rpc-cpu '), 'rpc-cpu');
  assert.equal(parseBackendTag('llama_cpp-rocm'), null);
  assert.equal(parseBackendTag('ollama-cpu'), null);
  assert.deepEqual(parseBackendList('llama_cpp-cpu, rpc-cpu,,  llama_server-cpu '), ['llama_cpp-cpu', 'rpc-cpu', 'llama_server-cpu']);
  assert.deepEqual(parseBackendList('  '), []);
  assert.deepEqual(sortBackendTags(['rpc-cpu', 'llama_cpp-cpu', 'llama_cpp-metal', 'rpc-cpu', 'llama_server-vulkan']), [
    'llama_cpp-metal',
    'llama_cpp-cpu',
    'llama_server-vulkan',
    'rpc-cpu',
  ]);
});

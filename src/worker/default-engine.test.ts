import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../common/errors.js';
import { chooseDefaultEngine, parseEngineRequest } from './default-engine.js';

test('auto serves the default model through llama-server when it is built and the node computes on the CPU', () => {
  const cpu = { requested: 'auto', llamaServerBuilt: true, gpu: false, gpuPresent: true } as const;
  assert.equal(chooseDefaultEngine(cpu).engine, 'llama_server');
  assert.equal(chooseDefaultEngine({ ...cpu, gpu: 'auto', gpuPresent: false }).engine, 'llama_server');
  // Not built: node-llama-cpp, and the reason says how to build it.
  const unbuilt = chooseDefaultEngine({ ...cpu, llamaServerBuilt: false });
  assert.equal(unbuilt.engine, 'llama_cpp');
  assert.match(unbuilt.reason, /shoal doctor --fix/);
  // A GPU node-llama-cpp would use beats the CPU-only managed llama-server.
  assert.equal(chooseDefaultEngine({ ...cpu, gpu: 'auto', gpuPresent: true }).engine, 'llama_cpp');
  assert.equal(chooseDefaultEngine({ ...cpu, gpu: 'cuda', gpuPresent: false }).engine, 'llama_cpp');
  // A llama-server built for the GPU this node has runs on it, and wins; --gpu false keeps the CPU rule.
  const onGpu = chooseDefaultEngine({ ...cpu, gpu: 'auto', gpuPresent: true, llamaServerOnGpu: true });
  assert.equal(onGpu.engine, 'llama_server');
  assert.match(onGpu.reason, /GPU/);
  assert.equal(chooseDefaultEngine({ ...cpu, gpu: false, gpuPresent: true, llamaServerOnGpu: true }).engine, 'llama_server');
});

test('--engine forces one engine; llama_server without the build fails the start with what to do', () => {
  const base = { llamaServerBuilt: true, gpu: 'auto', gpuPresent: true } as const;
  assert.equal(chooseDefaultEngine({ ...base, requested: 'llama_cpp', gpu: false }).engine, 'llama_cpp');
  assert.equal(chooseDefaultEngine({ ...base, requested: 'llama_server' }).engine, 'llama_server');
  assert.throws(
    () => chooseDefaultEngine({ ...base, requested: 'llama_server', llamaServerBuilt: false }),
    (e: unknown) => e instanceof ShoalError && e.code === 'MODEL_FAILED' && /shoal doctor --fix/.test(e.message),
  );
  assert.equal(parseEngineRequest('llama_cpp'), 'llama_cpp');
  assert.throws(() => parseEngineRequest('vllm'), (e: unknown) => e instanceof ShoalError && e.code === 'BAD_REQUEST' && /auto, llama_server, llama_cpp/.test(e.message));
});

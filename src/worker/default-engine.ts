// Which engine serves the node's own default model: the managed llama-server when this node has it
// built and it can use the hardware node-llama-cpp would (the CPU, or a GPU it was built for), else
// node-llama-cpp in its runner child. Measured on 2 cores, the
// managed llama-server decodes at ~0.95x a hand-launched one where the runner child gets 0.81x (200M
// model) and 0.26x (20M model, 2 threads): node-llama-cpp's prebuilt binaries keep no thread pool.

import { ShoalError } from '../common/errors.js';
import type { GpuChoice } from './runner/protocol.js';

/** `--engine` / `SHOAL_ENGINE`: `auto` picks as below; the others force one engine. */
export const ENGINE_REQUESTS = ['auto', 'llama_server', 'llama_cpp'] as const;
export type EngineRequest = (typeof ENGINE_REQUESTS)[number];

export interface DefaultEngine {
  engine: 'llama_server' | 'llama_cpp';
  /** Why, for the start log line. */
  reason: string;
}

export function parseEngineRequest(value: string): EngineRequest {
  const found = ENGINE_REQUESTS.find((request) => request === value);
  if (found === undefined) throw new ShoalError('BAD_REQUEST', `--engine (or SHOAL_ENGINE) must be ${ENGINE_REQUESTS.join(', ')}, got '${value}'`, { param: 'engine' });
  return found;
}

/**
 * The engine for the default model. A llama-server built for this node's GPU runs on it with every
 * layer offloaded (engine-factory.ts `servedByLlamaServer`) and is preferred; a CPU-built one does
 * not use the GPU, so on a node whose GPU node-llama-cpp would use, node-llama-cpp is the faster choice.
 */
export function chooseDefaultEngine(input: {
  requested: EngineRequest;
  llamaServerBuilt: boolean;
  gpu: GpuChoice;
  /** node-llama-cpp loads a GPU build here (src/worker/gpus.ts: the node advertises a `llama_cpp-<gpu>` tag). */
  gpuPresent: boolean;
  /** The managed engines were built for a GPU compute a detected device has (default false). */
  llamaServerOnGpu?: boolean;
}): DefaultEngine {
  const { requested, llamaServerBuilt, gpu, gpuPresent } = input;
  if (requested === 'llama_cpp') return { engine: 'llama_cpp', reason: 'the in-process engine was asked for (--engine llama_cpp)' };
  if (requested === 'llama_server') {
    if (!llamaServerBuilt) throw new ShoalError('MODEL_FAILED', '--engine llama_server needs llama-server and ggml-rpc-server built: run `shoal doctor --fix`, or start with --engine auto');
    return { engine: 'llama_server', reason: 'llama-server was asked for (--engine llama_server)' };
  }
  if (!llamaServerBuilt) return { engine: 'llama_cpp', reason: 'llama-server is not built on this node (`shoal doctor --fix` builds it)' };
  if (gpu !== false && input.llamaServerOnGpu === true) return { engine: 'llama_server', reason: "llama-server is built for this node's GPU and runs the model on it" };
  if (gpu !== false && (gpu !== 'auto' || gpuPresent)) {
    return { engine: 'llama_cpp', reason: `the managed llama-server runs on the CPU and node-llama-cpp can use this node's GPU (--gpu ${gpu})` };
  }
  return { engine: 'llama_server', reason: 'llama-server is built here and decodes faster than the in-process engine on the CPU' };
}

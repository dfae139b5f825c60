// Synthetic facts, cards and nodes for the placement unit tests (not a test file itself). Round
// numbers in MiB so the expected arithmetic can be worked by hand in the tests' comments.

import type { NodeId } from '../common/ids.js';
import { ModelCard, type ModelCardInput } from '../models/cards/card.js';
import type { GgufFacts } from '../models/cards/gguf-facts.js';
import type { ClusterNode, PlannerGpu } from './nodes.js';

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** A valid, distinct node id per n; nodeId(0) < nodeId(1) < ... */
export function nodeId(n: number): NodeId {
  return `12D3KooW${'P'.repeat(42)}${BASE58[Math.floor(n / 58) % 58]}${BASE58[n % 58]}` as NodeId;
}

/**
 * "Model A": 32 layers of 100 MiB, embeddings 64 MiB, output head 128 MiB (3392 MiB of weights);
 * 32 heads, 8 KV heads of 128 (GQA): KV = 32 × (128 + 128) × 8 × 2 B = 128 KiB per token at f16.
 */
export function factsA(overrides: Partial<GgufFacts> = {}): GgufFacts {
  const blockCount = overrides.blockCount ?? 32;
  return {
    architecture: 'llama',
    blockCount,
    headCount: 32,
    headCountKv: 8,
    kvHeadsPerLayer: new Array<number>(blockCount).fill(8),
    embeddingLength: 4096,
    trainedContext: 8192,
    keyLength: 128,
    valueLength: 128,
    vocabSize: 32000,
    fileBytes: (blockCount * 100 + 64 + 128) * MiB + 1_000_000,
    tensorBytes: (blockCount * 100 + 64 + 128) * MiB,
    layerBytes: new Array<number>(blockCount).fill(100 * MiB),
    embeddingBytes: 64 * MiB,
    outputBytes: 128 * MiB,
    outputTied: false,
    ...overrides,
  };
}

export const ALL_TEST_BACKENDS = ['llama_cpp-cpu', 'llama_cpp-cuda', 'llama_server-cpu', 'llama_server-cuda', 'rpc-cpu', 'rpc-cuda'];

/** One slot unless `runtime` is overridden, so the hand-worked arithmetic stays at × 1 sequence. */
export function card(overrides: Partial<ModelCardInput> = {}): ModelCard {
  return ModelCard.parse({
    id: 'test/model-a',
    name: 'Model A',
    source: { kind: 'file', path: '/models/a.gguf' },
    tasks: ['chat'],
    compatible_backends: ALL_TEST_BACKENDS,
    backend_preference: [],
    runtime: { parallel: 1 },
    ...overrides,
  } satisfies ModelCardInput);
}

/** A reported node offering every test backend unless told otherwise. */
export function node(n: number, freeBytes: number | null, extra: Partial<ClusterNode> = {}): ClusterNode {
  return { nodeId: nodeId(n), freeBytes, backends: freeBytes === null ? null : ALL_TEST_BACKENDS, ...extra };
}

/** One fake GPU as placement sees it (CUDA, discrete, unless told otherwise). */
export function gpu(index: number, freeBytes: number, extra: Partial<PlannerGpu> = {}): PlannerGpu {
  return { index, name: `Test GPU ${index}`, compute: 'cuda', freeBytes, unifiedMemory: false, ...extra };
}

/** The test backends plus Metal and Vulkan ones, for mixed clusters. */
export const MIXED_TEST_BACKENDS = [...ALL_TEST_BACKENDS, 'llama_cpp-metal', 'llama_server-metal', 'rpc-metal', 'llama_server-vulkan', 'rpc-vulkan'];

/** A node with NVIDIA GPUs of the given free VRAM (1x24 GB: `[24 * GiB]`, 2x12 GB: `[12 * GiB, 12 * GiB]`). */
export function cudaNode(n: number, freeBytes: number, vram: readonly number[], extra: Partial<ClusterNode> = {}): ClusterNode {
  return node(n, freeBytes, { gpus: vram.map((bytes, i) => gpu(i, bytes)), ...extra });
}

/** An Apple silicon node: one Metal device whose memory is the system RAM (`vramFree` is its working-set limit). */
export function appleNode(n: number, freeBytes: number, vramFree: number, extra: Partial<ClusterNode> = {}): ClusterNode {
  return node(n, freeBytes, { backends: MIXED_TEST_BACKENDS, gpus: [gpu(0, vramFree, { name: 'Apple M2', compute: 'metal', unifiedMemory: true })], ...extra });
}

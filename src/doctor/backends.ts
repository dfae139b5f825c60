// The backend tags (`<engine>-<compute>`) a node advertises, derived from what was detected, and the
// conflicts between what the node is asked to do and what it can do. Pure: facts in, tags out.

import type { GpuRequest, GpuType } from './hardware.js';
import type { EngineCompute, EngineName } from './engines.js';
import type { Check } from './report.js';

export const BACKEND_ENGINES = ['llama_cpp', 'llama_server', 'rpc', 'whisper'] as const;
export type BackendEngine = (typeof BACKEND_ENGINES)[number];
const COMPUTES: readonly EngineCompute[] = ['cuda', 'vulkan', 'metal', 'cpu'];
export type BackendTag = `${BackendEngine}-${EngineCompute}`;

export function parseBackendTag(text: string): BackendTag | null {
  const match = /^(llama_cpp|llama_server|rpc|whisper)-(cpu|cuda|vulkan|metal)$/.exec(text.trim());
  return match ? (`${match[1]}-${match[2]}` as BackendTag) : null;
}

/** A comma- or space-separated list of tags (`--backends`, SHOAL_BACKENDS); blanks ignored. */
export function parseBackendList(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

/** Orders tags: engine (llama_cpp, llama_server, rpc), then compute (GPUs first, CPU last); no duplicates. */
export function sortBackendTags(tags: Iterable<BackendTag>): BackendTag[] {
  const rank = (tag: BackendTag): number => {
    const [engine, compute] = tag.split('-') as [BackendEngine, EngineCompute];
    return BACKEND_ENGINES.indexOf(engine) * 10 + COMPUTES.indexOf(compute);
  };
  return [...new Set(tags)].sort((a, b) => rank(a) - rank(b));
}

/** What backend derivation needs to know about this node. */
export interface BackendFacts {
  llamaCpp: {
    /** node-llama-cpp's prebuilt binary loaded. */
    loaded: boolean;
    error?: string | null;
    /** GPU types its prebuilt binaries support here (drivers and libraries present). */
    supportedGpuTypes: GpuType[];
    /** The GPU type it actually loaded with, null for CPU. */
    activeGpu: GpuType | null;
  };
  /** Each managed engine binary: whether it is built and whether it ran (`--version`), and its compute. */
  engines: Record<EngineName, { built: boolean; runs: boolean; compute: EngineCompute | null }>;
  /** `--gpu` (default auto). */
  gpuRequest: GpuRequest;
  /** A configured list of tags that replaces the detected ones, when given. */
  override: string[] | null;
  /** Hardware hints for a GPU the engines cannot use. */
  nvidiaDevicePresent?: boolean;
  /** The whisper.cpp binding (@fugood/whisper.node) loaded: speech-to-text models run here on the CPU. */
  whisperLoaded?: boolean;
}

export interface BackendDerivation {
  /** What this node advertises. */
  tags: BackendTag[];
  /** What detection found, before any override. */
  detected: BackendTag[];
  /** Where the tags came from. */
  source: 'detected' | 'config';
  /** Problems found along the way, as report checks. */
  conflicts: Check[];
}

const GPU_LABEL: Record<GpuType, string> = { cuda: 'CUDA', vulkan: 'Vulkan', metal: 'Metal' };

/** How to make a GPU type usable, for a remediation line. */
export function gpuRemediation(type: GpuType): string {
  switch (type) {
    case 'cuda':
      return 'install the NVIDIA driver and CUDA runtime (nvidia-smi must list the GPU), or start with --gpu auto';
    case 'vulkan':
      return 'install a Vulkan driver and loader (Debian: sudo apt-get install -y mesa-vulkan-drivers libvulkan1), or start with --gpu auto';
    case 'metal':
      return 'Metal is only available on macOS; start with --gpu auto';
  }
}

function overrideRemediation(tag: BackendTag): string {
  const [engine, compute] = tag.split('-') as [BackendEngine, EngineCompute];
  if (engine === 'whisper') return 'reinstall dependencies (npm ci) so the whisper.cpp binding loads, or remove the tag from the configured list';
  if (engine !== 'llama_cpp') return 'build the engines with shoal doctor --fix, or remove the tag from the configured list';
  if (compute === 'cpu') return 'reinstall dependencies (npm ci) so node-llama-cpp loads, or remove the tag from the configured list';
  return gpuRemediation(compute);
}

export function deriveBackends(facts: BackendFacts): BackendDerivation {
  const detected = new Set<BackendTag>();
  const conflicts: Check[] = [];

  // llama_cpp: the CPU backend whenever the prebuilt loads, plus each GPU type it can use. A forced
  // GPU narrows the GPU side to that type; --gpu false drops GPUs.
  if (facts.llamaCpp.loaded) {
    detected.add('llama_cpp-cpu');
    const usable = new Set<GpuType>(facts.llamaCpp.supportedGpuTypes);
    if (facts.llamaCpp.activeGpu) usable.add(facts.llamaCpp.activeGpu);
    for (const type of usable) {
      if (facts.gpuRequest === false) continue;
      if (facts.gpuRequest !== 'auto' && facts.gpuRequest !== type) continue;
      detected.add(`llama_cpp-${type}`);
    }
  } else {
    conflicts.push({
      id: 'backends.llama_cpp',
      level: 'error',
      summary: 'node-llama-cpp did not load: this node cannot run models',
      ...(facts.llamaCpp.error ? { detail: facts.llamaCpp.error } : {}),
      remediation: 'reinstall dependencies (npm ci) on a supported platform (Linux x64/arm64, macOS)',
    });
  }

  if (facts.gpuRequest !== 'auto' && facts.gpuRequest !== false) {
    const type = facts.gpuRequest;
    const works = facts.llamaCpp.loaded && (facts.llamaCpp.activeGpu === type || facts.llamaCpp.supportedGpuTypes.includes(type));
    if (!works) {
      const available = facts.llamaCpp.supportedGpuTypes.map((t) => GPU_LABEL[t]).join(', ') || 'none';
      conflicts.push({
        id: 'backends.gpu',
        level: 'error',
        summary: `--gpu ${type} was asked for, but ${GPU_LABEL[type]} is not usable on this node (GPU types available: ${available})`,
        remediation: gpuRemediation(type),
      });
    }
  }

  if (facts.nvidiaDevicePresent && facts.llamaCpp.loaded && !facts.llamaCpp.supportedGpuTypes.includes('cuda') && facts.gpuRequest !== false) {
    conflicts.push({
      id: 'backends.nvidia',
      level: 'warn',
      summary: 'an NVIDIA device is present but CUDA is not usable: models run on the CPU',
      remediation: gpuRemediation('cuda'),
    });
  }

  // Managed engines: advertised when their binary is built and runs.
  const managed: Array<[EngineName, BackendEngine]> = [
    ['llama-server', 'llama_server'],
    ['ggml-rpc-server', 'rpc'],
  ];
  for (const [name, engine] of managed) {
    const state = facts.engines[name];
    if (state.built && state.runs && state.compute) detected.add(`${engine}-${state.compute}`);
  }

  if (facts.whisperLoaded === true) detected.add('whisper-cpu');

  const detectedTags = sortBackendTags(detected);
  if (facts.override === null) return { tags: detectedTags, detected: detectedTags, source: 'detected', conflicts };

  // A configured list replaces detection; each tag it names that detection did not find is flagged.
  const tags: BackendTag[] = [];
  for (const text of facts.override) {
    const tag = parseBackendTag(text);
    if (!tag) {
      conflicts.push({
        id: `backends.config.${text}`,
        level: 'error',
        summary: `"${text}" is not a backend tag`,
        remediation: `use <engine>-<compute> with engine llama_cpp, llama_server, rpc or whisper and compute cpu, cuda, vulkan or metal (detected here: ${detectedTags.join(', ') || 'none'})`,
      });
      continue;
    }
    tags.push(tag);
    if (!detected.has(tag)) {
      conflicts.push({
        id: `backends.config.${tag}`,
        level: 'warn',
        summary: `${tag} is configured but was not detected on this node: work placed here for it will fail`,
        remediation: overrideRemediation(tag),
      });
    }
  }
  return { tags: sortBackendTags(tags), detected: detectedTags, source: 'config', conflicts };
}

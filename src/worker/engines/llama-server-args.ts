// The command line of a managed llama-server. Flags come and go between llama.cpp versions, so the
// optional ones are used only when the binary's own `--help` lists them.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ShoalError } from '../../common/errors.js';
import type { CardKvCacheType, FlashAttentionMode } from '../../models/cards/card.js';
import { tensorSplitOf } from '../../placement/plan.js';

const run = promisify(execFile);
const HELP_TIMEOUT_MS = 15_000;

export interface LlamaServerFeatures {
  /** `--kv-unified`: one KV buffer shared by all slots. */
  kvUnified: boolean;
  /** `--kv-unified-per-slot N`: caps each slot's context inside the shared buffer. */
  kvUnifiedPerSlot: boolean;
  /** `--no-webui` (older) or `--no-ui` (newer): the flag that turns the web UI off, if any. */
  noWebUiFlag: string | null;
  /** `--cache-ram`: the host-memory prompt cache, on by default (8 GiB) in newer builds. */
  cacheRam: boolean;
  /** `--fit`: automatic shrinking of unset options to fit device memory. */
  fit: boolean;
  /** `--no-slots`: turns off the /slots endpoint, which shows prompts. */
  noSlots: boolean;
  /** `--jinja`: the template engine that renders tools and reasoning. */
  jinja: boolean;
  /** `-fa on|off|auto` (newer); older builds take a bare `-fa` that turns it on. */
  flashAttnModes: boolean;
  /**
   * Speculative decoding with a draft model: newer builds spell the flags `--spec-draft-*`, older
   * ones `--model-draft`, `--draft-max`, ... (which newer builds still list, as removed). Null: no
   * draft support.
   */
  draft: DraftFlags | null;
  /** `--mmproj`: a multimodal projector beside the model (vision cards). */
  mmproj: boolean;
  /** `--mmproj-device`: which device the projector runs on. */
  mmprojDevice: boolean;
}

/** The spelling of the draft-model flags in one build. */
export interface DraftFlags {
  model: string;
  /** `--spec-type`: newer builds load a draft but leave speculation off (`none`) unless this names it. */
  type: string | null;
  maxTokens: string | null;
  minTokens: string | null;
  gpuLayers: string | null;
  devices: string | null;
  threads: string | null;
  threadsBatch: string | null;
}

/** Reads the features a build supports from its `--help` text. */
export function parseServerHelp(help: string): LlamaServerFeatures {
  const has = (flag: string): boolean => new RegExp(`(^|[\\s,])${flag.replace(/[-]/g, '\\-')}(?=[\\s,=]|$)`, 'm').test(help);
  return {
    kvUnified: has('--kv-unified'),
    kvUnifiedPerSlot: has('--kv-unified-per-slot'),
    noWebUiFlag: has('--no-webui') ? '--no-webui' : has('--no-ui') ? '--no-ui' : null,
    cacheRam: has('--cache-ram'),
    fit: has('--fit'),
    noSlots: has('--no-slots'),
    jinja: has('--jinja'),
    flashAttnModes: /--flash-attn \[on\|off\|auto\]/.test(help),
    draft: draftFlags(has),
    mmproj: has('--mmproj'),
    mmprojDevice: has('--mmproj-device'),
  };
}

function draftFlags(has: (flag: string) => boolean): DraftFlags | null {
  const first = (...flags: string[]): string | null => flags.find(has) ?? null;
  const model = first('--spec-draft-model', '--model-draft');
  if (model === null) return null;
  // The newer spelling first: a build that renamed a flag keeps the old one in --help only to say it was removed.
  return {
    model,
    type: first('--spec-type'),
    maxTokens: first('--spec-draft-n-max', '--draft-max'),
    minTokens: first('--spec-draft-n-min', '--draft-min'),
    gpuLayers: first('--spec-draft-ngl', '--gpu-layers-draft'),
    devices: first('--spec-draft-device', '--device-draft'),
    threads: first('--spec-draft-threads', '--threads-draft'),
    threadsBatch: first('--spec-draft-threads-batch', '--threads-batch-draft'),
  };
}

/**
 * The node-local switch: `SHOAL_SPECULATIVE=0` (or `shoal run --no-speculative`, which sets it)
 * starts every llama-server without its card's draft, for apples-to-apples measurement.
 */
export const SPECULATIVE_ENV = 'SHOAL_SPECULATIVE';

export function speculativeEnabled(env: NodeJS.ProcessEnv): boolean {
  const value = env[SPECULATIVE_ENV];
  return value === undefined || !['0', 'false', 'off', 'no'].includes(value.trim().toLowerCase());
}

const featureCache = new Map<string, Promise<LlamaServerFeatures>>();

/** Runs `<binary> --help` once per binary path and process. */
export function probeServerFeatures(binaryPath: string): Promise<LlamaServerFeatures> {
  let features = featureCache.get(binaryPath);
  if (!features) {
    features = run(binaryPath, ['--help'], { encoding: 'utf8', timeout: HELP_TIMEOUT_MS, maxBuffer: 8 * 1024 * 1024 }).then(
      ({ stdout, stderr }) => parseServerHelp(`${stdout}\n${stderr}`),
      (error: unknown) => {
        // Some builds exit non-zero after printing help; the text is still good.
        const e = error as { stdout?: string; stderr?: string; code?: unknown };
        const text = `${e.stdout ?? ''}\n${e.stderr ?? ''}`;
        if (text.includes('--ctx-size')) return parseServerHelp(text);
        throw error;
      },
    );
    featureCache.set(binaryPath, features);
    features.catch(() => featureCache.delete(binaryPath));
  }
  return features;
}

/** More layers than any model has: "all of them" for `-ngl`. */
export const ALL_LAYERS = 999;

export interface ServerArgsInput {
  modelPath: string;
  port: number;
  threads: number;
  /** Tokens of context per slot. */
  contextTokens: number;
  parallel: number;
  /** Tokens of the KV cache shared by all slots (`-c`). */
  kvTokens: number;
  /**
   * HTTP threads (`--threads-http`). cpp-httplib serves each kept-alive connection on one thread
   * until it closes, so there must be one for every connection the node's client may hold open
   * (llama-server's own default, slots + 2, is fewer than a client that keeps connections alive).
   */
  httpThreads: number;
  /** Layers on devices (GPUs, RPC donors); the rest stay on this process's CPU. */
  gpuLayers: number;
  rpcServers: readonly string[];
  tensorSplit: string | null;
  /** llama.cpp device names to offload to (`--device`, e.g. `CUDA0`); empty: the binary's choice. */
  devices: readonly string[];
  embeddings: boolean;
  /** K and V cache element type (`-ctk`, `-ctv`), as placement counted it. */
  kvCacheType: CardKvCacheType | 'f32' | 'bf16';
  flashAttention: FlashAttentionMode;
  /** A draft model for speculative decoding, on the same devices and threads as the target; absent for none. */
  draft?: DraftInput | undefined;
  /** The card's multimodal projector (`--mmproj`, a vision card's companion GGUF); absent for none. */
  projectorPath?: string | undefined;
}

export interface DraftInput {
  modelPath: string;
  /** Tokens drafted per step; absent: the binary's default. */
  maxTokens?: number | undefined;
  /** Fewest drafted tokens worth a verification batch; absent: the binary's default. */
  minTokens?: number | undefined;
}

export function llamaServerArgs(input: ServerArgsInput, features: LlamaServerFeatures): string[] {
  const args = [
    '-m', input.modelPath,
    '--host', '127.0.0.1',
    '--port', String(input.port),
    // Always explicit: llama.cpp's default thread count oversubscribes small machines badly.
    '-t', String(input.threads),
    '-tb', String(input.threads),
    '--parallel', String(input.parallel),
    '--threads-http', String(input.httpThreads),
    '-c', String(input.kvTokens),
    '-ngl', String(input.gpuLayers),
    '-ctk', input.kvCacheType,
    '-ctv', input.kvCacheType,
  ];
  if (features.flashAttnModes) args.push('-fa', input.flashAttention);
  else if (input.flashAttention === 'on') args.push('-fa');
  if (features.kvUnified) args.push('--kv-unified');
  if (features.kvUnifiedPerSlot) args.push('--kv-unified-per-slot', String(input.contextTokens));
  if (input.devices.length > 0) args.push('--device', input.devices.join(','));
  if (input.rpcServers.length > 0) args.push('--rpc', input.rpcServers.join(','));
  if (input.tensorSplit !== null) args.push('--tensor-split', input.tensorSplit);
  if (features.noWebUiFlag) args.push(features.noWebUiFlag);
  // Memory must be what placement admitted: no host-RAM prompt cache, no silent shrinking.
  if (features.cacheRam) args.push('--cache-ram', '0');
  if (features.fit) args.push('--fit', 'off');
  if (features.noSlots) args.push('--no-slots');
  // Chat templates that render tools and reasoning need the Jinja engine (default on in newer builds).
  if (features.jinja) args.push('--jinja');
  if (input.embeddings) {
    // An embedding is computed in one physical batch, so the batch must hold a whole input.
    args.push('--embeddings', '-b', String(input.contextTokens), '-ub', String(input.contextTokens));
  }
  if (input.draft !== undefined) args.push(...draftArgs(input.draft, input, features));
  if (input.projectorPath !== undefined) args.push(...projectorArgs(input.projectorPath, input, features));
  return args;
}

/**
 * The projector sits with the model's own share: on this process's CPU when the part has no layers
 * on a GPU (placement counted no device memory for it; by default llama-server would still put it
 * on the first GPU it finds) or is a pooled driver (its other devices are RPC donors, which the
 * auto choice could pick), else on the part's first GPU.
 */
function projectorArgs(path: string, input: ServerArgsInput, features: LlamaServerFeatures): string[] {
  if (!features.mmproj) {
    throw new ShoalError('CAPABILITY_MISSING', 'this llama-server build has no --mmproj flag, so it cannot load the card\'s projector: update the engine (shoal doctor --fix)');
  }
  const args = ['--mmproj', path];
  if (input.gpuLayers === 0 || input.rpcServers.length > 0) args.push('--no-mmproj-offload');
  else if (input.devices.length > 0 && features.mmprojDevice) args.push('--mmproj-device', input.devices[0]!);
  return args;
}

function draftArgs(draft: DraftInput, input: ServerArgsInput, features: LlamaServerFeatures): string[] {
  const flags = features.draft;
  if (flags === null) {
    throw new ShoalError('CAPABILITY_MISSING', 'this llama-server build has no draft-model flag (--spec-draft-model or --model-draft): update the engine (shoal doctor --fix) or remove runtime.speculative from the card');
  }
  const args = [flags.model, draft.modelPath];
  if (flags.type !== null) args.push(flags.type, 'draft-simple');
  const knob = (flag: string | null, value: number | undefined, what: string): void => {
    if (value === undefined) return;
    if (flag === null) throw new ShoalError('CAPABILITY_MISSING', `this llama-server build cannot set the draft's ${what}: update the engine (shoal doctor --fix) or remove it from runtime.speculative`);
    args.push(flag, String(value));
  };
  knob(flags.maxTokens, draft.maxTokens, 'maximum tokens (draft_max)');
  knob(flags.minTokens, draft.minTokens, 'minimum tokens (draft_min)');
  // The draft sits with its target: on the same devices (its own layers all there when the target has
  // any) and the same CPU threads, so placement's single part holds both.
  if (flags.gpuLayers !== null) args.push(flags.gpuLayers, String(input.gpuLayers > 0 ? ALL_LAYERS : 0));
  if (flags.devices !== null && input.devices.length > 0) args.push(flags.devices, input.devices.join(','));
  if (flags.threads !== null) args.push(flags.threads, String(input.threads));
  if (flags.threadsBatch !== null) args.push(flags.threadsBatch, String(input.threads));
  return args;
}

/** The GPU computes an engine build can be made for (src/doctor/engines.ts `EngineCompute` less cpu). */
export type GpuCompute = 'cuda' | 'vulkan' | 'metal';

/** The GPU compute of a backend tag (`llama_server-cuda`, `rpc-vulkan`), null for a CPU one. */
export function gpuComputeOf(backend: string): GpuCompute | null {
  const compute = backend.slice(backend.lastIndexOf('-') + 1);
  return compute === 'cuda' || compute === 'vulkan' || compute === 'metal' ? compute : null;
}

/**
 * llama.cpp's name for GPU `index` of a backend, as `--device` and ggml-rpc-server's `-d` take it: the
 * pinned ggml names its devices GGML_CUDA_NAME + index (`CUDA0`), GGML_VK_NAME + index (`Vulkan0`) and
 * GGML_METAL_NAME + index (`MTL0`).
 */
export function llamaCppDeviceName(compute: GpuCompute, index: number): string {
  const prefix = compute === 'cuda' ? 'CUDA' : compute === 'vulkan' ? 'Vulkan' : 'MTL';
  return `${prefix}${index}`;
}

/** What one placed part puts on its GPUs (src/master/state/instances.ts InstancePlacement). */
export interface PartOffload {
  /** `-ngl`: the planned count, or all layers when the plan does not say. */
  gpuLayers: number;
  /** `--device` (llamaServerArgs) or `-d` (rpcServerArgs): the planned GPUs; empty where the plan names none. */
  devices: string[];
  /** `--tensor-split` over those GPUs when there are several, else null. */
  tensorSplit: string | null;
}

/**
 * The GPU side of a part's command line, from its placement; null for a part on a CPU backend, whose
 * command line stays as it always was (`-ngl 0`, no devices).
 */
export function partOffload(part: {
  backend: string;
  gpuLayers?: number | undefined;
  devices?: readonly { index: number; tensorSplit: number }[] | undefined;
}): PartOffload | null {
  const compute = gpuComputeOf(part.backend);
  if (compute === null) return null;
  const devices = part.devices ?? [];
  return {
    gpuLayers: part.gpuLayers ?? ALL_LAYERS,
    devices: devices.map((d) => llamaCppDeviceName(compute, d.index)),
    tensorSplit: devices.length > 1 ? tensorSplitOf([{ devices }]) : null,
  };
}

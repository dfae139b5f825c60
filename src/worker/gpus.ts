// The node's GPUs (issue #15): detected once at start, sampled on every telemetry beat without ever
// making the beat wait. Detection asks `nvidia-smi` and `rocm-smi` where they are installed (per-device
// figures, each call bounded by SMI_TIMEOUT_MS) and node-llama-cpp's device and VRAM queries (the
// same probe `shoal doctor` makes, src/doctor/hardware.ts), which also say which of its GPU builds
// load here: the backends the node advertises follow from that (src/worker/engine-factory.ts).
// SHOAL_TEST_GPUS replaces the readings (never what loads): see gpu-readings.ts.

import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { arch, freemem, platform, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../common/log.js';
import type { BackendFacts } from '../doctor/backends.js';
import { detectLlamaCpp, type GpuRequest } from '../doctor/hardware.js';
import type { GpuReading } from '../wire/telemetry.js';
import { llamaCppReadings, mergeReadings, NVIDIA_SMI_GPU_ARGS, parseNvidiaSmiGpus, parseRocmSmiGpus, parseTestGpus, ROCM_SMI_GPU_ARGS, TEST_GPUS_ENV } from './gpu-readings.js';

/** The smi tools run at most this often; between runs every beat reports the last figures. */
export const GPU_SAMPLE_INTERVAL_MS = 5_000;
/** How long one `nvidia-smi` or `rocm-smi` call may take before its figures are skipped this time. */
export const SMI_TIMEOUT_MS = 2_000;
/** The most output read from one smi call (8 devices take a few KiB). */
const SMI_MAX_OUTPUT_BYTES = 256 * 1024;
/** How long node-llama-cpp's probe may take at start before the node goes on with the CPU alone. */
export const LLAMA_GPU_PROBE_TIMEOUT_MS = 60_000;

type Smi = 'nvidia' | 'amd';
const SMI_COMMANDS: Record<Smi, { command: string; args: string[]; parse: (text: string) => GpuReading[] }> = {
  nvidia: { command: 'nvidia-smi', args: NVIDIA_SMI_GPU_ARGS, parse: parseNvidiaSmiGpus },
  amd: { command: 'rocm-smi', args: ROCM_SMI_GPU_ARGS, parse: parseRocmSmiGpus },
};

/** Runs one smi tool; null when it is not installed (never tried again), [] when it failed this time. */
function runSmi(which: Smi): Promise<GpuReading[] | null> {
  const { command, args, parse } = SMI_COMMANDS[which];
  return new Promise((resolve) => {
    execFile(command, args, { timeout: SMI_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: SMI_MAX_OUTPUT_BYTES, env: { ...process.env, LC_ALL: 'C' } }, (error, stdout) => {
      if ((error as NodeJS.ErrnoException | null)?.code === 'ENOENT') resolve(null);
      else resolve(error ? [] : parse(stdout));
    });
  });
}

/** A device node a GPU driver opens, or Apple silicon: worth loading node-llama-cpp's GPU builds to see. */
function gpuHint(): boolean {
  if (platform() === 'darwin') return arch() === 'arm64';
  if (existsSync('/dev/nvidia0')) return true;
  try {
    return readdirSync('/dev/dri').some((name) => name.startsWith('renderD'));
  } catch {
    return false;
  }
}

export interface GpuMonitorOptions {
  /** `--gpu`: false detects nothing and loads no GPU build. */
  gpu: GpuRequest;
  /** Threads node-llama-cpp may use while probing. */
  maxThreads: number;
  log: Logger;
  /** Where SHOAL_TEST_GPUS is read (tests pass their own); default process.env. */
  env?: NodeJS.ProcessEnv;
}

export class GpuMonitor {
  private current: GpuReading[];
  private sampledAtMs = performance.now();
  private inFlight: Promise<void> | null = null;
  private stopped = false;

  private constructor(
    initial: GpuReading[],
    /** Where the readings come from: what a refresh asks again. */
    readonly source: 'test-hook' | 'smi' | 'node-llama-cpp' | 'none',
    private readonly tools: Set<Smi>,
    /** What node-llama-cpp loads here, for the backends (src/doctor/backends.ts deriveBackends). */
    readonly llamaCpp: BackendFacts['llamaCpp'],
    /** An NVIDIA device node exists, whatever node-llama-cpp makes of it (a doctor-style warning). */
    readonly nvidiaDevicePresent: boolean,
  ) {
    this.current = initial;
  }

  /**
   * Detects the GPUs. A malformed SHOAL_TEST_GPUS throws (BAD_REQUEST, naming the field): the start fails.
   * node-llama-cpp is loaded into this process only where there is a GPU to ask about (a device node,
   * Apple silicon, an smi tool's device or an injected one); elsewhere its CPU build is taken as loading,
   * as the runner then proves.
   */
  static async start(options: GpuMonitorOptions): Promise<GpuMonitor> {
    const env = options.env ?? process.env;
    const hookText = env[TEST_GPUS_ENV];
    const injected = hookText !== undefined && hookText.trim() !== '' ? parseTestGpus(hookText) : null;
    const nvidiaDevicePresent = existsSync('/dev/nvidia0');
    if (options.gpu === false) {
      return new GpuMonitor([], 'none', new Set(), { loaded: true, error: null, supportedGpuTypes: [], activeGpu: null }, nvidiaDevicePresent);
    }
    const tools = new Set<Smi>();
    const smi: Record<Smi, GpuReading[]> = { nvidia: [], amd: [] };
    if (injected === null) {
      await Promise.all(
        (['nvidia', 'amd'] as const).map(async (which) => {
          const found = await runSmi(which);
          if (found === null) return;
          tools.add(which);
          smi[which] = found;
        }),
      );
    }
    const smiFound = smi.nvidia.length + smi.amd.length > 0;
    const worthProbing = injected !== null ? injected.length > 0 : smiFound || gpuHint();
    const probe = worthProbing ? await probeLlamaCpp(options) : null;
    const llamaCpp: BackendFacts['llamaCpp'] = probe?.facts ?? { loaded: true, error: null, supportedGpuTypes: [], activeGpu: null };
    if (injected !== null) {
      options.log.info({ gpus: injected.length }, `GPU readings come from ${TEST_GPUS_ENV} (a test hook): detection is off`);
      return new GpuMonitor(injected, 'test-hook', tools, llamaCpp, nvidiaDevicePresent);
    }
    const fromLlama = probe?.gpu ? llamaCppReadings(probe.gpu, { platform: platform(), arch: arch(), totalMemoryBytes: totalmem(), freeMemoryBytes: freemem() }) : [];
    const readings = mergeReadings(smi, fromLlama);
    const source = smiFound ? 'smi' : readings.length > 0 ? 'node-llama-cpp' : 'none';
    return new GpuMonitor(readings, source, tools, llamaCpp, nvidiaDevicePresent);
  }

  /**
   * The latest readings, at once. When they are older than GPU_SAMPLE_INTERVAL_MS a refresh starts in
   * the background (one at a time) and a later call sees it. Apple silicon's free memory is read now.
   */
  readings(): GpuReading[] {
    if (this.source === 'smi' && !this.stopped && this.inFlight === null && performance.now() - this.sampledAtMs >= GPU_SAMPLE_INTERVAL_MS) this.refresh();
    if (this.current.some((g) => g.unifiedMemory) && this.source !== 'test-hook') {
      const free = freemem();
      return this.current.map((g) => (g.unifiedMemory ? { ...g, vramFreeBytes: Math.min(g.vramTotalBytes, free) } : g));
    }
    return this.current;
  }

  /** Whether this node has a GPU at all (detected or injected). */
  present(): boolean {
    return this.current.length > 0;
  }

  stop(): void {
    this.stopped = true;
  }

  private refresh(): void {
    this.inFlight = (async () => {
      const smi: Record<Smi, GpuReading[]> = { nvidia: [], amd: [] };
      await Promise.all([...this.tools].map(async (which) => (smi[which] = (await runSmi(which)) ?? [])));
      // A call that failed this time keeps the previous figures rather than reporting the GPUs gone.
      if (smi.nvidia.length + smi.amd.length > 0) this.current = mergeReadings(smi, []);
      this.sampledAtMs = performance.now();
    })().finally(() => {
      this.inFlight = null;
    });
  }
}

/** node-llama-cpp's GPU probe (the doctor's), bounded: a probe that hangs leaves the node on the CPU. */
async function probeLlamaCpp(options: GpuMonitorOptions): Promise<{ facts: BackendFacts['llamaCpp']; gpu: Parameters<typeof llamaCppReadings>[0] | null } | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), LLAMA_GPU_PROBE_TIMEOUT_MS);
  });
  try {
    const result = await Promise.race([detectLlamaCpp(options.gpu, options.maxThreads), timeout]);
    if (result === null) {
      options.log.warn(`node-llama-cpp's GPU probe took more than ${LLAMA_GPU_PROBE_TIMEOUT_MS / 1000} s: this node offers the CPU only (shoal doctor says more)`);
      return null;
    }
    const { gpu, llamaCpp } = result;
    return {
      facts: { loaded: llamaCpp.loaded, error: llamaCpp.error, supportedGpuTypes: gpu.supportedTypes, activeGpu: gpu.active },
      gpu: gpu.active === null ? null : { active: gpu.active, devices: gpu.devices, vram: gpu.vram },
    };
  } finally {
    clearTimeout(timer);
  }
}

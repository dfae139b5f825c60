// What this machine has: CPU, memory (size and read bandwidth), GPUs as node-llama-cpp sees them.
// Works on a machine with no GPU at all; nothing here builds or downloads anything.

import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { arch, cpus, freemem, hostname, platform, totalmem } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';
import { physicalCoreCount } from '../common/cpu.js';
import { writeFileAtomic } from '../common/durable-fs.js';

export const GPU_TYPES = ['cuda', 'vulkan', 'metal'] as const;
export type GpuType = (typeof GPU_TYPES)[number];
/** What `--gpu` asks for: auto-detect, CPU only, or one GPU type. */
export type GpuRequest = 'auto' | false | GpuType;

/** How long a bandwidth figure stays valid. */
export const BANDWIDTH_CACHE_MAX_AGE_MS = 24 * 60 * 60 * 1000;
/** The buffer the bandwidth probe reads: large enough to defeat every cache level. */
const BANDWIDTH_BUFFER_BYTES = 256 * 1024 * 1024;
/** The probe times its reads in chunks of this size. */
const BANDWIDTH_CHUNK_BYTES = 8 * 1024 * 1024;
/** How long the bandwidth probe reads. */
const BANDWIDTH_DURATION_MS = 500;

export const BandwidthMeasurement = z.strictObject({
  gbPerSecond: z.number().positive(),
  threads: z.number().int().positive(),
  bufferBytes: z.number().int().positive(),
  measuredAt: z.string(),
});
export type BandwidthMeasurement = z.infer<typeof BandwidthMeasurement>;

export interface GpuInfo {
  /** GPU types node-llama-cpp's prebuilt binaries can use here (drivers and libraries present). */
  supportedTypes: GpuType[];
  /** The GPU type node-llama-cpp actually loaded with (`gpu: 'auto'`, or the forced one), null for CPU. */
  active: GpuType | null;
  devices: string[];
  vram: { totalBytes: number; usedBytes: number; freeBytes: number } | null;
  /** Bytes of VRAM that are shared with system memory (Apple silicon), 0 elsewhere. */
  unifiedMemoryBytes: number;
  /** An NVIDIA device node exists (/dev/nvidia0), whatever node-llama-cpp makes of it. */
  nvidiaDevicePresent: boolean;
  /** A DRM render node exists (/dev/dri/renderD*), a hint that Vulkan may have a device. */
  renderNodePresent: boolean;
}

export interface HardwareInfo {
  hostname: string;
  platform: NodeJS.Platform;
  arch: string;
  cpu: { model: string; physicalCores: number; logicalCores: number };
  memory: {
    totalBytes: number;
    freeBytes: number;
    /** Measured read bandwidth (cached for a day), null when it could not be measured. */
    bandwidth: (BandwidthMeasurement & { cached: boolean }) | null;
  };
  gpu: GpuInfo;
  /** Whether node-llama-cpp's prebuilt binary loaded, and why not. */
  llamaCpp: { loaded: boolean; error: string | null; systemInfo: string | null };
}

export interface DetectHardwareOptions {
  /** The data dir; the bandwidth figure is cached in `<dataDir>/doctor/bandwidth.json` when it exists. */
  dataDir?: string;
  /** The GPU the node is asked to use (`--gpu`), default auto. */
  gpu?: GpuRequest;
  /** Threads node-llama-cpp may use while probing (default: physical cores). */
  maxThreads?: number;
  /** Skip the bandwidth figure unless it is cached. */
  skipBandwidth?: boolean;
  now?: () => Date;
}

export async function detectHardware(options: DetectHardwareOptions = {}): Promise<HardwareInfo> {
  const physicalCores = physicalCoreCount();
  const cpuList = cpus();
  const llama = await detectLlamaCpp(options.gpu ?? 'auto', options.maxThreads ?? physicalCores);
  // Measured after the llama.cpp probe, not beside it: anything else running skews the figure.
  const bandwidth = await bandwidthFigure({ dataDir: options.dataDir, threads: Math.min(2, physicalCores), skip: options.skipBandwidth ?? false, now: options.now });
  return {
    hostname: hostname(),
    platform: platform(),
    arch: arch(),
    cpu: { model: cpuList[0]?.model.trim() || 'unknown', physicalCores, logicalCores: cpuList.length },
    memory: { totalBytes: totalmem(), freeBytes: freemem(), bandwidth },
    gpu: llama.gpu,
    llamaCpp: llama.llamaCpp,
  };
}

// ---------------------------------------------------------------------------------------------
// GPUs through node-llama-cpp

function devicePresence(): Pick<GpuInfo, 'nvidiaDevicePresent' | 'renderNodePresent'> {
  let renderNodePresent = false;
  try {
    renderNodePresent = readdirSync('/dev/dri').some((name) => name.startsWith('renderD'));
  } catch {
    // no DRM devices
  }
  return { nvidiaDevicePresent: existsSync('/dev/nvidia0'), renderNodePresent };
}

/**
 * Loads node-llama-cpp's prebuilt binary the way a runner would (never building, never downloading)
 * and reads what GPU it got. A forced GPU type is only tried when node-llama-cpp lists it as supported
 * here; otherwise the load falls back to auto so the CPU backend is still checked. The node's GPU
 * detection (src/worker/gpus.ts) asks the same, so the node and the doctor derive the same backends.
 */
export async function detectLlamaCpp(request: GpuRequest, maxThreads: number): Promise<{ gpu: GpuInfo; llamaCpp: HardwareInfo['llamaCpp'] }> {
  const gpu: GpuInfo = { supportedTypes: [], active: null, devices: [], vram: null, unifiedMemoryBytes: 0, ...devicePresence() };
  let mod: typeof import('node-llama-cpp');
  try {
    mod = await import('node-llama-cpp');
  } catch (error) {
    return { gpu, llamaCpp: { loaded: false, error: `cannot import node-llama-cpp: ${(error as Error).message}`, systemInfo: null } };
  }
  try {
    const supported = await mod.getLlamaGpuTypes('supported');
    gpu.supportedTypes = supported.filter((type): type is GpuType => type !== false);
  } catch {
    // leave the list empty; the load below still says what works
  }
  const choice: GpuRequest = request === 'auto' || request === false || gpu.supportedTypes.includes(request) ? request : 'auto';
  let llama;
  try {
    llama = await mod.getLlama({ gpu: choice, build: 'never', skipDownload: true, maxThreads, logLevel: mod.LlamaLogLevel.error, progressLogs: false });
  } catch (error) {
    return { gpu, llamaCpp: { loaded: false, error: (error as Error).message || (error as Error).name, systemInfo: null } };
  }
  try {
    gpu.active = llama.gpu === false ? null : llama.gpu;
    if (gpu.active !== null) {
      const [vram, devices] = await Promise.all([llama.getVramState(), llama.getGpuDeviceNames()]);
      gpu.vram = { totalBytes: vram.total, usedBytes: vram.used, freeBytes: vram.free };
      gpu.unifiedMemoryBytes = vram.unifiedSize;
      gpu.devices = devices;
      if (!gpu.supportedTypes.includes(gpu.active)) gpu.supportedTypes.push(gpu.active);
    }
    return { gpu, llamaCpp: { loaded: true, error: null, systemInfo: llama.systemInfo.trim() } };
  } finally {
    await llama.dispose().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Memory read bandwidth

export function bandwidthCachePath(dataDir: string): string {
  return join(dataDir, 'doctor', 'bandwidth.json');
}

/** Whether a cached measurement is still good at `now` (younger than a day, not from the future). */
export function isBandwidthFresh(entry: BandwidthMeasurement, now: Date, maxAgeMs: number = BANDWIDTH_CACHE_MAX_AGE_MS): boolean {
  const at = Date.parse(entry.measuredAt);
  if (!Number.isFinite(at)) return false;
  const age = now.getTime() - at;
  return age >= 0 && age < maxAgeMs;
}

export async function readBandwidthCache(dataDir: string): Promise<BandwidthMeasurement | null> {
  try {
    const parsed = BandwidthMeasurement.safeParse(JSON.parse(await readFile(bandwidthCachePath(dataDir), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

async function writeBandwidthCache(dataDir: string, entry: BandwidthMeasurement): Promise<void> {
  const path = bandwidthCachePath(dataDir);
  await mkdir(join(dataDir, 'doctor'), { recursive: true });
  await writeFileAtomic(path, `${JSON.stringify(entry, null, 2)}\n`);
}

/**
 * The memory read bandwidth: from `<dataDir>/doctor/bandwidth.json` when measured within a day,
 * else measured now and cached there (only when the data dir exists: a check never creates it).
 */
export async function bandwidthFigure(options: {
  dataDir?: string | undefined;
  threads: number;
  skip?: boolean;
  now?: (() => Date) | undefined;
}): Promise<(BandwidthMeasurement & { cached: boolean }) | null> {
  const now = options.now ?? (() => new Date());
  if (options.dataDir !== undefined) {
    const cached = await readBandwidthCache(options.dataDir);
    if (cached && isBandwidthFresh(cached, now())) return { ...cached, cached: true };
  }
  if (options.skip) return null;
  let measured: BandwidthMeasurement;
  try {
    measured = { ...(await measureReadBandwidth({ threads: options.threads })), measuredAt: now().toISOString() };
  } catch {
    return null;
  }
  if (options.dataDir !== undefined && existsSync(options.dataDir)) {
    await writeBandwidthCache(options.dataDir, measured).catch(() => undefined);
  }
  return { ...measured, cached: false };
}

// Runs in each worker: sums its slice of the shared buffer again and again for the given time, with
// eight independent accumulators so the adds do not serialize, timing each 8 MiB chunk. It reports
// the bytes it read and the 90th percentile of its chunk rates: a chunk the scheduler interrupted
// (another process wanted the core) says nothing about the memory, and the figure is kept a day.
const BANDWIDTH_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { buffer, start, end, durationMs, chunkElements } = workerData;
const a = new Float64Array(buffer, start * 8, end - start);
const n = a.length - (a.length % chunkElements);
function sum(from, to) {
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  for (let i = from; i < to; i += 8) {
    s0 += a[i]; s1 += a[i + 1]; s2 += a[i + 2]; s3 += a[i + 3];
    s4 += a[i + 4]; s5 += a[i + 5]; s6 += a[i + 6]; s7 += a[i + 7];
  }
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}
let sink = sum(0, n);
const rates = [];
let bytes = 0;
const t0 = process.hrtime.bigint();
let elapsed = 0;
do {
  for (let from = 0; from < n; from += chunkElements) {
    const c0 = process.hrtime.bigint();
    sink += sum(from, from + chunkElements);
    const c1 = process.hrtime.bigint();
    rates.push((chunkElements * 8) / (Number(c1 - c0) / 1e9));
    bytes += chunkElements * 8;
  }
  elapsed = Number(process.hrtime.bigint() - t0) / 1e6;
} while (elapsed < durationMs);
rates.sort((x, y) => x - y);
const p90 = rates[Math.floor(rates.length * 0.9)] || 0;
parentPort.postMessage({ bytes, ms: elapsed, p90BytesPerSecond: p90, sink });
`;

interface WorkerResult {
  bytes: number;
  ms: number;
  p90BytesPerSecond: number;
}

/**
 * Measures memory read bandwidth: `threads` workers each sum their share of one 256 MiB Float64Array
 * for about half a second. Returns GB/s (10^9 bytes).
 */
export async function measureReadBandwidth(options: { threads: number; bufferBytes?: number; durationMs?: number }): Promise<Omit<BandwidthMeasurement, 'measuredAt'>> {
  const threads = Math.max(1, Math.floor(options.threads));
  const bufferBytes = options.bufferBytes ?? BANDWIDTH_BUFFER_BYTES;
  const durationMs = options.durationMs ?? BANDWIDTH_DURATION_MS;
  const buffer = new SharedArrayBuffer(bufferBytes);
  new Float64Array(buffer).fill(1); // touch every page so the probe reads real memory
  const elements = Math.floor(bufferBytes / 8);
  const share = Math.floor(elements / threads);
  const chunkElements = Math.max(8, Math.min(BANDWIDTH_CHUNK_BYTES / 8, share - (share % 8)));
  const results = await Promise.all(
    Array.from({ length: threads }, (_, index) => {
      const start = index * share;
      const end = index === threads - 1 ? elements : start + share;
      return new Promise<WorkerResult>((done, fail) => {
        const worker = new Worker(BANDWIDTH_WORKER, { eval: true, workerData: { buffer, start, end, durationMs, chunkElements } });
        worker.once('message', (message: WorkerResult) => {
          done(message);
          void worker.terminate();
        });
        worker.once('error', fail);
        worker.once('exit', (code) => {
          if (code !== 0) fail(new Error(`bandwidth worker exited with code ${code}`));
        });
      });
    }),
  );
  const gbPerSecond = results.reduce((sum, r) => sum + Math.max(r.p90BytesPerSecond, r.bytes / (r.ms / 1000)), 0) / 1e9;
  return { gbPerSecond: Math.round(gbPerSecond * 10) / 10, threads, bufferBytes };
}

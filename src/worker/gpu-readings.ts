// The GPUs a node reports (issue #15), from what the tools say: the test hook's JSON, `nvidia-smi`'s
// CSV, `rocm-smi`'s JSON and node-llama-cpp's device and VRAM queries. Pure: text and facts in,
// GpuReading[] out; the shell that runs the tools and samples them is gpus.ts.

import { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { GpuReading, MAX_REPORTED_GPUS } from '../wire/telemetry.js';
import type { GpuUse } from '../metrics/series.js';

/**
 * The test hook: a JSON array of devices that replaces GPU detection entirely (CONTRIBUTING.md,
 * "Testing without a GPU"). Read by gpus.ts only, never anywhere else.
 */
export const TEST_GPUS_ENV = 'SHOAL_TEST_GPUS';

/** `nvidia-smi` asked for these columns, in this order (parseNvidiaSmiGpus reads them so). */
export const NVIDIA_SMI_GPU_ARGS = ['--query-gpu=index,name,memory.total,memory.free,utilization.gpu,temperature.gpu,power.draw', '--format=csv,noheader,nounits'];
/** `rocm-smi` asked for memory, use, temperature, power and the product name, as JSON. */
export const ROCM_SMI_GPU_ARGS = ['--showmeminfo', 'vram', '--showuse', '--showtemp', '--showpower', '--showproductname', '--json'];

const MIB = 1024 * 1024;
/**
 * Device names are clipped to this many characters, printable ASCII (others become `?`): eight GPUs with
 * names at the wire's 128 would take a node's resources report past MAX_TELEMETRY_MESSAGE_BYTES
 * (gpu-readings.test.ts checks the worst case). Real names ("NVIDIA GeForce RTX 4090", "AMD Radeon RX
 * 7900 XTX") are ASCII and well under it.
 */
export const GPU_NAME_MAX_CHARS = 40;
const clipName = (name: string): string => name.replace(/[^\x20-\x7e]/g, '?').slice(0, GPU_NAME_MAX_CHARS);

/** One injected device: name, vendor, compute and VRAM are required; the rest defaults like a platform that does not say. */
const TestGpu = z
  .strictObject({
    index: GpuReading.shape.index.optional(),
    name: z.string().min(1).max(GPU_NAME_MAX_CHARS).regex(/^[\x20-\x7e]+$/, 'printable ASCII only'),
    vendor: GpuReading.shape.vendor,
    compute: GpuReading.shape.compute,
    vramTotalBytes: GpuReading.shape.vramTotalBytes,
    vramFreeBytes: GpuReading.shape.vramFreeBytes,
    unifiedMemory: z.boolean().default(false),
    utilizationPct: GpuReading.shape.utilizationPct.default(null),
    temperatureC: GpuReading.shape.temperatureC.default(null),
    powerW: GpuReading.shape.powerW.default(null),
  })
  .refine((gpu) => gpu.vramFreeBytes <= gpu.vramTotalBytes, { message: 'vramFreeBytes is more than vramTotalBytes', path: ['vramFreeBytes'] });
const TestGpus = z.array(TestGpu).max(MAX_REPORTED_GPUS);

/**
 * SHOAL_TEST_GPUS's devices as readings (index defaulting to the position). A malformed value is refused
 * with one line that names the field, so a test that mistyped it fails at the start, not later.
 */
export function parseTestGpus(text: string): GpuReading[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ShoalError('BAD_REQUEST', `${TEST_GPUS_ENV} is not JSON (${(error as Error).message}): set it to an array such as [{"name":"Test GPU 24G","vendor":"nvidia","compute":"cuda","vramTotalBytes":25769803776,"vramFreeBytes":24696061952}], or unset it`);
  }
  const parsed = TestGpus.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '') : 'the value';
    throw new ShoalError('BAD_REQUEST', `${TEST_GPUS_ENV} is malformed at ${where}: ${issue?.message ?? 'invalid'} (each device needs name, vendor, compute, vramTotalBytes and vramFreeBytes; see CONTRIBUTING.md), or unset it`);
  }
  return parsed.data.map((gpu, position) => ({ ...gpu, index: gpu.index ?? position }));
}

/** "[N/A]", "[Not Supported]", "" and the like are unknown. */
function numberOrNull(field: string | undefined): number | null {
  const text = (field ?? '').trim();
  if (!/^-?\d+(\.\d+)?$/.test(text)) return null;
  return Number(text);
}

/** A figure inside the wire schema's range, else unknown (a driver glitch must not drop the whole report). */
function within(value: number | null, min: number, max: number): number | null {
  return value !== null && value >= min && value <= max ? value : null;
}

/**
 * `nvidia-smi --query-gpu=index,name,memory.total,memory.free,utilization.gpu,temperature.gpu,power.draw
 * --format=csv,noheader,nounits`: one line per device, memory in MiB. A line that does not have the seven
 * columns or a memory size is skipped (an unsupported device), not the whole output.
 */
export function parseNvidiaSmiGpus(text: string): GpuReading[] {
  const out: GpuReading[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const raw = line.split(',');
    const fields = raw.map((f) => f.trim());
    // A name with a comma in it would shift the figures: the last five columns are numbers, the first one too.
    if (fields.length < 7) continue;
    const index = numberOrNull(fields[0]);
    const tail = fields.slice(-5).map(numberOrNull) as [number | null, number | null, number | null, number | null, number | null];
    const name = clipName(raw.slice(1, -5).join(',').trim());
    const [totalMib, freeMib, util, temperature, power] = tail;
    if (index === null || !Number.isInteger(index) || index < 0 || index > 63 || totalMib === null) continue;
    const vramTotalBytes = Math.round(totalMib * MIB);
    out.push({
      index,
      name: name === '' ? `NVIDIA GPU ${index}` : name,
      vendor: 'nvidia',
      compute: 'cuda',
      vramTotalBytes,
      vramFreeBytes: Math.min(vramTotalBytes, Math.round((freeMib ?? 0) * MIB)),
      unifiedMemory: false,
      utilizationPct: within(util, 0, 100),
      temperatureC: within(temperature, -50, 200),
      powerW: within(power, 0, 10_000),
    });
  }
  return out.slice(0, MAX_REPORTED_GPUS);
}

/** The first field of `card` whose key matches, as a number. */
function field(card: Record<string, unknown>, pattern: RegExp): number | null {
  for (const [key, value] of Object.entries(card)) if (pattern.test(key)) return numberOrNull(String(value));
  return null;
}

function text(card: Record<string, unknown>, pattern: RegExp): string | null {
  for (const [key, value] of Object.entries(card)) if (pattern.test(key) && typeof value === 'string' && value.trim() !== '' && value.trim() !== 'N/A') return value.trim();
  return null;
}

/**
 * `rocm-smi --showmeminfo vram --showuse --showtemp --showpower --showproductname --json`: an object of
 * `cardN` entries (and a `system` one) whose keys name the figure with its unit: `VRAM Total Memory (B)`,
 * `VRAM Total Used Memory (B)`, `GPU use (%)`, `Temperature (Sensor edge) (C)`, `Average Graphics Package
 * Power (W)` (`Current Socket Graphics Package Power (W)` on newer versions), `Card series`. AMD GPUs
 * compute through Vulkan here: node-llama-cpp ships no ROCm build.
 */
export function parseRocmSmiGpus(textOutput: string): GpuReading[] {
  let json: unknown;
  try {
    json = JSON.parse(textOutput);
  } catch {
    return [];
  }
  if (typeof json !== 'object' || json === null) return [];
  const out: GpuReading[] = [];
  for (const [key, value] of Object.entries(json as Record<string, unknown>)) {
    const match = /^card(\d+)$/.exec(key);
    if (!match || typeof value !== 'object' || value === null) continue;
    const card = value as Record<string, unknown>;
    const index = Number(match[1]);
    const total = field(card, /^VRAM Total Memory \(B\)$/i);
    if (total === null || index > 63) continue;
    const used = field(card, /^VRAM Total Used Memory \(B\)$/i) ?? 0;
    const name = text(card, /^(Card series|Device Name|Card model|Card SKU)$/i) ?? `AMD GPU ${index}`;
    out.push({
      index,
      name: clipName(name),
      vendor: 'amd',
      compute: 'vulkan',
      vramTotalBytes: total,
      vramFreeBytes: Math.max(0, total - used),
      unifiedMemory: false,
      utilizationPct: within(field(card, /^GPU use \(%\)$/i), 0, 100),
      temperatureC: within(field(card, /^Temperature \(Sensor (edge|junction)\) \(C\)$/i), -50, 200),
      powerW: within(field(card, /Graphics Package Power \(W\)$/i), 0, 10_000),
    });
  }
  return out.sort((a, b) => a.index - b.index).slice(0, MAX_REPORTED_GPUS);
}

/** The vendor a device name says, for node-llama-cpp's devices (which come with a name only). */
export function vendorOf(name: string): GpuReading['vendor'] {
  if (/nvidia|geforce|quadro|tesla|\brtx\b|\bgtx\b/i.test(name)) return 'nvidia';
  if (/\bamd\b|radeon|instinct/i.test(name)) return 'amd';
  if (/apple/i.test(name)) return 'apple';
  if (/intel/i.test(name)) return 'intel';
  return 'other';
}

/** What node-llama-cpp said after loading with a GPU (src/doctor/hardware.ts detectLlamaCpp). */
export interface LlamaGpuFacts {
  /** The GPU type it loaded with, null for CPU. */
  active: 'cuda' | 'vulkan' | 'metal' | null;
  devices: string[];
  /** VRAM summed over its devices. */
  vram: { totalBytes: number; freeBytes: number } | null;
}

/**
 * Readings from node-llama-cpp alone, for a platform without nvidia-smi or rocm-smi (Vulkan on Intel,
 * Apple silicon). It reports VRAM summed over devices: with several, each is given an equal share (the
 * smi tools, when present, replace this with per-device figures). On Apple silicon the GPU uses the
 * system RAM: VRAM is the machine's memory and `unifiedMemory` says it is not to be counted twice.
 */
export function llamaCppReadings(facts: LlamaGpuFacts, system: { platform: NodeJS.Platform; arch: string; totalMemoryBytes: number; freeMemoryBytes: number }): GpuReading[] {
  if (facts.active === null) return [];
  const apple = system.platform === 'darwin' && system.arch === 'arm64';
  const names = facts.devices.length > 0 ? facts.devices.slice(0, MAX_REPORTED_GPUS) : [apple ? 'Apple GPU' : `${facts.active} GPU`];
  const share = (bytes: number): number => Math.floor(bytes / names.length);
  return names.map((name, index) => {
    const vendor = apple ? 'apple' : vendorOf(name);
    const total = apple ? system.totalMemoryBytes : share(facts.vram?.totalBytes ?? 0);
    const free = apple ? system.freeMemoryBytes : share(facts.vram?.freeBytes ?? 0);
    return {
      index,
      name: clipName(name) || `GPU ${index}`,
      vendor,
      compute: facts.active as GpuReading['compute'],
      vramTotalBytes: total,
      vramFreeBytes: Math.min(total, free),
      unifiedMemory: apple,
      utilizationPct: null,
      temperatureC: null,
      powerW: null,
    };
  });
}

/**
 * A node's readings: the smi tools' per-device figures when they found devices (NVIDIA's first, then
 * AMD's, renumbered in that order), else node-llama-cpp's.
 */
export function mergeReadings(smi: { nvidia: GpuReading[]; amd: GpuReading[] }, llama: GpuReading[]): GpuReading[] {
  const fromSmi = [...smi.nvidia, ...smi.amd];
  if (fromSmi.length === 0) return llama.slice(0, MAX_REPORTED_GPUS);
  return fromSmi.slice(0, MAX_REPORTED_GPUS).map((gpu, index) => ({ ...gpu, index }));
}

/** The readings summed for the metrics sampler's one GPU figure (src/metrics/series.ts GpuUse). */
export function gpuUse(readings: readonly GpuReading[]): GpuUse | null {
  if (readings.length === 0) return null;
  const known = readings.filter((g) => g.utilizationPct !== null);
  const totalBytes = readings.reduce((sum, g) => sum + g.vramTotalBytes, 0);
  const freeBytes = readings.reduce((sum, g) => sum + g.vramFreeBytes, 0);
  return {
    devices: readings.length,
    utilPct: known.length === 0 ? null : known.reduce((sum, g) => sum + (g.utilizationPct ?? 0), 0) / known.length,
    usedBytes: Math.max(0, totalBytes - freeBytes),
    totalBytes,
  };
}

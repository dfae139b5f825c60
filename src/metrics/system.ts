import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, freemem, totalmem } from 'node:os';
import { cpuBusyPercent, sumCpuTimes, type CpuTimes } from './rate.js';
import type { GpuUse } from './series.js';

/**
 * This machine's CPU, memory and GPU use, read once per sample.
 *
 * - CPU: busy share of all cores since the previous reading (`os.cpus()` times).
 * - Memory: total minus available (`os.freemem()`, which is MemAvailable on Linux: page cache the
 *   kernel can drop counts as available).
 * - GPU: NVIDIA only, through `nvidia-smi` when the device node `/dev/nvidia0` exists (the same check
 *   `shoal doctor` makes); utilization and memory summed over the devices. Other GPUs report null:
 *   node-llama-cpp's VRAM query would load the engine into the node process just to read it.
 */

/** How long one `nvidia-smi` call may take before its figure is skipped. */
export const GPU_PROBE_TIMEOUT_MS = 1500;
const NVIDIA_SMI_ARGS = ['--query-gpu=utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'];
const MIB = 1024 * 1024;

/** `nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits` output, summed over devices. */
export function parseNvidiaSmi(text: string): GpuUse | null {
  const rows = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  let devices = 0;
  let utilSum = 0;
  let utilKnown = 0;
  let usedBytes = 0;
  let totalBytes = 0;
  for (const row of rows) {
    const fields = row.split(',').map((f) => f.trim());
    if (fields.length !== 3) return null;
    const [util, used, total] = fields.map(numberOrNull) as [number | null, number | null, number | null];
    // A device that does not report its memory size is not one we can chart.
    if (total === null) continue;
    devices += 1;
    totalBytes += total * MIB;
    usedBytes += (used ?? 0) * MIB;
    if (util !== null && util >= 0 && util <= 100) {
      utilSum += util;
      utilKnown += 1;
    }
  }
  if (devices === 0) return null;
  return { devices, utilPct: utilKnown === 0 ? null : utilSum / utilKnown, usedBytes, totalBytes };
}

/** "[N/A]", "[Not Supported]" and the like are unknown. */
function numberOrNull(field: string): number | null {
  if (!/^\d+(\.\d+)?$/.test(field)) return null;
  return Number(field);
}

export interface SystemReading {
  cpu: { pct: number | null; cores: number };
  memory: { usedBytes: number; totalBytes: number };
  gpu: GpuUse | null;
}

export interface SystemProbeOptions {
  /** Replaces the nvidia-smi reader (tests, other platforms). */
  readGpu?: () => Promise<GpuUse | null>;
}

export class SystemProbe {
  private lastCpu: CpuTimes = sumCpuTimes(cpus());
  private readonly readGpu: (() => Promise<GpuUse | null>) | null;
  private gpuInFlight: Promise<void> | null = null;
  private lastGpu: GpuUse | null = null;
  /** Set when nvidia-smi is not installed: no point spawning it every sample. */
  private gpuUnavailable = false;

  constructor(options: SystemProbeOptions = {}) {
    this.readGpu = options.readGpu ?? (existsSync('/dev/nvidia0') ? () => this.nvidiaSmi() : null);
  }

  /** CPU and memory now; the GPU figure of the last probe that finished (one probe at a time). */
  read(): SystemReading {
    const list = cpus();
    const now = sumCpuTimes(list);
    const pct = cpuBusyPercent(this.lastCpu, now);
    this.lastCpu = now;
    const total = totalmem();
    this.probeGpu();
    return {
      cpu: { pct, cores: Math.max(1, list.length) },
      memory: { usedBytes: Math.max(0, total - freemem()), totalBytes: total },
      gpu: this.lastGpu,
    };
  }

  /** Waits for a GPU probe in flight (for a first reading that already has the GPU). */
  async settle(): Promise<void> {
    this.probeGpu();
    await this.gpuInFlight;
  }

  private probeGpu(): void {
    if (this.readGpu === null || this.gpuUnavailable || this.gpuInFlight !== null) return;
    this.gpuInFlight = this.readGpu()
      .then(
        (gpu) => {
          this.lastGpu = gpu;
        },
        () => {
          this.lastGpu = null;
        },
      )
      .finally(() => {
        this.gpuInFlight = null;
      });
  }

  private nvidiaSmi(): Promise<GpuUse | null> {
    return new Promise((resolve) => {
      execFile('nvidia-smi', NVIDIA_SMI_ARGS, { timeout: GPU_PROBE_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 }, (error, stdout) => {
        if ((error as NodeJS.ErrnoException | null)?.code === 'ENOENT') this.gpuUnavailable = true;
        resolve(error ? null : parseNvidiaSmi(stdout));
      });
    });
  }
}

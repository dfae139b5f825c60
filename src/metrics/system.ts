import { cpus, freemem, totalmem } from 'node:os';
import { cpuBusyPercent, sumCpuTimes, type CpuTimes } from './rate.js';
import type { GpuUse } from './series.js';

/**
 * This machine's CPU, memory and GPU use, read once per sample.
 *
 * - CPU: busy share of all cores since the previous reading (`os.cpus()` times).
 * - Memory: total minus available (`os.freemem()`, which is MemAvailable on Linux: page cache the
 *   kernel can drop counts as available).
 * - GPU: what the node's GPU monitor last read (src/worker/gpus.ts: detection, the smi tools, the
 *   SHOAL_TEST_GPUS hook), summed over the devices; null on a node without GPUs.
 */

export interface SystemReading {
  cpu: { pct: number | null; cores: number };
  memory: { usedBytes: number; totalBytes: number };
  gpu: GpuUse | null;
}

export interface SystemProbeOptions {
  /** The GPU figure (the node reads it from its GPU monitor); absent: none is charted. */
  readGpu?: () => Promise<GpuUse | null>;
}

export class SystemProbe {
  private lastCpu: CpuTimes = sumCpuTimes(cpus());
  private readonly readGpu: (() => Promise<GpuUse | null>) | null;
  private gpuInFlight: Promise<void> | null = null;
  private lastGpu: GpuUse | null = null;

  constructor(options: SystemProbeOptions = {}) {
    this.readGpu = options.readGpu ?? null;
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
    if (this.readGpu === null || this.gpuInFlight !== null) return;
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
}

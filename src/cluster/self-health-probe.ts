// Reads what src/cluster/self-health.ts decides over: the models disk's free space (statfs, cheap
// enough for every beat), and what the node's parts already hold in memory.

import { statfs } from 'node:fs/promises';
import type { NodeMoment } from '../wire/diagnostics.js';
import type { DownloadReport, HealthReasonReport, RunnerReport } from '../wire/telemetry.js';
import { selfHealthReasons } from './self-health.js';

export interface SelfHealthProbeOptions {
  /** The models store's directory (its filesystem is the one downloads fill). */
  modelsDir: string;
  /** The free disk the store leaves alone (SHOAL_DISK_RESERVE_BYTES or its default): below it, downloads are refused. */
  reserveBytes: number;
  /** The event log's degradation (ControlPlane.health's reasons). */
  persistence: () => readonly { text: string; remediation: string }[];
  downloads: () => readonly DownloadReport[];
  runners: () => readonly RunnerReport[];
  /** The compute the managed engines were built for (their manifest); null when they are not built. */
  engineCompute: string | null;
  gpuPresent: () => boolean;
  /** The node recorder's moments (Unix-millisecond times). */
  moments: () => readonly NodeMoment[];
  nowMs?: () => number;
}

export function selfHealthProbe(options: SelfHealthProbeOptions): () => Promise<HealthReasonReport[]> {
  return async () => {
    let modelsDisk: { path: string; freeBytes: number; reserveBytes: number } | null = null;
    try {
      const fs = await statfs(options.modelsDir);
      modelsDisk = { path: options.modelsDir, freeBytes: fs.bavail * fs.bsize, reserveBytes: options.reserveBytes };
    } catch {
      // Unreadable (the directory went away): no reason rather than a wrong one; the doctor says more.
    }
    return selfHealthReasons({
      nowMs: (options.nowMs ?? Date.now)(),
      persistence: options.persistence(),
      downloads: options.downloads(),
      runners: options.runners(),
      modelsDisk,
      engineCompute: options.engineCompute,
      gpuPresent: options.gpuPresent(),
      moments: options.moments(),
    });
  };
}

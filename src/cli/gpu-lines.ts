// `shoal status`'s GPU lines: one per node, from each node's latest resources report in `/state`.

import { z } from 'zod';
import type { StatusView } from '../api/control/control.js';
import { formatBytes } from '../common/format-bytes.js';
import { GpuReading } from '../wire/telemetry.js';

/** The part of a resources view this reads (the port leaves `resources` opaque). */
const ReportedGpus = z.object({ gpus: z.array(GpuReading) });

function describe(gpu: GpuReading): string {
  const figures = [
    `${formatBytes(gpu.vramFreeBytes)} free of ${formatBytes(gpu.vramTotalBytes)}${gpu.unifiedMemory ? ' (unified memory)' : ''}`,
    gpu.utilizationPct !== null ? `${Math.round(gpu.utilizationPct)}% busy` : null,
    gpu.temperatureC !== null ? `${Math.round(gpu.temperatureC)} °C` : null,
    gpu.powerW !== null ? `${Math.round(gpu.powerW)} W` : null,
  ].filter((f): f is string => f !== null);
  return `${gpu.name} (${gpu.compute}): ${figures.join(', ')}`;
}

/**
 * `GPUs:` and a line per node (the members, or this node alone): its devices, `none`, or `not reported`
 * while its first resources report is still to come.
 */
export function gpuLines(s: Pick<StatusView, 'nodeId' | 'members' | 'resources'>, name: (nodeId: string) => string): string[] {
  const nodes = s.members.length > 0 ? s.members.map((m) => m.nodeId) : [s.nodeId];
  const width = Math.max(...nodes.map((id) => name(id).length));
  const lines = ['GPUs:'];
  for (const nodeId of nodes) {
    const report = ReportedGpus.safeParse(s.resources[nodeId]);
    const label = `  ${name(nodeId).padEnd(width)}  `;
    if (!report.success) {
      lines.push(`${label}not reported`);
      continue;
    }
    const [first, ...rest] = report.data.gpus;
    if (first === undefined) {
      lines.push(`${label}none`);
      continue;
    }
    lines.push(`${label}${describe(first)}`);
    for (const gpu of rest) lines.push(`${' '.repeat(label.length)}${describe(gpu)}`);
  }
  return lines;
}

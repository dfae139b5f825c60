import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * Physical cores, the right default for engine threads: hyper-threads share the memory bandwidth
 * that decode is bound by, so counting them oversubscribes. Falls back to logical CPUs off Linux.
 */
export function physicalCoreCount(cpuinfo?: string): number {
  let text = cpuinfo;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return availableParallelism();
    }
  }
  const cores = new Set<string>();
  let physicalId = '0';
  for (const line of text.split('\n')) {
    const [key, value] = line.split(':').map((part) => part.trim());
    if (key === 'physical id' && value !== undefined) physicalId = value;
    else if (key === 'core id' && value !== undefined) cores.add(`${physicalId}:${value}`);
  }
  return cores.size > 0 ? cores.size : availableParallelism();
}

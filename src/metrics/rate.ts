/** Rates and shares computed from two readings of a monotonic counter. */

/**
 * Events per second between two readings. 0 when no time passed (or the clock went back), and 0
 * when the counter went down (a restart reset it): a rate is never negative or infinite.
 */
export function perSecond(previous: number, current: number, intervalMs: number): number {
  if (!(intervalMs > 0) || !Number.isFinite(intervalMs)) return 0;
  const delta = current - previous;
  if (!(delta > 0) || !Number.isFinite(delta)) return 0;
  return (delta * 1000) / intervalMs;
}

/** CPU time summed over all cores, in the units `os.cpus()` reports (milliseconds). */
export interface CpuTimes {
  idle: number;
  total: number;
}

export function sumCpuTimes(cpus: readonly { times: { user: number; nice: number; sys: number; idle: number; irq: number } }[]): CpuTimes {
  let idle = 0;
  let total = 0;
  for (const cpu of cpus) {
    const t = cpu.times;
    idle += t.idle;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
  }
  return { idle, total };
}

/**
 * Share of CPU time that was busy between two readings, 0-100 over all cores together (100 means
 * every core busy). Null when no CPU time passed between them or the counters went back (a core
 * went offline): there is nothing to divide.
 */
export function cpuBusyPercent(previous: CpuTimes, current: CpuTimes): number | null {
  const total = current.total - previous.total;
  const idle = current.idle - previous.idle;
  if (!(total > 0) || idle < 0 || idle > total) return null;
  return ((total - idle) / total) * 100;
}

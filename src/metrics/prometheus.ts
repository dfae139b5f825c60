import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { OUTCOMES, TASK_KINDS, type TrackerCounters, type TrackerObserver } from './tracker.js';
import type { Sample } from './series.js';
import type { GpuReading } from '../wire/telemetry.js';

/** One node's GPUs as its latest resources report says (this node's read now). */
export interface NodeGpus {
  nodeId: string;
  name: string;
  gpus: readonly GpuReading[];
}

/**
 * The node's metrics in Prometheus text format (`GET /metrics`), in a registry of its own (never
 * prom-client's global one, so two nodes in one process do not collide). Every name starts `shoal_`;
 * the list is in docs/API.md.
 */

/** Upper bounds of the TTFT histogram's buckets, in seconds. */
export const TTFT_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface NodeMetricsExport {
  registry: Registry;
  /** Feeds the request counters; pass to the RequestTracker. */
  observer: TrackerObserver;
  /** Sets the gauges that come from the sampler (rates, percentiles, CPU, memory, GPU). */
  updateFromSample(sample: Sample): void;
}

/**
 * Per-GPU gauges of every member (`shoal_gpu_*{node_id,node,gpu,name,compute}`), read from `read` at each
 * scrape, so a GPU that is gone from the reports is gone from the scrape. A figure the platform does not
 * report (null) has no sample.
 */
function gpuGauges(registers: Registry[], read: () => NodeGpus[]): void {
  const labelNames = ['node_id', 'node', 'gpu', 'name', 'compute'] as const;
  const gauge = (name: string, help: string, value: (gpu: GpuReading) => number | null): void => {
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        for (const node of read()) {
          for (const gpu of node.gpus) {
            const figure = value(gpu);
            if (figure !== null) this.set({ node_id: node.nodeId, node: node.name, gpu: String(gpu.index), name: gpu.name, compute: gpu.compute }, figure);
          }
        }
      },
    });
  };
  gauge('shoal_gpu_vram_total_bytes', 'VRAM of one GPU of a member (system RAM on unified-memory machines).', (g) => g.vramTotalBytes);
  gauge('shoal_gpu_vram_free_bytes', 'Free VRAM of one GPU of a member, as last sampled.', (g) => g.vramFreeBytes);
  gauge('shoal_gpu_utilization_percent', 'Utilization of one GPU of a member, 0-100 (absent where the platform does not report it).', (g) => g.utilizationPct);
  gauge('shoal_gpu_temperature_celsius', 'Temperature of one GPU of a member (absent where not reported).', (g) => g.temperatureC);
  gauge('shoal_gpu_power_watts', 'Power draw of one GPU of a member (absent where not reported).', (g) => g.powerW);
}

/** `live` is read at every scrape for the in-flight and waiting gauges; `gpus` (when given) for the per-GPU gauges. */
export function createNodeMetrics(info: { nodeId: string; name: string; version: string }, live: () => TrackerCounters, gpus?: () => NodeGpus[]): NodeMetricsExport {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry, prefix: 'shoal_' });
  if (gpus) gpuGauges(registers, gpus);

  new Gauge({ name: 'shoal_node_info', help: 'This node: its id, name and Shoal version (always 1).', labelNames: ['node_id', 'name', 'version'], registers }).set(
    { node_id: info.nodeId, name: info.name, version: info.version },
    1,
  );
  const requests = new Counter({ name: 'shoal_requests_total', help: 'Tasks the API dispatched, by kind and how they ended (refused: before starting).', labelNames: ['kind', 'outcome'], registers });
  for (const kind of TASK_KINDS) for (const outcome of OUTCOMES) requests.inc({ kind, outcome }, 0);
  const generated = new Counter({ name: 'shoal_generated_tokens_total', help: 'Tokens generated for requests this node received.', registers });
  const prompt = new Counter({ name: 'shoal_prompt_tokens_total', help: 'Prompt tokens of requests this node received.', registers });
  const ttft = new Histogram({
    name: 'shoal_time_to_first_token_seconds',
    help: 'Arrival to first generated token (text, reasoning or tool call), streamed or not.',
    buckets: TTFT_BUCKETS_S,
    registers,
  });
  new Gauge({
    name: 'shoal_requests_in_flight',
    help: 'Requests between arrival and end, waiting ones included.',
    registers,
    collect() {
      this.set(live().inFlight);
    },
  });
  new Gauge({
    name: 'shoal_requests_waiting',
    help: 'Requests in flight whose first event has not arrived yet (queued in a runner).',
    registers,
    collect() {
      this.set(live().waiting);
    },
  });
  const tokensPerS = new Gauge({ name: 'shoal_generated_tokens_per_second', help: 'Generated tokens per second over the last sample interval (2 s).', registers });
  const ttftWindow = new Gauge({
    name: 'shoal_time_to_first_token_window_seconds',
    help: 'Exact nearest-rank TTFT percentiles over first tokens in the last 5 minutes (absent when there were none).',
    labelNames: ['quantile'],
    registers,
  });
  const ttftWindowCount = new Gauge({ name: 'shoal_time_to_first_token_window_count', help: 'First tokens in the last 5 minutes the percentiles are over.', registers });
  const cpuPct = new Gauge({ name: 'shoal_node_cpu_percent', help: 'Busy share of all CPU cores together over the last sample interval, 0-100.', registers });
  const cpuCores = new Gauge({ name: 'shoal_node_cpu_cores', help: 'Logical CPU cores.', registers });
  const memUsed = new Gauge({ name: 'shoal_node_memory_used_bytes', help: 'Memory in use (total minus available).', registers });
  const memTotal = new Gauge({ name: 'shoal_node_memory_total_bytes', help: 'Physical memory.', registers });
  // GPU gauges exist only once a GPU was read: a node without one exports no made-up zeros.
  let gpu: { used: Gauge; total: Gauge; devices: Gauge } | null = null;
  let gpuUtil: Gauge | null = null;

  const observer: TrackerObserver = {
    firstToken: (ms) => ttft.observe(ms / 1000),
    generated: (tokens) => generated.inc(tokens),
    prompt: (tokens) => prompt.inc(tokens),
    ended: (kind, outcome) => requests.inc({ kind, outcome }),
  };

  const updateFromSample = (sample: Sample): void => {
    tokensPerS.set(sample.tokensPerS);
    // No first token in the window: no percentile at all (rather than a NaN some parsers refuse).
    for (const [quantile, ms] of [['0.5', sample.ttftMs.p50], ['0.95', sample.ttftMs.p95], ['0.99', sample.ttftMs.p99]] as const) {
      if (ms === null) ttftWindow.remove({ quantile });
      else ttftWindow.set({ quantile }, ms / 1000);
    }
    ttftWindowCount.set(sample.ttftMs.count);
    if (sample.cpu.pct !== null) cpuPct.set(sample.cpu.pct);
    cpuCores.set(sample.cpu.cores);
    memUsed.set(sample.memory.usedBytes);
    memTotal.set(sample.memory.totalBytes);
    if (sample.gpu !== null) {
      gpu ??= {
        used: new Gauge({ name: 'shoal_node_gpu_memory_used_bytes', help: 'GPU memory in use, all devices.', registers }),
        total: new Gauge({ name: 'shoal_node_gpu_memory_total_bytes', help: 'GPU memory, all devices.', registers }),
        devices: new Gauge({ name: 'shoal_node_gpu_devices', help: 'GPU devices read.', registers }),
      };
      gpu.used.set(sample.gpu.usedBytes);
      gpu.total.set(sample.gpu.totalBytes);
      gpu.devices.set(sample.gpu.devices);
      if (sample.gpu.utilPct !== null) {
        gpuUtil ??= new Gauge({ name: 'shoal_node_gpu_utilization_percent', help: 'Mean GPU utilization over the devices, 0-100.', registers });
        gpuUtil.set(sample.gpu.utilPct);
      }
    }
    // A figure that became unknown is withdrawn, not left at its last value.
    if ((sample.gpu === null || sample.gpu.utilPct === null) && gpuUtil !== null) {
      registry.removeSingleMetric('shoal_node_gpu_utilization_percent');
      gpuUtil = null;
    }
    if (sample.gpu === null && gpu !== null) {
      for (const name of ['shoal_node_gpu_memory_used_bytes', 'shoal_node_gpu_memory_total_bytes', 'shoal_node_gpu_devices']) registry.removeSingleMetric(name);
      gpu = null;
    }
  };
  return { registry, observer, updateFromSample };
}

// The doctor's report: checks from every area assembled with the facts they came from. Pure: no I/O,
// so the same facts always give the same report. `DoctorReport` is also the `--json` output.

import { z } from 'zod';
import { formatBytes } from '../common/format-bytes.js';
import { ENGINE_COMPUTES, ENGINE_NAMES } from './engines.js';
import { GPU_TYPES, type HardwareInfo } from './hardware.js';

export const CHECK_LEVELS = ['ok', 'warn', 'error'] as const;
export type CheckLevel = (typeof CHECK_LEVELS)[number];

export const Check = z.strictObject({
  /** Stable, dotted: `<area>.<subject>` (`storage.free_space`, `engines.llama-server`). */
  id: z.string().min(1),
  level: z.enum(CHECK_LEVELS),
  summary: z.string().min(1),
  detail: z.string().optional(),
  /** What to do about a warning or an error. */
  remediation: z.string().optional(),
});
export type Check = z.infer<typeof Check>;

const Bytes = z.number().nonnegative();
const BackendTagSchema = z.string().regex(/^(llama_cpp|llama_server|rpc)-(cpu|cuda|vulkan|metal)$/);

export const HardwareSchema = z.strictObject({
  hostname: z.string(),
  platform: z.string(),
  arch: z.string(),
  cpu: z.strictObject({ model: z.string(), physicalCores: z.number().int().positive(), logicalCores: z.number().int().nonnegative() }),
  memory: z.strictObject({
    totalBytes: Bytes,
    freeBytes: Bytes,
    bandwidth: z
      .strictObject({
        gbPerSecond: z.number().positive(),
        threads: z.number().int().positive(),
        bufferBytes: z.number().int().positive(),
        measuredAt: z.string(),
        cached: z.boolean(),
      })
      .nullable(),
  }),
  gpu: z.strictObject({
    supportedTypes: z.array(z.enum(GPU_TYPES)),
    active: z.enum(GPU_TYPES).nullable(),
    devices: z.array(z.string()),
    vram: z.strictObject({ totalBytes: Bytes, usedBytes: Bytes, freeBytes: Bytes }).nullable(),
    unifiedMemoryBytes: Bytes,
    nvidiaDevicePresent: z.boolean(),
    renderNodePresent: z.boolean(),
  }),
  llamaCpp: z.strictObject({ loaded: z.boolean(), error: z.string().nullable(), systemInfo: z.string().nullable() }),
});

export const EngineBinaryStatus = z.strictObject({
  name: z.enum(ENGINE_NAMES),
  /** Where the binary is (or would be) in the cache. */
  path: z.string().nullable(),
  built: z.boolean(),
  /** `--version` ran and exited 0. */
  runs: z.boolean(),
  version: z.string().nullable(),
  error: z.string().nullable(),
});
export type EngineBinaryStatus = z.infer<typeof EngineBinaryStatus>;

export const EnginesStatus = z.strictObject({
  /** The pinned llama.cpp source node-llama-cpp ships; null when it is missing. */
  source: z.strictObject({ commit: z.string(), tag: z.string().nullable(), bundlePath: z.string() }).nullable(),
  cacheRoot: z.string(),
  /** `<cacheRoot>/<commit>`, whether built or not; null without a source. */
  cacheDir: z.string().nullable(),
  compute: z.enum(ENGINE_COMPUTES).nullable(),
  builtAt: z.string().nullable(),
  buildSeconds: z.number().nullable(),
  binaries: z.array(EngineBinaryStatus),
  /** Where the cached engines came from (their manifest); absent or null when none are cached or the manifest predates releases. */
  origin: z.enum(['build', 'release']).nullable().optional(),
  /** Whether a prebuilt release for this machine is recorded (src/doctor/releases.ts): a node provisions from it instead of building. */
  releaseAvailable: z.boolean().optional(),
  /** Checked only when something is not built: what a build would still need. */
  buildTools: z.strictObject({ ok: z.boolean(), missing: z.array(z.string()), installHint: z.string().nullable() }).nullable(),
});
export type EnginesStatus = z.infer<typeof EnginesStatus>;

export const BackendsStatus = z.strictObject({
  /** What this node advertises. */
  tags: z.array(BackendTagSchema),
  /** What detection found (equal to `tags` unless a configured list overrides it). */
  detected: z.array(BackendTagSchema),
  source: z.enum(['detected', 'config']),
  gpuRequest: z.union([z.literal('auto'), z.literal(false), z.enum(GPU_TYPES)]),
});
export type BackendsStatus = z.infer<typeof BackendsStatus>;

export const StorageStatus = z.strictObject({
  dataDir: z.string(),
  modelsDir: z.string(),
  dataDirExists: z.boolean(),
  modelsDirExists: z.boolean(),
  modelsDirNotDirectory: z.boolean(),
  writable: z.boolean(),
  writeError: z.string().nullable(),
  freeBytes: Bytes.nullable(),
  totalBytes: Bytes.nullable(),
  probedPath: z.string(),
});

export const Fix = z.strictObject({
  id: z.string(),
  /** `created` directories, `built` or (already) `cached` engines, `failed` anything. */
  action: z.enum(['created', 'built', 'cached', 'failed', 'none']),
  summary: z.string(),
});
export type Fix = z.infer<typeof Fix>;

export const DoctorReport = z.strictObject({
  /** No check is an error. */
  ok: z.boolean(),
  /** How many checks came out at each level. */
  counts: z.strictObject({ ok: z.number().int(), warn: z.number().int(), error: z.number().int() }),
  checks: z.array(Check),
  hardware: HardwareSchema,
  backends: BackendsStatus,
  engines: EnginesStatus,
  storage: StorageStatus,
  /** What `--fix` did, before the checks above were taken again; absent without --fix. */
  fixes: z.array(Fix).optional(),
});
export type DoctorReport = z.infer<typeof DoctorReport>;

export interface ReportParts {
  checks: Check[];
  hardware: HardwareInfo;
  backends: BackendsStatus;
  engines: EnginesStatus;
  storage: z.infer<typeof StorageStatus>;
  fixes?: Fix[];
}

/** Puts the report together in the order the checks were taken; `ok` means no check is an error. */
export function assembleReport(parts: ReportParts): DoctorReport {
  const checks = [...parts.checks];
  const report: DoctorReport = {
    ok: checks.every((check) => check.level !== 'error'),
    counts: countLevels(checks),
    checks,
    hardware: parts.hardware,
    backends: parts.backends,
    engines: parts.engines,
    storage: parts.storage,
  };
  if (parts.fixes !== undefined) report.fixes = parts.fixes;
  return report;
}

export function countLevels(checks: readonly Check[]): Record<CheckLevel, number> {
  const counts: Record<CheckLevel, number> = { ok: 0, warn: 0, error: 0 };
  for (const check of checks) counts[check.level]++;
  return counts;
}

/** Exit status of `shoal doctor`: 0 without errors, 1 with any. */
export function exitCodeFor(report: Pick<DoctorReport, 'checks'>): number {
  return report.checks.some((check) => check.level === 'error') ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Checks from facts

/** Free memory under this is worth a warning: even a small model will not load. */
const LOW_FREE_MEMORY_BYTES = 1024 ** 3;

const GPU_LABEL = { cuda: 'CUDA', vulkan: 'Vulkan', metal: 'Metal' } as const;

export function hardwareChecks(hardware: HardwareInfo): Check[] {
  const checks: Check[] = [
    {
      id: 'hardware.cpu',
      level: 'ok',
      summary: `${hardware.cpu.model}: ${hardware.cpu.physicalCores} physical cores, ${hardware.cpu.logicalCores} logical (engines get ${hardware.cpu.physicalCores} threads by default)`,
    },
  ];
  const memory = `${formatBytes(hardware.memory.totalBytes)} memory, ${formatBytes(hardware.memory.freeBytes)} free`;
  checks.push(
    hardware.memory.freeBytes < LOW_FREE_MEMORY_BYTES
      ? {
          id: 'hardware.memory',
          level: 'warn',
          summary: `${memory}: little room for models`,
          remediation: 'stop other memory-hungry processes, or place models on other nodes',
        }
      : { id: 'hardware.memory', level: 'ok', summary: memory },
  );
  const bw = hardware.memory.bandwidth;
  checks.push(
    bw
      ? {
          id: 'hardware.bandwidth',
          level: 'ok',
          summary: `memory read bandwidth ${bw.gbPerSecond} GB/s (${bw.threads} thread${bw.threads === 1 ? '' : 's'}, ${bw.cached ? `measured ${bw.measuredAt}` : 'measured now'})`,
        }
      : {
          id: 'hardware.bandwidth',
          level: 'warn',
          summary: 'memory read bandwidth was not measured: placement predicts tokens/s without it',
          remediation: 'run shoal doctor again on an idle machine',
        },
  );
  const gpu = hardware.gpu;
  if (gpu.active) {
    const vram = gpu.vram ? `, ${formatBytes(gpu.vram.totalBytes)} VRAM (${formatBytes(gpu.vram.freeBytes)} free)` : '';
    checks.push({
      id: 'hardware.gpu',
      level: 'ok',
      summary: `${GPU_LABEL[gpu.active]}: ${gpu.devices.join(', ') || 'unnamed device'}${vram}`,
    });
  } else {
    checks.push({
      id: 'hardware.gpu',
      level: 'ok',
      summary: gpu.supportedTypes.length > 0 ? `no GPU in use (usable: ${gpu.supportedTypes.map((t) => GPU_LABEL[t]).join(', ')}): models run on the CPU` : 'no usable GPU: models run on the CPU',
    });
  }
  return checks;
}

/** A rough build time for the remediation line: about 12 core-minutes. */
function buildEstimate(cores: number): string {
  const minutes = Math.max(2, Math.round(12 / Math.max(1, cores)));
  return `about ${minutes} min on ${cores} core${cores === 1 ? '' : 's'}`;
}

export function engineChecks(engines: EnginesStatus, cores: number): Check[] {
  if (!engines.source) {
    return [
      {
        id: 'engines.source',
        level: 'warn',
        summary: 'the llama.cpp source bundled with node-llama-cpp is missing: llama-server and ggml-rpc-server cannot be built',
        remediation: 'reinstall dependencies (npm ci)',
      },
    ];
  }
  const pin = `${engines.source.commit.slice(0, 8)}${engines.source.tag ? ` (${engines.source.tag})` : ''}`;
  const checks: Check[] = [];
  const toolsLine =
    engines.buildTools && !engines.buildTools.ok
      ? `first install ${engines.buildTools.missing.join(', ')}: ${engines.buildTools.installHint}; then `
      : '';
  for (const binary of engines.binaries) {
    const id = `engines.${binary.name}`;
    if (!binary.built) {
      checks.push({
        id,
        level: 'warn',
        summary: `${binary.name} is not built: ${binary.name === 'llama-server' ? 'llama_server' : 'rpc'} backends are not available`,
        remediation: engines.releaseAvailable
          ? `a node started with \`shoal run\` installs the prebuilt release of llama.cpp ${pin} in the background by itself (progress: shoal status); or run shoal doctor --fix to build it now (${buildEstimate(cores)})`
          : `${toolsLine}run shoal doctor --fix to build it from the bundled llama.cpp ${pin} (${buildEstimate(cores)}); a node started with \`shoal run\` builds it in the background by itself while it serves (progress: shoal status)`,
      });
    } else if (!binary.runs) {
      checks.push({
        id,
        level: 'warn',
        summary: `${binary.name} is built but does not run`,
        ...(binary.error ? { detail: binary.error } : {}),
        remediation: `${toolsLine}rebuild it: remove ${engines.cacheDir ?? 'the engine cache'} and run shoal doctor --fix`,
      });
    } else {
      checks.push({
        id,
        level: 'ok',
        summary: `${binary.name} ${engines.origin === 'release' ? 'installed from the prebuilt release of' : 'built from'} llama.cpp ${pin}${engines.compute ? ` for ${engines.compute}` : ''}, runs${binary.version ? ` (${binary.version})` : ''}`,
      });
    }
  }
  return checks;
}

export function backendChecks(backends: BackendsStatus): Check[] {
  if (backends.tags.length === 0) {
    return [
      {
        id: 'backends.advertised',
        level: 'error',
        summary: 'this node advertises no backend: nothing can be placed on it',
        remediation: 'see the checks above',
      },
    ];
  }
  const from = backends.source === 'config' ? ' (from the configured list)' : '';
  return [{ id: 'backends.advertised', level: 'ok', summary: `advertises ${backends.tags.join(', ')}${from}` }];
}

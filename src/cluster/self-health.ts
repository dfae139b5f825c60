// Health that explains (issue #18): what only a node itself can see (its failed downloads, its models
// disk, the compute its engines were built for, its hang watchdog, its runners' breakers, its event
// log) becomes reasons with a remediation. The node publishes them on the telemetry plane with its
// build, and every member's `GET /state` adds them to what it sees of that node itself (liveness,
// src/master/core/health.ts), plus a reason when the node runs another build than the viewer.
// Pure: the shell (src/cluster/telemetry.ts, its inputs wired in src/node/node.ts) reads the inputs.

import { formatBytes } from '../common/format-bytes.js';
import type { NodeMoment } from '../wire/diagnostics.js';
import {
  HEALTH_REMEDIATION_MAX_CHARS,
  HEALTH_TEXT_MAX_CHARS,
  MAX_REPORTED_HEALTH_REASONS,
  type BuildReport,
  type DownloadReport,
  type HealthReasonReport,
  type RunnerReport,
} from '../wire/telemetry.js';

/** A hang watchdog firing (a `runner-stall` moment) stays a reason this long (10 minutes). */
export const WATCHDOG_REASON_WINDOW_MS = 10 * 60_000;

/** The codes of the reasons a node finds about itself, and the one the viewer adds (`other-build`). */
export type SelfHealthCode = 'log-not-persisted' | 'download-failed' | 'models-disk-low' | 'engines-cpu-only' | 'watchdog-fired' | 'runner-failed';
export const OTHER_BUILD_CODE = 'other-build';

export interface SelfHealthInputs {
  /** Now, on the clock of the moments' `atMs` (Unix milliseconds: the node recorder's). */
  nowMs: number;
  /** The event log's own degradation (the plane's health: a full disk), as text and remediation. */
  persistence: readonly { text: string; remediation: string }[];
  /** This node's downloads as it reports them (in progress and failed in the last 10 minutes). */
  downloads: readonly DownloadReport[];
  /** This node's runners as it reports them. */
  runners: readonly RunnerReport[];
  /** Free space on the filesystem of the models dir and the store's reserve; null when unreadable. */
  modelsDisk: { path: string; freeBytes: number; reserveBytes: number } | null;
  /** The compute the managed engines (llama-server, ggml-rpc-server) were built for; null when not built. */
  engineCompute: string | null;
  /** Whether this node has a GPU (detected, or injected by SHOAL_TEST_GPUS). */
  gpuPresent: boolean;
  /** The node's recent moments (its flight recorder), any order. */
  moments: readonly NodeMoment[];
}

const clip = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

function reason(code: SelfHealthCode, text: string, remediation: string): HealthReasonReport {
  return { code, text: clip(text, HEALTH_TEXT_MAX_CHARS), remediation: clip(remediation, HEALTH_REMEDIATION_MAX_CHARS) };
}

/** "a", "a and b", "a, b and 2 more": names inside one reason's text. */
function listed(names: readonly string[], shown = 2): string {
  const unique = [...new Set(names)];
  const head = unique.slice(0, shown);
  const more = unique.length - head.length;
  if (more > 0) return `${head.join(', ')} and ${more} more`;
  return head.length <= 1 ? (head[0] ?? '') : `${head.slice(0, -1).join(', ')} and ${head[head.length - 1]}`;
}

/**
 * This node's own reasons, at most one per kind (so the message stays bounded), in a fixed order:
 * what stops the node keeping cluster decisions first, then what it cannot do, then what it did.
 */
export function selfHealthReasons(input: SelfHealthInputs): HealthReasonReport[] {
  const reasons: HealthReasonReport[] = [];

  const persistence = input.persistence[0];
  if (persistence) reasons.push(reason('log-not-persisted', persistence.text, persistence.remediation));

  const failed = input.downloads.filter((d) => d.state === 'failed');
  const first = failed[0];
  if (first) {
    const why = first.error?.message ?? 'no reason given';
    reasons.push(
      failed.length === 1
        ? reason('download-failed', `download of ${first.modelId} failed: ${why}`, `fix the cause, then \`shoal models pull ${first.modelId}\``)
        : reason('download-failed', `${failed.length} downloads failed (${listed(failed.map((d) => d.modelId))}): ${why}`, 'fix each cause (`GET /models/downloads` has them whole), then pull them again'),
    );
  }

  const disk = input.modelsDisk;
  // The same line the store draws: below its reserve it refuses downloads (src/models/store/store.ts).
  if (disk !== null && disk.freeBytes < disk.reserveBytes) {
    reasons.push(
      reason(
        'models-disk-low',
        `${formatBytes(disk.freeBytes)} free on the models disk, under the ${formatBytes(disk.reserveBytes)} reserve: downloads are refused`,
        `remove idle models (\`shoal models rm\`) or free space on ${disk.path}`,
      ),
    );
  }

  if (input.gpuPresent && input.engineCompute === 'cpu') {
    reasons.push(
      reason(
        'engines-cpu-only',
        'llama-server and ggml-rpc-server were built for the CPU, but this node has a GPU',
        'install the GPU toolkit, run `shoal doctor --fix --engine-compute cuda` (or vulkan, metal)',
      ),
    );
  }

  const stalls = input.moments.filter((m) => m.kind === 'runner-stall' && input.nowMs - m.atMs <= WATCHDOG_REASON_WINDOW_MS).sort((a, b) => a.atMs - b.atMs);
  const lastStall = stalls[stalls.length - 1];
  if (lastStall) {
    const ago = Math.max(0, Math.round((input.nowMs - lastStall.atMs) / 60_000));
    reasons.push(
      reason(
        'watchdog-fired',
        `the hang watchdog fired ${stalls.length === 1 ? 'once' : `${stalls.length} times`} in the last 10 min (latest ${ago} min ago): ${lastStall.text}`,
        'the runner was restarted; if it recurs, run `shoal diagnose` and check `shoal logs`',
      ),
    );
  }

  const broken = input.runners.filter((r) => r.state === 'failed');
  const firstBroken = broken[0];
  if (firstBroken) {
    const text =
      broken.length === 1
        ? `${firstBroken.modelId} was given up after repeated crashes: ${firstBroken.reason ?? 'no reason given'}`
        : `${broken.length} runners were given up after repeated crashes (${listed(broken.map((r) => r.modelId))})`;
    const remediation =
      broken.length === 1 ? `see why in \`shoal logs\`, then \`shoal models stop ${firstBroken.instanceId}\` and launch it again` : 'see why in `shoal logs`, then stop those instances and launch them again';
    reasons.push(reason('runner-failed', text, remediation));
  }

  return reasons.slice(0, MAX_REPORTED_HEALTH_REASONS);
}

/** What a member said about itself: its build and its own reasons (null when nothing was heard yet). */
export interface ReportedHealth {
  build: BuildReport;
  reasons: readonly HealthReasonReport[];
}

/** A reason as `GET /state` shows it: a stable code, what is wrong, what to run or do. */
export interface ExplainedReason {
  code: string;
  text: string;
  remediation: string;
}

export interface ExplainedHealth {
  level: 'ok' | 'degraded' | 'suspect' | 'pruned';
  reasons: ExplainedReason[];
}

const describeBuild = (build: BuildReport): string => (build.commit === null ? build.version : `${build.version} (${build.commit})`);

/**
 * Whether two builds differ: another version, or both commits known and different (an install that
 * is not a git checkout has no commit to compare, so its version alone decides).
 */
export function sameBuild(a: BuildReport, b: BuildReport): boolean {
  return a.version === b.version && (a.commit === null || b.commit === null || a.commit === b.commit);
}

/**
 * A member's health as a viewer running `viewer` shows it: the viewer's own findings first, in their
 * order (liveness), then another build, then what the member says about itself. A member that is ok by
 * liveness but explains a problem is `degraded` (it still serves).
 */
export function explainHealth(base: ExplainedHealth, reported: ReportedHealth | null, viewer: BuildReport): ExplainedHealth {
  const reasons = [...base.reasons];
  if (reported !== null) {
    if (!sameBuild(reported.build, viewer)) {
      reasons.push({
        code: OTHER_BUILD_CODE,
        text: clip(`runs Shoal ${describeBuild(reported.build)}; this node runs ${describeBuild(viewer)}`, HEALTH_TEXT_MAX_CHARS),
        remediation: 'install the same Shoal release (or commit) on every node and restart them',
      });
    }
    // A reason the viewer found itself (this node's own event log, in its top-level health) is not said twice.
    reasons.push(...reported.reasons.filter((r) => !base.reasons.some((b) => b.code === r.code)));
  }
  const level = base.level === 'ok' && reasons.length > base.reasons.length ? 'degraded' : base.level;
  return { level, reasons };
}

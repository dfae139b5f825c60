// Human-readable rendering of a doctor report and of engine build progress. Pure: strings in, strings out.

import { formatBytes } from '../common/format-bytes.js';
import type { BuildProgress } from './engines.js';
import type { CheckLevel, DoctorReport } from './report.js';

const LEVEL_LABEL: Record<CheckLevel, string> = { ok: 'ok   ', warn: 'WARN ', error: 'ERROR' };

function indent(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((line) => `${prefix}${line}`)
    .join('\n');
}

export function formatReport(report: DoctorReport): string {
  const { hardware, engines, backends, storage } = report;
  const lines: string[] = [];
  lines.push(`Shoal doctor: ${hardware.hostname} (${hardware.platform}/${hardware.arch})`, '');
  lines.push('Hardware');
  lines.push(`  CPU        ${hardware.cpu.model}, ${hardware.cpu.physicalCores} physical cores (${hardware.cpu.logicalCores} logical)`);
  const bw = hardware.memory.bandwidth;
  lines.push(
    `  Memory     ${formatBytes(hardware.memory.totalBytes)} total, ${formatBytes(hardware.memory.freeBytes)} free` +
      (bw ? `, read ${bw.gbPerSecond} GB/s with ${bw.threads} thread${bw.threads === 1 ? '' : 's'}${bw.cached ? ' (cached)' : ''}` : ''),
  );
  const gpu = hardware.gpu;
  lines.push(
    gpu.active
      ? `  GPU        ${gpu.active}: ${gpu.devices.join(', ') || 'unnamed'}${gpu.vram ? `, ${formatBytes(gpu.vram.totalBytes)} VRAM, ${formatBytes(gpu.vram.freeBytes)} free` : ''}`
      : `  GPU        none in use${gpu.supportedTypes.length > 0 ? ` (usable: ${gpu.supportedTypes.join(', ')})` : ''}`,
  );
  lines.push(`  llama.cpp  ${hardware.llamaCpp.loaded ? 'node-llama-cpp loaded' : `node-llama-cpp did not load: ${hardware.llamaCpp.error ?? 'unknown error'}`}`);
  lines.push('');
  lines.push(`Backends     ${backends.tags.join(', ') || '(none)'}${backends.source === 'config' ? ` (configured; detected: ${backends.detected.join(', ') || 'none'})` : ''}`);
  lines.push('');
  if (engines.source) {
    lines.push(`Engines      llama.cpp ${engines.source.commit.slice(0, 8)}${engines.source.tag ? ` (${engines.source.tag})` : ''}, cache ${engines.cacheDir ?? engines.cacheRoot}`);
    for (const binary of engines.binaries) {
      const state = !binary.built ? 'not built' : binary.runs ? `runs${binary.version ? `, ${binary.version}` : ''}` : `does not run: ${binary.error ?? 'unknown error'}`;
      lines.push(`  ${binary.name.padEnd(17)}${state}`);
    }
  } else {
    lines.push('Engines      llama.cpp source bundle not found');
  }
  lines.push('');
  lines.push(`Storage      ${storage.modelsDir}${storage.freeBytes !== null ? `, ${formatBytes(storage.freeBytes)} free` : ''}`);
  if (report.fixes && report.fixes.length > 0) {
    lines.push('', 'Fixes');
    for (const fix of report.fixes) lines.push(`  ${fix.action.padEnd(8)} ${fix.summary}`);
  }
  lines.push('', 'Checks');
  for (const check of report.checks) {
    lines.push(`  ${LEVEL_LABEL[check.level]} ${check.id.padEnd(26)} ${check.summary}`);
    if (check.detail && check.level !== 'ok') lines.push(indent(check.detail, '          '));
    if (check.remediation && check.level !== 'ok') lines.push(`          fix: ${check.remediation}`);
  }
  const { counts } = report;
  lines.push('', `${report.ok ? 'OK' : 'PROBLEMS'}: ${counts.error} error${counts.error === 1 ? '' : 's'}, ${counts.warn} warning${counts.warn === 1 ? '' : 's'}, ${counts.ok} ok`);
  return lines.join('\n');
}

/** A one-line progress bar that fits `columns` (for a TTY, redrawn with `\r`). */
export function renderProgressBar(progress: BuildProgress, columns: number): string {
  const percent = Math.max(0, Math.min(100, Math.round(progress.percent)));
  const width = Math.max(10, Math.min(30, columns - 40));
  const filled = Math.round((width * percent) / 100);
  const head = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(percent).padStart(3)}% `;
  const room = Math.max(0, columns - head.length - 1);
  const message = progress.message.length > room ? `${progress.message.slice(0, Math.max(0, room - 1))}…` : progress.message;
  return head + message;
}

/**
 * Decides which progress events become plain lines (when stderr is not a terminal): one per phase
 * change and one each time the overall percent crosses a multiple of `step`.
 */
export function plainProgress(step = 10): (progress: BuildProgress) => string | null {
  let lastPhase: string | null = null;
  let lastBucket = -1;
  return (progress) => {
    const bucket = Math.floor(progress.percent / step);
    if (progress.phase === lastPhase && bucket === lastBucket) return null;
    lastPhase = progress.phase;
    lastBucket = bucket;
    return `engines: ${String(Math.round(progress.percent)).padStart(3)}% ${progress.phase}: ${progress.message}`;
  };
}

// Numbers as people read them on the dashboard.

import { formatBytes as formatNodeBytes } from '../../../src/common/format-bytes.js';

/** The node's own formatting (three significant digits, binary units), or a dash for a reading not there. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '–';
  return formatNodeBytes(bytes);
}

/** A rate or measurement with at most three significant digits: 0.0123 -> "0.0123", 1234.5 -> "1235", 0.50 -> "0.5". */
export function formatNumber(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  if (value === 0) return '0';
  const magnitude = Math.floor(Math.log10(Math.abs(value)));
  const decimals = Math.max(0, digits - 1 - magnitude);
  const text = value.toFixed(Math.min(decimals, 6));
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

export function formatPercent(fraction: number | null | undefined): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return '–';
  return `${Math.round(fraction * 100)}%`;
}

/** Milliseconds as "850 ms", "2.4 s", "3m05s", "2h04m". */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** "12 s ago", "4 min ago", relative to `nowMs`. */
export function formatAge(atMs: number, nowMs: number): string {
  const s = Math.max(0, Math.round((nowMs - atMs) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/** A node id is long; people compare the tail. */
export function shortId(id: string, keep = 8): string {
  return id.length <= keep + 1 ? id : `…${id.slice(-keep)}`;
}

/** Clock time of an epoch-milliseconds instant as HH:MM:SS in the viewer's time zone. */
export function formatClock(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

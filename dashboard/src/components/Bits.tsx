// Small pieces shared by the pages: health badges, progress and usage bars, empty states.

import type { ReactNode } from 'react';
import { formatBytes, formatPercent } from '../lib/format.js';
import type { NodeHealth } from '../lib/types.js';
import { HEALTH_WORDS, RUNNER_WORDS } from '../lib/words.js';

/** What a health badge says on hover: each problem with what to do about it. */
export function healthTitle(health: NodeHealth): string {
  if (health.reasons.length === 0) return HEALTH_WORDS[health.level] ?? health.level;
  return health.reasons.map((r) => `${r.text}\nWhat to do: ${r.remediation}`).join('\n\n');
}

export function HealthBadge({ health }: { health: NodeHealth }): ReactNode {
  return (
    <span className={`badge health-${health.level}`} title={healthTitle(health)} data-health={health.level}>
      {HEALTH_WORDS[health.level] ?? health.level}
      {health.reasons.length > 0 ? ` (${health.reasons.length})` : ''}
    </span>
  );
}

export function StateBadge({ state, reason }: { state: string; reason?: string | null }): ReactNode {
  const tone = state === 'ready' ? 'ok' : state === 'failed' ? 'bad' : state === 'stopped' ? 'muted' : 'warn';
  return (
    <span className={`badge tone-${tone}`} title={reason ?? undefined} data-state={state}>
      {RUNNER_WORDS[state] ?? state}
    </span>
  );
}

export function ProgressBar({ done, total, label }: { done: number; total: number; label?: string }): ReactNode {
  const fraction = total > 0 ? Math.min(1, done / total) : 0;
  return (
    <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(fraction * 100)} aria-label={label}>
      <div className="progress-fill" style={{ width: `${fraction * 100}%` }} />
      <span className="progress-text">
        {formatPercent(fraction)} · {formatBytes(done)} of {formatBytes(total)}
      </span>
    </div>
  );
}

/** A labelled usage bar: memory, CPU or GPU of one node. */
export function UsageBar({ label, fraction, text }: { label: string; fraction: number | null; text: string }): ReactNode {
  const f = fraction === null || !Number.isFinite(fraction) ? 0 : Math.max(0, Math.min(1, fraction));
  const tone = f > 0.9 ? 'bad' : f > 0.75 ? 'warn' : 'ok';
  return (
    <div className="usage" title={`${label}: ${text}`}>
      <span className="usage-label">{label}</span>
      <div className="usage-track">
        <div className={`usage-fill tone-${tone}`} style={{ width: `${f * 100}%` }} />
      </div>
      <span className="usage-text">{text}</span>
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }): ReactNode {
  return <p className="empty">{children}</p>;
}

export function ErrorBox({ title, children }: { title: string; children: ReactNode }): ReactNode {
  return (
    <div className="error-box" role="alert">
      <strong>{title}</strong>
      <div>{children}</div>
    </div>
  );
}

// A member's health reasons as small badges (issue #18): a short word per reason code, the reason and
// what to do in the hover text. The codes are docs/API.md's (`GET /state` health reasons); a code this
// dashboard does not know yet (a newer member's) shows as itself.

import type { ReactNode } from 'react';
import type { NodeHealth } from '../lib/types.js';

type Reason = NodeHealth['reasons'][number];

const LABELS: Record<string, string> = {
  pruned: 'gone',
  suspect: 'no heartbeat',
  'no-direct-connection': 'no direct link',
  'log-not-persisted': 'log not saved',
  'download-failed': 'download failed',
  'models-disk-low': 'disk low',
  'engines-cpu-only': 'CPU engines',
  'watchdog-fired': 'watchdog',
  'runner-failed': 'breaker open',
  'other-build': 'other build',
};
/** Reasons that mean the node, or something on it, does not work now; the rest are warnings. */
const BAD = new Set(['pruned', 'suspect', 'log-not-persisted', 'runner-failed']);

export function reasonLabel(reason: Reason): string {
  return LABELS[reason.code] ?? reason.code;
}

function tone(reason: Reason): 'bad' | 'warn' {
  return BAD.has(reason.code) ? 'bad' : 'warn';
}

const hover = (reason: Reason): string => `${reason.text}\nWhat to do: ${reason.remediation}`;

/** One badge per reason, for an HTML row (the members list). */
export function ReasonBadges({ health }: { health: NodeHealth }): ReactNode {
  if (health.reasons.length === 0) return null;
  return (
    // A fragment: the badges sit in the row's own flex line, spaced like its other badges.
    <>
      {health.reasons.map((r, i) => (
        <span key={i} className={`badge tone-${tone(r)}`} title={hover(r)} data-reason={r.code}>
          {reasonLabel(r)}
        </span>
      ))}
    </>
  );
}

/** Rough width of a badge's label in its 10 px font (the smallest the topology's texts go; SVG text is not measured before layout). */
const CHAR_W = 5.8;
const PAD = 8;
const GAP = 4;

/**
 * The badges inside a topology box, left to right from (x, y), as many as fit in `width`; the rest
 * are counted in a last "+N" badge whose hover text lists them.
 */
export function SvgReasonBadges({ health, x, y, width }: { health: NodeHealth; x: number; y: number; width: number }): ReactNode {
  const shown: { reason: Reason; x: number; w: number }[] = [];
  let at = 0;
  const moreW = 4 * CHAR_W + PAD;
  health.reasons.forEach((reason, i) => {
    const w = reasonLabel(reason).length * CHAR_W + PAD;
    const last = i === health.reasons.length - 1;
    if (shown.length === i && at + w + (last ? 0 : GAP + moreW) <= width) {
      shown.push({ reason, x: at, w });
      at += w + GAP;
    }
  });
  const hidden = health.reasons.slice(shown.length);
  return (
    <g transform={`translate(${x},${y})`} className="topo-reasons">
      {shown.map(({ reason, x: bx, w }, i) => (
        <g key={i} className={`topo-reason tone-${tone(reason)}`} data-reason={reason.code} transform={`translate(${bx},0)`}>
          <title>{hover(reason)}</title>
          <rect width={w} height={14} rx={7} fill="none" stroke="currentColor" />
          <text x={w / 2} y={10.5} textAnchor="middle" fill="currentColor" fontSize={10} fontWeight={600}>
            {reasonLabel(reason)}
          </text>
        </g>
      ))}
      {hidden.length > 0 && (
        <g className="topo-reason tone-muted" data-reason="more" transform={`translate(${at},0)`}>
          <title>{hidden.map(hover).join('\n\n')}</title>
          <rect width={moreW} height={14} rx={7} fill="none" stroke="currentColor" />
          <text x={moreW / 2} y={10.5} textAnchor="middle" fill="currentColor" fontSize={10} fontWeight={600}>
            {`+${hidden.length}`}
          </text>
        </g>
      )}
    </g>
  );
}

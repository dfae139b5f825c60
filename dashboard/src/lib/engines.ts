// How the dashboard words this node's engine provisioning (`/state`'s `engines`, src/doctor/provision.ts).

import type { EnginesProvisionView } from './types.js';

export interface EnginesSummary {
  /** A few words for the badge. */
  badge: string;
  tone: 'ok' | 'warn' | 'bad' | 'muted';
  /** 0..100 for a progress bar; null when there is no progress to show. */
  percent: number | null;
  /** Whether the card is worth showing: not for engines that were simply in the cache at the start. */
  show: boolean;
}

const BADGES: Record<EnginesProvisionView['phase'], { badge: string; tone: EnginesSummary['tone'] }> = {
  cached: { badge: 'In use', tone: 'ok' },
  checking: { badge: 'Checking', tone: 'muted' },
  downloading: { badge: 'Downloading', tone: 'warn' },
  verifying: { badge: 'Verifying', tone: 'warn' },
  building: { badge: 'Building', tone: 'warn' },
  ready: { badge: 'Ready', tone: 'ok' },
  failed: { badge: 'Failed', tone: 'bad' },
  unavailable: { badge: 'Not available', tone: 'bad' },
};

export function enginesSummary(view: EnginesProvisionView): EnginesSummary {
  const { badge, tone } = BADGES[view.phase];
  const running = view.phase === 'downloading' || view.phase === 'building';
  return { badge, tone, percent: running ? view.percent : null, show: view.phase !== 'cached' };
}

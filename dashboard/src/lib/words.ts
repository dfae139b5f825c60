// Typed errors and states from the node, said in words on the page.

import type { PlacementErrorView } from './types.js';

const PLACEMENT_TITLES: Record<string, string> = {
  TOPOLOGY_GAP: 'No suitable nodes',
  ALL_EXCLUDED: 'Every usable node is excluded',
  MEMORY_SHORTFALL: 'Not enough memory',
  INFO_PENDING: 'Waiting for node information',
  INVALID_REQUEST: 'The request does not fit together',
  PLACEMENT_REFUSED: 'The nodes refused the placement',
};

const PLACEMENT_ADVICE: Record<string, string> = {
  TOPOLOGY_GAP: 'Add a node that can run this model, or ask for fewer replicas or nodes.',
  ALL_EXCLUDED: 'Remove some exclusions.',
  MEMORY_SHORTFALL: 'Free memory on a node, add a node, or choose a smaller context or quantization.',
  INFO_PENDING: 'Some nodes have not reported their resources yet: try again in a few seconds.',
  INVALID_REQUEST: 'Change the options and try again.',
  PLACEMENT_REFUSED: 'Check the nodes\u2019 health, then try again.',
};

/** A title and explanation for a placement failure (`error.placement` of a 409 from /place_instance). */
export function describePlacementError(error: PlacementErrorView): { title: string; detail: string; advice: string } {
  return {
    title: PLACEMENT_TITLES[error.code] ?? `Placement failed (${error.code})`,
    detail: error.message,
    advice: PLACEMENT_ADVICE[error.code] ?? '',
  };
}

export const HEALTH_WORDS: Record<string, string> = {
  ok: 'Healthy',
  degraded: 'Degraded',
  suspect: 'Not heard from',
  pruned: 'Gone',
};

export const RUNNER_WORDS: Record<string, string> = {
  starting: 'Starting',
  ready: 'Ready',
  restarting: 'Restarting',
  failed: 'Failed',
  stopped: 'Stopped',
  unknown: 'Unknown',
  loading: 'Loading',
};

export const SHAPE_WORDS: Record<string, string> = {
  single: 'One node',
  replicas: 'Replicas',
  pooled: 'Split across nodes',
};

export function roleWords(role: string): string {
  return role === 'full' ? 'full copy' : role === 'driver' ? 'driver' : role === 'donor' ? 'memory donor' : role;
}

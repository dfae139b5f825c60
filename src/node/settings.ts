import type { SettingsControl } from '../api/control/settings-routes.js';
import type { ControlPlane } from '../cluster/control-plane.js';

/** How long `PUT /settings` waits for this node to apply the decided change before answering with what it has. */
const APPLY_WAIT_MS = 5_000;

/**
 * The settings routes' port over the control plane: a change is a SetSettings command decided by
 * the master (a node with no cluster founds one of itself first, as placing does), and the answer
 * is the settings once this node applied it.
 */
export function settingsControl(plane: ControlPlane): SettingsControl {
  return {
    get: () => plane.view().state.settings,
    async set(patch) {
      await plane.ensureClusterExists();
      const { idx } = await plane.submit({ type: 'SetSettings', patch });
      await appliedUpTo(plane, idx);
      return plane.view().state.settings;
    },
  };
}

/** Resolves once this node's log reaches `idx` (a follower hears the ack before the event, sometimes), or after APPLY_WAIT_MS. */
function appliedUpTo(plane: ControlPlane, idx: number): Promise<void> {
  if (plane.view().lastIdx >= idx) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      off();
      resolve();
    };
    const timer = setTimeout(done, APPLY_WAIT_MS);
    const off = plane.onStateChange(() => {
      if (plane.view().lastIdx >= idx) done();
    });
  });
}

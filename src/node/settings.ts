import type { SettingsControl } from '../api/control/settings-routes.js';
import type { ControlPlane } from '../cluster/control-plane.js';
import type { Logger } from '../common/log.js';

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

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Says loudly, at start, that the inference API is open to the network: a node bound beyond
 * loopback without an API key serves (and spends its compute on) anyone who can reach the port.
 */
export function warnIfOpenToNetwork(log: Logger, host: string, keyed: boolean, port: number): void {
  if (keyed || isLoopbackHost(host)) return;
  const where = host === '0.0.0.0' || host === '::' ? 'every network interface' : host;
  log.warn(
    { host, port },
    [
      '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!',
      `!! The inference API listens on ${where} (port ${port}) with NO API KEY:`,
      '!! anyone who can reach this port can use your models.',
      '!! Set a key with one of:',
      '!!   shoal run --api-key <key>          (or SHOAL_API_KEYS=<key>, or api-key in shoal.toml)',
      '!!   shoal config set api-keys <key>    (for every member of the cluster)',
      '!! or keep the API on this machine with --host 127.0.0.1.',
      '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!',
    ].join('\n'),
  );
}
